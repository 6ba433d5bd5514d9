"""A product whose epilogue ends in a row-wise normalisation (passes/fusion_rules.py, passes/stitch.py): fused into
one kernel when its rows are whole, refused with a reason otherwise, and with the pre-norm value as a second output
when something else reads it."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.fusion_rules import GraphIndex, refusal
from tilegrad.passes.memory_plan import kernel_count
from tilegrad.passes.stitch import BLOCK

LAYER_NORM = ["reduce_mean", "sub", "mul", "reduce_mean", "add", "sqrt", "reciprocal", "mul", "mul", "add"]


def product_norm_graph(m=10, k=12, n=24, later_reader=False, seed=0):
    """layer_norm(x @ w + bias + r) over the N columns; with `later_reader`, exp of the pre-norm sum is returned
    too (a pre-norm residual stream read again later)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    x, r = b.input("x", (m, k)), b.input("r", (m, n))
    w = b.const(rng.standard_normal((k, n)).astype("float32") / 4, "w")
    bias = b.const(rng.standard_normal(n).astype("float32"), "bias")
    h = b.op("add", b.op("add", b.op("matmul", x, w), bias), r, name="h")
    y = b.op("layer_norm", h, b.const(np.linspace(0.5, 1.5, n, dtype="float32"), "gamma"),
             b.const(np.linspace(-1, 1, n, dtype="float32"), "beta"), axis=-1, name="y")
    return b.build([y, b.op("exp", h, name="later")] if later_reader else [y])


def _prepared(g):
    """The graph as the fuse pass sees it: panel GEMM, layer norm expanded, nothing fused."""
    prepared, _ = optimize(g, 2, disable=["fuse"])
    return prepared


def _stitched(g):
    return optimize(g, 2, options={"fusion": "stitch"})


def _inputs(g, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, v.shape).astype(v.dtype) for v in g.inputs]


def _check_same(before, after):
    inputs = _inputs(before)
    for got, want in zip(run_reference(after, inputs), run_reference(before, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _members(g, ops_from: str):
    """Positions from the node named `ops_from`'s first op to the end of the graph."""
    start = next(i for i, n in enumerate(g.nodes) if n.op == ops_from)
    return frozenset(range(start, len(g.nodes)))


def test_a_product_takes_the_layer_norm_of_its_whole_rows():
    g = product_norm_graph()
    p = _prepared(g)
    assert refusal(GraphIndex(p), _members(p, "panel_matmul")) is None
    fused, report = _stitched(g)
    (node,) = fused.nodes
    assert [n.op for n in node.attrs["body"].nodes] == ["panel_matmul", "add", *LAYER_NORM]  # the bias is the GEMM's
    assert report.decisions["stitch"][node.name]["scheme"] == BLOCK
    _check_same(g, fused)


def test_the_pre_norm_value_read_later_is_the_kernels_second_output():
    g = product_norm_graph(later_reader=True)
    fused, _ = _stitched(g)
    assert kernel_count(fused) == 2
    node, later = fused.nodes
    assert node.op == "fused" and [v.shape for v in node.outputs] == [(10, 24), (10, 24)]
    assert node.attrs["body"].nodes[0].op == "panel_matmul"
    assert later.op == "exp" and later.inputs[0] is node.outputs[0]
    _check_same(g, fused)


def test_rule_based_fusion_keeps_the_norm_apart():
    fused, _ = optimize(product_norm_graph(), 2)
    assert kernel_count(fused) == 2


def test_a_norm_over_other_than_the_products_columns_is_refused():
    b = GraphBuilder()
    x = b.input("x", (6, 8))
    m = b.op("matmul", x, b.const(np.ones((8, 12), "float32"), "w"))
    y = b.op("layer_norm", b.op("reshape", m, shape=(6, 3, 4)), axis=-1)
    p = _prepared(b.build(y))
    reason = refusal(GraphIndex(p), _members(p, "panel_matmul"))
    assert reason is not None and "is not an element-wise epilogue of" in reason and "rows" in reason


def test_a_norm_over_the_rows_axis_is_refused():
    b = GraphBuilder()
    x = b.input("x", (6, 8))
    m = b.op("matmul", x, b.const(np.ones((8, 12), "float32"), "w"))
    y = b.op("sub", m, b.op("reduce_mean", m, axes=(0,), keepdims=1))
    p = _prepared(b.build(y))
    reason = refusal(GraphIndex(p), _members(p, "panel_matmul"))
    assert reason is not None and "reduce_mean" in reason


def test_a_batched_product_gives_no_whole_rows_to_normalise():
    b = GraphBuilder()
    x = b.input("x", (2, 6, 8))
    m = b.op("matmul", x, b.input("w", (2, 8, 12)), name="m")
    p = _prepared(b.build(b.op("softmax", m, axis=-1)))
    reason = refusal(GraphIndex(p), _members(p, "matmul"))
    assert reason is not None and "does not give whole rows of a 2-D product" in reason


def test_only_the_pre_norm_value_may_leave_besides_the_output():
    b = GraphBuilder()
    x = b.input("x", (6, 8))
    m = b.op("matmul", x, b.const(np.ones((8, 12), "float32"), "w"))
    mean = b.op("reduce_mean", m, axes=(1,), keepdims=1, name="mean")
    y = b.op("sub", m, mean, name="centred")
    p = _prepared(b.build([y, b.op("neg", mean, name="later")]))
    members = _members(p, "panel_matmul") - {len(p.nodes) - 1}
    reason = refusal(GraphIndex(p), members)
    assert reason is not None and "would leave the kernel besides the output of 'centred'" in reason


def test_a_kernel_ending_in_a_reduction_writes_no_whole_rows():
    """The row means of a product: its rows reduced away, nothing for the row blocks to write."""
    b = GraphBuilder()
    m = b.op("matmul", b.input("x", (6, 8)), b.const(np.ones((8, 12), "float32"), "w"))
    p = _prepared(b.build(b.op("reduce_mean", m, axes=(1,), keepdims=1, name="means")))
    reason = refusal(GraphIndex(p), _members(p, "panel_matmul"))
    assert reason is not None and reason.startswith("'means' (reduce_mean) does not give whole rows of")
    assert reason.endswith("output, which the row blocks write")


def test_a_second_output_must_share_the_outputs_row_blocks():
    """h (6, 12) beside layer_norm(h as (2, 3, 12)): 6 rows against 2 x 3, which one loop of row blocks cannot
    run together."""
    b = GraphBuilder()
    x = b.input("x", (6, 8))
    h = b.op("matmul", x, b.const(np.ones((8, 12), "float32"), "w"), name="h")
    y = b.op("layer_norm", b.op("reshape", h, shape=(2, 3, 12)), axis=-1, name="y")
    p = _prepared(b.build([y, b.op("exp", h, name="later")]))
    members = _members(p, "panel_matmul") - {next(i for i, n in enumerate(p.nodes) if n.op == "exp")}
    reason = refusal(GraphIndex(p), members)
    assert reason is not None and reason.startswith("'h") and "would leave the kernel besides the output of" in reason
    fused, _ = _stitched(b.build([y, b.op("exp", h, name="later")]))
    assert all(len(n.outputs) == 1 for n in fused.nodes)
