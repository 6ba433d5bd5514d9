"""Sequences and optionals inside an ONNX graph, resolved at import, against ONNX Runtime: SplitToSequence,
SequenceAt/Insert/Erase/Length, ConcatFromSequence, SequenceMap, Optional; a sequence graph output is refused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tilegrad.errors import ShapeError, UnsupportedFeatureError
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.interpret import run_reference

from .conftest import constant_node as _const
from .conftest import run_onnxruntime
from .conftest import value_info as _vi

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, opset=18):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds):
    got, want = run_reference(import_onnx(model), list(feeds.values())), run_onnxruntime(model, feeds)
    assert len(got) == len(want)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        np.testing.assert_allclose(a, w, rtol=1e-6)


X = np.arange(24, dtype=np.float32).reshape(4, 6) / 7


@pytest.mark.parametrize("split,attrs", [(None, {"axis": 1, "keepdims": 0}), (None, {"axis": 0}),
                                         (np.array(4, np.int64), {"axis": 1}),
                                         (np.array([1, 3], np.int64), {"axis": 0})])
def test_split_then_pick_insert_erase_and_concatenate(split, attrs):
    """Split x, move the last part to the front, drop the second, concatenate what is left (stack the squeezed
    parts) and add the sequence's length."""
    split_inputs = ["x", "split"] if split is not None else ["x"]
    nodes = ([_const("split", split)] if split is not None else []) + [
        helper.make_node("SplitToSequence", split_inputs, ["parts"], **attrs),
        _const("last", np.array(-1, np.int64)), _const("front", np.array(0, np.int64)),
        _const("second", np.array(1, np.int64)),
        helper.make_node("SequenceAt", ["parts", "last"], ["tail"]),
        helper.make_node("SequenceInsert", ["parts", "tail", "front"], ["moved"]),
        helper.make_node("SequenceErase", ["moved", "second"], ["kept"]),
        helper.make_node("ConcatFromSequence", ["kept"], ["joined"], axis=attrs["axis"],
                         new_axis=int(attrs.get("keepdims", 1) == 0)),
        helper.make_node("SequenceLength", ["kept"], ["n"]),
        helper.make_node("Cast", ["n"], ["n_f"], to=F),
        helper.make_node("Add", ["joined", "n_f"], ["y"])]
    _check(_model(nodes, [_vi("x", F, [4, 6])], [_vi("y")]), {"x": X})


def test_construct_and_stack_along_a_new_axis_compiled():
    import tilegrad

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("SequenceConstruct", ["x", "r", "n"], ["seq"]),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=-1, new_axis=1)]
    model = _model(nodes, [_vi("x", F, [4, 6])], [_vi("y")])
    _check(model, {"x": X - 1})
    np.testing.assert_allclose(tilegrad.compile(model)(X - 1), run_onnxruntime(model, {"x": X - 1})[0], rtol=1e-6)


def test_sequence_map_inlines_its_body_per_element():
    body = helper.make_graph([helper.make_node("Mul", ["part", "scale"], ["scaled"]),
                              helper.make_node("ReduceSum", ["scaled"], ["total"], keepdims=1)],
                             "body", [_vi("part", F, [2, 6]), _vi("scale", F, [6])], [_vi("total", F, [1, 1])])
    nodes = [_const("split", np.array([2, 2], np.int64)),
             helper.make_node("SplitToSequence", ["x", "split"], ["parts"], axis=0),
             helper.make_node("SequenceMap", ["parts", "scale"], ["totals"], body=body),
             helper.make_node("ConcatFromSequence", ["totals"], ["y"], axis=0)]
    model = _model(nodes, [_vi("x", F, [4, 6]), _vi("scale", F, [6])], [_vi("y")])
    _check(model, {"x": X, "scale": np.linspace(-1, 1, 6).astype(np.float32)})


def test_optionals_with_a_known_presence():
    tensor_type = helper.make_tensor_type_proto(F, [4, 6])
    nodes = [helper.make_node("Optional", ["x"], ["full"]),
             helper.make_node("Optional", [], ["empty"], type=tensor_type),
             helper.make_node("OptionalHasElement", ["full"], ["has"]),
             helper.make_node("OptionalHasElement", ["empty"], ["has_not"]),
             helper.make_node("OptionalGetElement", ["full"], ["got"]),
             helper.make_node("Cast", ["has"], ["has_f"], to=F), helper.make_node("Cast", ["has_not"], ["not_f"], to=F),
             helper.make_node("Sub", ["got", "not_f"], ["d"]), helper.make_node("Add", ["d", "has_f"], ["y"])]
    _check(_model(nodes, [_vi("x", F, [4, 6])], [_vi("y")]), {"x": X})


def test_sequence_graph_inputs_and_outputs_and_bad_positions_are_refused():
    seq_out = helper.make_tensor_sequence_value_info("parts", F, None)
    model = _model([helper.make_node("SplitToSequence", ["x"], ["parts"])], [_vi("x", F, [4, 6])], [seq_out])
    with pytest.raises(UnsupportedFeatureError, match="graph output 'parts' is a seq\\(tensor\\(float\\)\\)"):
        import_onnx(model)
    seq_in = helper.make_tensor_sequence_value_info("parts", F, None)
    model = _model([helper.make_node("SequenceLength", ["parts"], ["n"])], [seq_in], [_vi("n", I64, [])])
    with pytest.raises(UnsupportedFeatureError, match="input 'parts' is a sequence_type; tilegrad takes tensors"):
        import_onnx(model)
    nodes = [helper.make_node("SplitToSequence", ["x"], ["parts"]), _const("far", np.array(9, np.int64)),
             helper.make_node("SequenceAt", ["parts", "far"], ["y"])]
    with pytest.raises(ShapeError, match="position 9 is outside"):
        import_onnx(_model(nodes, [_vi("x", F, [4, 6])], [_vi("y")]))
