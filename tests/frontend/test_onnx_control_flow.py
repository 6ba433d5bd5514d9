"""If, Loop and Scan from ONNX, resolved at import, against ONNX Runtime on hand-built models: constant
conditions, outer-scope values, loop-carried values and scan outputs, a condition that folds each iteration, an
If inside a Loop body, Scan axes and directions, and the refusals (run-time conditions, too large an unroll)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tilegrad.errors import ResourceLimitError, UnsupportedFeatureError
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.interpret import run_reference

from .conftest import constant_node as _const
from .conftest import run_onnxruntime
from .conftest import value_info as _vi

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model, feeds, rtol=1e-6):
    g = import_onnx(model)
    got, want = run_reference(g, list(feeds.values())), run_onnxruntime(model, feeds)
    assert len(got) == len(want)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        np.testing.assert_allclose(a, w, rtol=rtol, atol=1e-6)
    return g


def _branch(name, op, out):
    """A branch that applies `op` to the outer-scope x."""
    return helper.make_graph([helper.make_node(op, ["x"], [out])], name, [], [_vi(out)])


@pytest.mark.parametrize("rows,expected_op", [(4, "sigmoid"), (2, "tanh")])
def test_if_on_a_shape_inlines_the_chosen_branch(rows, expected_op):
    """The condition Shape(x)[0] > 3 folds to a constant; each branch reads x from the outer scope."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), _const("zero", np.array(0, np.int64)),
             helper.make_node("Gather", ["s", "zero"], ["n"]), _const("three", np.array(3, np.int64)),
             helper.make_node("Greater", ["n", "three"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", "Sigmoid", "t"),
                              else_branch=_branch("else", "Tanh", "e"))]
    model = _model(nodes, [_vi("x", F, [rows, 3])], [_vi("y", F, [rows, 3])])
    g = _check(model, {"x": np.random.default_rng(0).normal(size=(rows, 3)).astype(np.float32)})
    assert [n.op for n in g.nodes] == [expected_op]


def test_if_on_a_run_time_value_is_refused_like_other_run_time_operands():
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0), _const("zero", np.array(0, np.float32)),
             helper.make_node("Greater", ["total", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", "Relu", "t"),
                              else_branch=_branch("else", "Neg", "e"))]
    model = _model(nodes, [_vi("x", F, [3])], [_vi("y", F, [3])])
    with pytest.raises(UnsupportedFeatureError, match=r"node 'If_3': the condition must be a constant"):
        import_onnx(model)


def _loop_body(extra_nodes=(), cond_out="cond_in"):
    """Body (i, cond_in, acc) -> (cond, acc + x * i, scan: acc * 2): x comes from the outer scope."""
    nodes = [helper.make_node("Cast", ["i"], ["i_f"], to=F), helper.make_node("Mul", ["x", "i_f"], ["step"]),
             helper.make_node("Add", ["acc", "step"], ["acc_out"]), _const("two", np.array(2, np.float32)),
             helper.make_node("Mul", ["acc_out", "two"], ["doubled"]), *extra_nodes,
             helper.make_node("Identity", [cond_out], ["cond_out"])]
    return helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("acc", F, [3])],
                             [_vi("cond_out", BOOL, []), _vi("acc_out", F, [3]), _vi("doubled", F, [3])])


def test_loop_with_a_constant_trip_count_unrolls_carried_values_and_scan_outputs():
    import tilegrad

    nodes = [_const("m", np.array(4, np.int64)), _const("go", np.array(True)),
             helper.make_node("Loop", ["m", "go", "acc0"], ["acc", "scan"], body=_loop_body())]
    model = _model(nodes, [_vi("x", F, [3]), _vi("acc0", F, [3])], [_vi("acc", F, [3]), _vi("scan", F, [4, 3])])
    rng = np.random.default_rng(1)
    feeds = {"x": rng.normal(size=3).astype(np.float32), "acc0": rng.normal(size=3).astype(np.float32)}
    _check(model, feeds)
    got = tilegrad.compile(model)(*feeds.values())
    for a, w in zip(got, run_onnxruntime(model, feeds)):
        np.testing.assert_allclose(a, w, rtol=1e-6)


