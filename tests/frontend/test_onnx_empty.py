"""Empty tensors in ONNX models: a zero-size graph input is a known constant (still an input of the module), a
node whose result has no elements computes nothing, and a reduction over an empty set gives the op's identity;
compared with ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.errors import UnsupportedFeatureError

from .conftest import run_onnxruntime


def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


_REDUCES = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceL1", "ReduceL2",
            "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


_FLOAT_ONLY = ("ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp")  # ONNX Runtime has no int32 kernels


@pytest.mark.parametrize("op, elem, dtype", [(op, TensorProto.FLOAT, np.float32) for op in _REDUCES]
                         + [(op, TensorProto.INT32, np.int32) for op in _REDUCES if op not in _FLOAT_ONLY])
def test_reduce_over_an_empty_set_gives_the_identity_of_onnxruntime(op, elem, dtype):
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    model = _model([node], [_vi("x", [2, 0, 4], elem)], [_vi("y", None, elem)], [axes])
    x = np.zeros((2, 0, 4), dtype)
    got, want = tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})[0]
    assert got.shape == want.shape == (2, 1, 4) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_empty_axes_input_reduces_everything_and_is_a_module_input():
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
    model = _model([node], [_vi("x", [3, 4]), _vi("axes", [0], TensorProto.INT64)], [_vi("y", None)])
    module = tilegrad.compile(model)
    assert module.input_shapes == {"x": (3, 4), "axes": (0,)}
    x, axes = np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros(0, np.int64)
    np.testing.assert_array_equal(module(x, axes), run_onnxruntime(model, {"x": x, "axes": axes})[0])


def test_empty_slice_and_split_parts_vanish_from_a_concat():
    split = numpy_helper.from_array(np.array([5, 0], np.int64), "split")
    starts, ends = (numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("starts", 5), ("ends", 5)))
    nodes = [helper.make_node("Split", ["x", "split"], ["a", "b"], axis=1),
             helper.make_node("Slice", ["x", "starts", "ends", "one"], ["c"]),
             helper.make_node("Concat", ["b", "a", "c"], ["y"], axis=1),
             helper.make_node("Relu", ["c"], ["z"])]
    one = numpy_helper.from_array(np.array([1], np.int64), "one")
    model = _model(nodes, [_vi("x", [2, 5])], [_vi("y", None), _vi("z", None)], [split, starts, ends, one])
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    got, want = tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].shape == want[1].shape == (2, 0)


def test_expand_and_tile_to_zero_extents_make_empty_outputs():
    shape = numpy_helper.from_array(np.array([0, 3], np.int64), "shape")
    repeats = numpy_helper.from_array(np.array([1, 0], np.int64), "repeats")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"]), helper.make_node("Tile", ["x", "repeats"], ["z"])]
    model = _model(nodes, [_vi("x", [1, 3])], [_vi("y", None), _vi("z", None)], [shape, repeats])
    x = np.ones((1, 3), np.float32)
    got, want = tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})
    assert [g.shape for g in got] == [w.shape for w in want] == [(0, 3), (1, 0)]


def test_empty_input_passes_through_trilu_and_cast():
    nodes = [helper.make_node("Trilu", ["x"], ["t"]), helper.make_node("Cast", ["t"], ["y"], to=TensorProto.INT64)]
    model = _model(nodes, [_vi("x", [0, 5])], [_vi("y", None, TensorProto.INT64)])
    y = tilegrad.compile(model)(np.zeros((0, 5), np.float32))
    assert y.shape == (0, 5) and y.dtype == np.int64


def test_empty_operands_fold_and_empty_results_compute_nothing():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    model = _model(nodes, [_vi("x", [2, 0]), _vi("w", [0, 3])], [_vi("y", None)])
    x = np.zeros((2, 0), np.float32)
    np.testing.assert_array_equal(tilegrad.compile(model)(x, np.zeros((0, 3), np.float32)), np.zeros((2, 3)))
    w = numpy_helper.from_array(np.ones((3, 0), np.float32), "w")
    e = numpy_helper.from_array(np.ones((4, 0), np.float32), "e")
    nodes = [helper.make_node("Concat", ["x", "w"], ["y"], axis=1, name="cat"),
             helper.make_node("MatMul", ["y", "e"], ["z"], name="mm")]
    model = _model(nodes, [_vi("x", [3, 4])], [_vi("z", None)], [w, e])
    np.testing.assert_array_equal(tilegrad.compile(model)(np.ones((3, 4), np.float32)), np.zeros((3, 0)))


def test_an_empty_tensor_read_with_computed_ones_names_the_node():
    a = numpy_helper.from_array(np.ones((3, 0), np.float32), "a")
    b = numpy_helper.from_array(np.ones((0, 4), np.float32), "b")
    model = _model([helper.make_node("Gemm", ["a", "b", "c"], ["y"], name="gemm")], [_vi("c", [3, 4])],
                   [_vi("y", None)], [a, b])
    with pytest.raises(UnsupportedFeatureError, match="node 'gemm'.*reads the empty tensor"):
        tilegrad.compile(model)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape", [(3, 4, 2), (3, 0, 2)])
def test_bool_max_and_min_are_any_and_all(op, shape):
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    model = _model([node], [_vi("x", list(shape), TensorProto.BOOL)], [_vi("y", None, TensorProto.BOOL)], [axes],
                   opset=20)
    x = np.random.default_rng(0).random(shape) > 0.6
    got = tilegrad.compile(model)(x)
    want = (np.any if op == "ReduceMax" else np.all)(x, axis=1)  # ONNX's empty-set identities: False and True
    if x.size:  # (ONNX Runtime refuses an empty bool set)
        np.testing.assert_array_equal(want, run_onnxruntime(model, {"x": x})[0])
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)


def test_a_module_with_empty_inputs_and_outputs_saves_and_loads(tmp_path):
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1), helper.make_node("Trilu", ["e"], ["z"])]
    model = _model(nodes, [_vi("x", [3, 4]), _vi("axes", [0], TensorProto.INT64), _vi("e", [0, 4])],
                   [_vi("y", None), _vi("z", None)])
    tilegrad.compile(model).save(tmp_path / "m")
    y, z = tilegrad.load(tmp_path / "m")(np.ones((3, 4), np.float32), np.zeros(0, np.int64),
                                         np.zeros((0, 4), np.float32))
    np.testing.assert_array_equal(y, [[12.0]])
    assert z.shape == (0, 4) and z.dtype == np.float32


def test_a_concat_of_empty_tensors_along_a_full_axis_keeps_the_summed_extent():
    """Found by the fuzzer: Concat of two [0, 2] tensors along axis 1 is [0, 4], not the first input."""
    starts, ends = (numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("starts", 3), ("ends", 3)))
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "zero"], ["e"]),
             helper.make_node("Concat", ["e", "e"], ["y"], axis=1)]
    model = _model(nodes, [_vi("x", [3, 2])], [_vi("y", None)], [starts, ends, zero])
    x = np.ones((3, 2), np.float32)
    assert tilegrad.compile(model)(x).shape == run_onnxruntime(model, {"x": x})[0].shape == (0, 4)
