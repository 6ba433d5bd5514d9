"""The static memory plan: views cost nothing, element-wise kernels write in place, lifetimes let blocks be
reused, and the numbers stay right."""

from __future__ import annotations

import numpy as np

from tilegrad.executor import compile_graph
from tilegrad.passes.memory_plan import intermediates_of, kernel_count, plan_memory
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference


def _check(g):
    x = [np.random.default_rng(0).standard_normal(v.shape).astype(v.dtype) for v in g.inputs]
    got = compile_graph(g)(*x)
    got = got if isinstance(got, list) else [got]
    for a, b in zip(got, run_reference(g, x)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_reshapes_are_views_without_kernels():
    b = GraphBuilder()
    x = b.input("x", (64, 64))
    y = b.op("reshape", b.op("exp", x), shape=(4096,))
    g = b.build(b.op("neg", b.op("reshape", y, shape=(16, 256))))
    assert kernel_count(g) == 2
    plan = plan_memory(g, intermediates_of(g))
    assert plan.workspace_bytes == 64 * 64 * 4  # one block: the exp's output, seen through both reshapes
    _check(g)


def test_element_wise_kernels_write_in_place():
    b = GraphBuilder()
    x = b.input("x", (256, 256))
    g = b.build(b.op("exp", b.op("relu", b.op("neg", b.op("sigmoid", b.op("tanh", x))))))
    plan = plan_memory(g, intermediates_of(g))
    assert plan.workspace_bytes == 256 * 256 * 4 and plan.unshared_bytes == 4 * 256 * 256 * 4
    _check(g)


def test_a_value_still_read_later_is_not_overwritten():
    b = GraphBuilder()
    x = b.input("x", (128, 128))
    a = b.op("exp", x)
    c = b.op("neg", a)  # a is read again below, so c may not take a's block
    g = b.build(b.op("add", b.op("tanh", c), a))
    plan = plan_memory(g, intermediates_of(g))
    assert plan.offsets[id(g.nodes[0].outputs[0])] != plan.offsets[id(g.nodes[1].outputs[0])]
    _check(g)


def test_a_reshape_into_a_graph_output_is_written_by_its_producer():
    b = GraphBuilder()
    x = b.input("x", (32, 48))
    g = b.build(b.op("reshape", b.op("exp", x), shape=(4, 8, 48)))
    plan = plan_memory(g, intermediates_of(g))
    assert kernel_count(g) == 1 and plan.workspace_bytes == 0
    _check(g)
