"""sink_reshape: element-wise ops move above reshapes, reshape chains collapse, the values stay the same."""

from __future__ import annotations

import numpy as np

from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes.context import PassContext
from tilegrad.passes.sink_reshape import sink_reshape


def _same(before, after):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(v.shape).astype(v.dtype) for v in before.inputs]
    for got, want in zip(run_reference(after, inputs), run_reference(before, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_activation_between_row_reshapes_runs_on_the_rows():
    """(16, 64) rows -> (1, 16, 64) -> gelu-like chain and a residual -> (16, 64): the chain runs on the rows and
    the reshape pair vanishes."""
    b = GraphBuilder()
    rows, skip = b.input("rows", (16, 64)), b.input("skip", (1, 16, 64))
    x = b.op("reshape", rows, shape=(1, 16, 64))
    y = b.op("mul", x, b.op("erf", b.op("div", x, b.const(np.float32(1.4), "c"))))
    y = b.op("add", b.op("add", y, b.const(np.ones(64, "float32"), "bias")), skip)
    g = b.build(b.op("reshape", y, shape=(16, 64)))
    out = sink_reshape(g, PassContext())
    ops = [n.op for n in out.nodes]
    assert ops.count("reshape") == 1  # only the view of `skip` as rows remains
    assert [n.op for n in out.nodes if n.op != "reshape"] == ["div", "erf", "mul", "add", "add"]
    assert all(n.outputs[0].shape == (16, 64) for n in out.nodes if n.op != "reshape")
    _same(g, out)


def test_an_operand_broadcast_along_another_axis_keeps_the_op_where_it_is():
    b = GraphBuilder()
    rows = b.input("rows", (6, 5))
    x = b.op("reshape", rows, shape=(2, 3, 5))
    g = b.build(b.op("mul", x, b.const(np.ones((3, 1), "float32"), "per_row")))
    out = sink_reshape(g, PassContext())
    assert [n.op for n in out.nodes] == ["reshape", "mul"]
    _same(g, out)


def test_a_reshape_that_changes_the_last_axis_is_left_alone():
    b = GraphBuilder()
    x = b.op("reshape", b.input("x", (4, 6)), shape=(4, 2, 3))
    g = b.build(b.op("exp", x))
    assert [n.op for n in sink_reshape(g, PassContext()).nodes] == ["reshape", "exp"]


def test_a_moved_op_takes_a_name_no_kept_node_has():
    """The rewritten `act` is named afresh while a kept node is already called `act_3` (as in Funnel's exported
    graph, with its `Reshape` and `Reshape_3`): the result keeps every value name unique."""
    b = GraphBuilder()
    rows = b.input("rows", (16, 64))
    y = b.op("relu", b.op("reshape", rows, name="view", shape=(1, 16, 64)), name="act")
    g = b.build(b.op("softmax", y, name="act_3"))
    out = sink_reshape(g, PassContext())
    names = [v.name for n in out.nodes for v in n.outputs]
    assert len(names) == len(set(names)) and "relu" in [n.op for n in out.nodes]
    _same(g, out)