def test_loop_condition_that_folds_each_iteration_stops_it():
    """No trip count: the body's condition i < 2 is a constant in each unrolled copy, so three iterations run."""
    body = _loop_body([_const("limit", np.array(2, np.int64)), helper.make_node("Less", ["i", "limit"], ["more"])],
                      cond_out="more")
    nodes = [_const("go", np.array(True)), helper.make_node("Loop", ["", "go", "acc0"], ["acc", "scan"], body=body)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("acc0", F, [3])], [_vi("acc", F, [3]), _vi("scan", F, None)])
    feeds = {"x": np.arange(3, dtype=np.float32), "acc0": np.ones(3, np.float32)}
    _check(model, feeds)


def test_if_inside_a_loop_body_picks_a_branch_per_iteration():
    """The body's If tests the iteration number (a constant in each copy): even iterations add x, odd ones
    subtract it, both branches reading the outer graph's x and the body's acc."""
    add = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["a"])], "even", [], [_vi("a", F, [3])])
    sub = helper.make_graph([helper.make_node("Sub", ["acc", "x"], ["s"])], "odd", [], [_vi("s", F, [3])])
    body = helper.make_graph(
        [_const("two", np.array(2, np.int64)), helper.make_node("Mod", ["i", "two"], ["parity"]),
         _const("zero", np.array(0, np.int64)), helper.make_node("Equal", ["parity", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=add, else_branch=sub),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("acc", F, [3])],
        [_vi("cond_out", BOOL, []), _vi("acc_out", F, [3])])
    nodes = [_const("m", np.array(5, np.int64)), helper.make_node("Loop", ["m", "", "acc0"], ["acc"], body=body)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("acc0", F, [3])], [_vi("acc", F, [3])])
    _check(model, {"x": np.array([1, 2, 3], np.float32), "acc0": np.zeros(3, np.float32)})


def test_loop_refusals_name_the_node():
    forever = _model([helper.make_node("Loop", ["", "", "acc0"], ["acc", "scan"], body=_loop_body())],
                     [_vi("x", F, [3]), _vi("acc0", F, [3])], [_vi("acc", F, [3]), _vi("scan", F, None)])
    with pytest.raises(UnsupportedFeatureError, match="Loop_0.*neither a trip count nor a condition"):
        import_onnx(forever)
    huge = _model([_const("m", np.array(100_000, np.int64)),
                   helper.make_node("Loop", ["m", "", "acc0"], ["acc", "scan"], body=_loop_body())],
                  [_vi("x", F, [3]), _vi("acc0", F, [3])], [_vi("acc", F, [3]), _vi("scan", F, None)])
    with pytest.raises(ResourceLimitError, match="Loop_1.*100000 iteration"):
        import_onnx(huge)
    run_time = _model([helper.make_node("Loop", ["m", "", "acc0"], ["acc", "scan"], body=_loop_body())],
                      [_vi("m", I64, []), _vi("x", F, [3]), _vi("acc0", F, [3])],
                      [_vi("acc", F, [3]), _vi("scan", F, None)])
    with pytest.raises(UnsupportedFeatureError, match="the trip count must be a constant"):
        import_onnx(run_time)


