"""CumSum and CumProd (every attribute), ReverseSequence, MaxUnpool, Compress and Det against ONNX Runtime
(`onnx_cases` in conftest); NonZero of a constant; the refusals of data-shaped ops on run-time data and of
Bernoulli."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

from tilegrad.errors import UnsupportedFeatureError
from tilegrad.frontend.onnx import import_onnx

_rng = np.random.default_rng(29)


def _normal(*shape):
    return _rng.standard_normal(shape).astype("float32")


def test_cumulative_ops_every_attribute_match_onnxruntime(onnx_cases):
    x, ints = _rng.uniform(0.5, 1.5, (3, 4, 5)).astype("float32"), _rng.integers(-3, 4, (4, 5)).astype("int32")
    onnx_cases([{"op": op, "inputs": [data, np.array(axis, "int64")], "attrs": {"exclusive": e, "reverse": r},
                 "consts": (1,)}
                for op in ("CumSum", "CumProd")
                for (data, axis), e, r in itertools.product(((x, 1), (x, -1), (ints, 0)), (0, 1), (0, 1))],
               opset=26, rtol=1e-5, atol=1e-5)


def test_reverse_sequence_and_max_unpool_match_onnxruntime(onnx_cases):
    pooled = _normal(2, 3, 2, 3)
    flat = np.arange(2 * 3 * 4 * 6).reshape(2, 3, 4, 6)[:, :, ::2, ::2]
    picks = (flat + _rng.integers(0, 2, flat.shape) * 6 + _rng.integers(0, 2, flat.shape)).astype("int64")
    onnx_cases([
        {"op": "ReverseSequence", "inputs": [_normal(4, 3, 2), np.array([4, 1, 3], "int64")],
         "attrs": {"batch_axis": 1, "time_axis": 0}},
        {"op": "ReverseSequence", "inputs": [_normal(3, 5), np.array([2, 5, 1], "int64")],
         "attrs": {"batch_axis": 0, "time_axis": 1}},
        {"op": "MaxUnpool", "inputs": [pooled, picks], "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}},
        {"op": "MaxUnpool", "inputs": [pooled, picks, np.array([2, 3, 5, 7], "int64")],
         "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}, "consts": (2,)},
    ], opset=17)


def test_compress_with_a_constant_condition_matches_onnxruntime(onnx_cases):
    x = _normal(3, 4)
    onnx_cases([
        {"op": "Compress", "inputs": [x, np.array([1, 0, 1], bool)], "attrs": {"axis": 0}, "consts": (1,)},
        {"op": "Compress", "inputs": [x, np.array([0, 1, 1, 0], bool)], "attrs": {"axis": -1}, "consts": (1,)},
        {"op": "Compress", "inputs": [x, np.array([0, 1, 0, 0, 1, 1, 0], bool)], "attrs": {}, "consts": (1,)},
    ], opset=17)


def test_det_matches_onnxruntime(onnx_cases):
    onnx_cases([{"op": "Det", "inputs": [_normal(*shape)], "attrs": {}}
                for shape in ((1, 1), (2, 2), (3, 3, 3), (2, 4, 4))], opset=17, rtol=1e-4, atol=1e-5)


def _model(op, inputs, initializers=(), **attrs):
    node = helper.make_node(op, [v.name for v in inputs] + [t.name for t in initializers], ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op", ["NonZero", "Unique", "NonMaxSuppression"])
def test_data_shaped_ops_of_run_time_inputs_are_refused_by_name(op):
    shapes = {"NonMaxSuppression": [[1, 3, 4], [1, 1, 3]]}.get(op, [[2, 3]])
    inputs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, s) for i, s in enumerate(shapes)]
    with pytest.raises(UnsupportedFeatureError, match=f"{op} of an input computed at run time"):
        import_onnx(_model(op, inputs))


def test_bernoulli_is_refused_as_a_random_draw():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    with pytest.raises(UnsupportedFeatureError, match="Bernoulli draws random numbers"):
        import_onnx(_model("Bernoulli", [x]))


def test_compress_of_a_run_time_condition_and_a_large_det_are_refused():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])
    condition = helper.make_tensor_value_info("c", TensorProto.BOOL, [3])
    with pytest.raises(UnsupportedFeatureError, match="condition computed at run time"):
        import_onnx(_model("Compress", [x, condition], axis=0))
    with pytest.raises(UnsupportedFeatureError, match="Det of 5 x 5"):
        import_onnx(_model("Det", [helper.make_tensor_value_info("m", TensorProto.FLOAT, [5, 5])]))


def test_nonzero_of_a_constant_folds():
    import tilegrad

    data = helper.make_tensor("c", TensorProto.FLOAT, [2, 3], [0, 1, 0, 2, 0, 3])
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])
    nodes = [helper.make_node("NonZero", ["c"], ["nz"]), helper.make_node("Add", ["nz", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.INT64, None)], [data])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ones = np.ones((2, 3), "int64")
    np.testing.assert_array_equal(tilegrad.compile(model)(ones), np.array([[0, 1, 1], [1, 0, 2]]) + 1)


def test_float16_cumulative_ops_match_onnxruntime(onnx_cases):
    x = _rng.uniform(0.5, 1.5, (3, 4)).astype("float16")
    onnx_cases([{"op": op, "inputs": [x, np.array(1, "int64")], "attrs": {"reverse": 1}, "consts": (1,)}
                for op in ("CumSum", "CumProd")], opset=26, rtol=2e-3, atol=2e-3)
