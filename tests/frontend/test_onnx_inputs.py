"""The analysis of an ONNX model's inputs: symbolic dimensions, and value inputs found by data flow (through any
node but Shape and Size) into shape-like operands; and the specialised model, checked against ONNX Runtime."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tilegrad.errors import ShapeError
from tilegrad.frontend.onnx_inputs import is_dynamic, model_inputs, specialize

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs=None):
    outputs = outputs or [helper.make_tensor_value_info("y", F, None)]
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", 17)])


def _by_name(proto, **shapes):
    return {i.name: i for i in model_inputs(proto, shapes)}


def test_a_value_reaches_a_shape_operand_through_arithmetic():
    nodes = [helper.make_node("Add", ["k", "one"], ["k1"]), helper.make_node("Concat", ["k1", "k1"], ["s"], axis=0),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="r")]
    inputs = [helper.make_tensor_value_info("x", F, ["N", 4]), helper.make_tensor_value_info("k", I64, [1]),
              helper.make_tensor_value_info("one", I64, [1])]
    found = _by_name(_model(nodes, inputs))
    assert found["k"].shape_uses == found["one"].shape_uses == ("Reshape (node 'r') input 1",)
    assert not found["x"].value_needed and found["x"].symbolic and found["x"].dims == ("N", 4)
    assert found["x"].describe() == "x float32[N, 4]"


def test_shape_cuts_the_flow_of_values():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", I64, [2, 3])]
    (x,) = model_inputs(_model(nodes, inputs))
    assert not x.value_needed and not x.symbolic
    assert not is_dynamic([x])


def test_every_shape_like_operand_of_a_node_counts():
    nodes = [helper.make_node("Slice", ["x", "starts", "ends"], ["y"], name="s"),
             helper.make_node("ReduceSum", ["y", "axes"], ["z"], name="sum")]
    inputs = [helper.make_tensor_value_info("x", F, [4, 4])] + \
        [helper.make_tensor_value_info(n, I64, [1]) for n in ("starts", "ends", "axes")]
    found = _by_name(_model(nodes, inputs, [helper.make_tensor_value_info("z", F, None)]))
    assert found["starts"].shape_uses == ("Slice (node 's') input 1",)
    assert found["ends"].shape_uses == ("Slice (node 's') input 2",)
    assert found["axes"].shape_uses == ("ReduceSum (node 'sum') input 1",)
    assert not found["x"].value_needed


def test_float_inputs_and_conditions_are_value_inputs_too():
    nodes = [helper.make_node("Cast", ["s"], ["i"], to=I64), helper.make_node("Reshape", ["x", "i"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("s", F, [2])]
    assert _by_name(_model(nodes, inputs))["s"].shape_uses == ("Reshape (node 'Reshape_1') input 1",)
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [],
                               [helper.make_tensor_value_info("o", F, [2, 3])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=branch)]
    inputs = [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    assert _by_name(_model(nodes, inputs))["c"].shape_uses == ("If (node 'if') input 0",)


def test_input_shapes_fix_symbolic_dimensions_and_are_checked():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, ["N", 4])])
    assert _by_name(model, x=(2, 4))["x"].dims == (2, 4) and not is_dynamic(model_inputs(model, {"x": (2, 4)}))
    with pytest.raises(ShapeError, match="fixes its dimension 1 to 4"):
        model_inputs(model, {"x": (2, 5)})
    with pytest.raises(ShapeError, match=r"input_shapes names \['z'\]"):
        model_inputs(model, {"z": (2, 5)})
    with pytest.raises(ShapeError, match="3 dimension"):
        model_inputs(model, {"x": (2, 4, 1)})
    for shape in (("N", 4), (2.5, 4), (-1, 4)):  # a name or a fraction is not a size: dynamic= bounds names
        with pytest.raises(ShapeError, match=r"input 'x' the shape .*: it fixes every dimension to a whole number"):
            model_inputs(model, {"x": shape})


def test_a_specialised_model_holds_the_values_and_matches_onnxruntime():
    import onnxruntime as ort

    nodes = [helper.make_node("TopK", ["x", "k"], ["y", "i"])]
    inputs = [helper.make_tensor_value_info("x", F, [2, 6]), helper.make_tensor_value_info("k", I64, [1])]
    outputs = [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("i", I64, None)]
    model = _model(nodes, inputs, outputs)
    fixed = specialize(model, {"k": np.array([3], "int64")})
    assert [vi.name for vi in fixed.graph.input] == ["x"] and [t.name for t in fixed.graph.initializer] == ["k"]
    x = np.random.default_rng(0).standard_normal((2, 6)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x, "k": np.array([3], "int64")})
    got = ort.InferenceSession(fixed.SerializeToString()).run(None, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert len(model.graph.input) == 2  # the original is left alone


def test_clip_bounds_given_at_run_time_are_data_not_value_inputs():
    import onnxruntime as ort

    import tilegrad
    from tilegrad.api import compile_with_report
    from tilegrad.runtime.module import Module

    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", F, [3, 5]), helper.make_tensor_value_info("lo", F, []),
              helper.make_tensor_value_info("hi", F, [])]
    model = _model(nodes, inputs)
    assert not any(i.value_needed for i in model_inputs(model))
    mod = tilegrad.compile(model)
    assert isinstance(mod, Module)  # one compile serves every bound
    session = ort.InferenceSession(model.SerializeToString())
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    for lo, hi in ((-0.5, 0.5), (0.0, 2.0), (1.0, -1.0)):  # min above max gives max, as in ONNX Runtime
        feeds = {"x": x, "lo": np.array(lo, "float32"), "hi": np.array(hi, "float32")}
        np.testing.assert_array_equal(mod(**feeds),
                                      session.run(None, feeds)[0])


def test_a_value_reaches_a_shape_operand_inside_a_subgraph():
    import onnxruntime as ort

    import tilegrad
    from tilegrad.api import compile_with_report

    branch = helper.make_graph([helper.make_node("Expand", ["x", "s"], ["o"], name="grow")], "b", [],
                               [helper.make_tensor_value_info("o", F, None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["o2"])], "b2", [],
                              [helper.make_tensor_value_info("o2", F, None)])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch, else_branch=other)]
    inputs = [helper.make_tensor_value_info("x", F, [3, 1]), helper.make_tensor_value_info("s", I64, [2]),
              helper.make_tensor_value_info("c", TensorProto.BOOL, [])]
    model = _model(nodes, inputs)
    found = _by_name(model)
    assert found["s"].shape_uses == ("If (node 'if') then_branch: Expand (node 'grow') input 1",)
    assert found["x"].shape_uses == () and found["c"].shape_uses == ("If (node 'if') input 0",)
    mod, session = tilegrad.compile(model), ort.InferenceSession(model.SerializeToString())
    x = np.arange(3, dtype="float32").reshape(3, 1)
    for shape in ((3, 4), (1, 6)):
        feeds = {"x": x, "s": np.array(shape, "int64"), "c": np.array(True)}
        np.testing.assert_array_equal(mod(**feeds), session.run(None, feeds)[0])


def test_a_negative_declared_dimension_is_symbolic_as_onnx_runtime_reads_it():
    """Older exporters (paddle2onnx) write a dynamic batch as dim_value -1; a zero stays a real empty dimension."""
    import onnxruntime as ort

    import tilegrad
    from tilegrad.api import compile_with_report

    x = helper.make_tensor_value_info("x", F, [-1, 3, 0])
    x.type.tensor_type.shape.dim[2].ClearField("dim_value")  # unnamed symbolic: neither value nor name
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x, helper.make_tensor_value_info("e", F, [0, 2])])
    found = _by_name(model)
    assert found["x"].dims == ("?", 3, "?") and found["x"].symbolic and found["e"].dims == (0, 2)
    model = _model([helper.make_node("Sigmoid", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, [-1, 3])])
    module = tilegrad.compile(model.SerializeToString())
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 4):
        xs = np.random.default_rng(batch).standard_normal((batch, 3)).astype("float32")
        np.testing.assert_allclose(module(xs), session.run(None, {"x": xs})[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match=r"input x float32\[\?, 3\] has symbolic dimensions"):
        compile_with_report(model.SerializeToString())