@pytest.mark.parametrize("in_axes,in_dirs,out_axes,out_dirs", [
    (None, None, None, None),
    ([1, 0], [1, 0], [1], [0]),
    ([0, 1], [0, 1], [-1], [1]),
])
def test_scan_matches_onnxruntime(in_axes, in_dirs, out_axes, out_dirs):
    """state += a_t * b_t + w (w from the outer scope); the scan output is the running state."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["a_t", "b_t"], ["ab"]), helper.make_node("Add", ["ab", "w"], ["abw"]),
         helper.make_node("Add", ["state", "abw"], ["state_out"]), helper.make_node("Identity", ["state_out"], ["y"])],
        "body", [_vi("state", F, [2]), _vi("a_t", F, [2]), _vi("b_t", F, [2])],
        [_vi("state_out", F, [2]), _vi("y", F, [2])])
    attrs = {k: v for k, v in [("scan_input_axes", in_axes), ("scan_input_directions", in_dirs),
                               ("scan_output_axes", out_axes), ("scan_output_directions", out_dirs)] if v}
    a_shape = (4, 2) if not in_axes or in_axes[0] == 0 else (2, 4)
    b_shape = (4, 2) if not in_axes or in_axes[1] == 0 else (2, 4)
    node = helper.make_node("Scan", ["s0", "a", "b"], ["s", "ys"], body=body, num_scan_inputs=2, **attrs)
    rng = np.random.default_rng(2)
    model = _model([node], [_vi("s0", F, [2]), _vi("a", F, a_shape), _vi("b", F, b_shape)],
                   [_vi("s", F, [2]), _vi("ys", F, None)], [("w", rng.normal(size=2).astype(np.float32))])
    _check(model, {"s0": rng.normal(size=2).astype(np.float32), "a": rng.normal(size=a_shape).astype(np.float32),
                   "b": rng.normal(size=b_shape).astype(np.float32)})


def test_nested_loops_are_limited_in_all(monkeypatch):
    """Each Loop alone is small, but the inner one unrolls once per outer iteration: the model-wide count of
    inlined subgraph nodes refuses it."""
    from tilegrad.frontend import onnx_control_flow

    monkeypatch.setattr(onnx_control_flow, "MAX_INLINED_NODES", 50)
    inner = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                               helper.make_node("Add", ["v", "x"], ["v_out"])],
                              "inner", [_vi("j", I64, []), _vi("c_in", BOOL, []), _vi("v", F, [3])],
                              [_vi("c_out", BOOL, []), _vi("v_out", F, [3])])
    outer = helper.make_graph([_const("m_in", np.array(10, np.int64)),
                               helper.make_node("Loop", ["m_in", "", "acc"], ["acc_out"], body=inner),
                               helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                              "outer", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("acc", F, [3])],
                              [_vi("cond_out", BOOL, []), _vi("acc_out", F, [3])])
    nodes = [_const("m", np.array(10, np.int64)), helper.make_node("Loop", ["m", "", "acc0"], ["acc"], body=outer)]
    model = _model(nodes, [_vi("x", F, [3]), _vi("acc0", F, [3])], [_vi("acc", F, [3])])
    with pytest.raises(ResourceLimitError, match="more than 50 subgraph nodes"):
        import_onnx(model)
    monkeypatch.setattr(onnx_control_flow, "MAX_INLINED_NODES", 1000)
    _check(model, {"x": np.array([1, 2, 3], np.float32), "acc0": np.zeros(3, np.float32)})


def test_scan_attributes_that_do_not_fit_its_inputs_are_named():
    from tilegrad.frontend.onnx_file import ModelFormatError

    body = helper.make_graph([helper.make_node("Add", ["s", "a_t"], ["s_out"])], "body",
                             [_vi("s", F, [2]), _vi("a_t", F, [2])], [_vi("s_out", F, [2])])
    node = helper.make_node("Scan", ["s0", "a"], ["s"], body=body, num_scan_inputs=1, scan_input_axes=[0, 1])
    model = _model([node], [_vi("s0", F, [2]), _vi("a", F, [4, 2])], [_vi("s", F, [2])])
    with pytest.raises(ModelFormatError, match="scan_input_axes has 2 entries; it needs 1"):
        import_onnx(model)


def test_a_loop_whose_condition_stays_true_ends_at_the_limit(monkeypatch):
    """The body passes its condition and value through without a node: no trip count, so only the limit ends
    the unrolling."""
    from tilegrad.frontend import onnx_control_flow

    monkeypatch.setattr(onnx_control_flow, "MAX_UNROLLED_NODES", 100)
    body = helper.make_graph([], "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("v", F, [3])],
                             [_vi("cond_in", BOOL, []), _vi("v", F, [3])])
    nodes = [_const("go", np.array(True)), helper.make_node("Loop", ["", "go", "x"], ["y"], body=body)]
    model = _model(nodes, [_vi("x", F, [3])], [_vi("y", F, [3])])
    with pytest.raises(ResourceLimitError, match="Loop_1.*unrolls 101 iteration"):
        import_onnx(model)
