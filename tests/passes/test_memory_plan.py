"""The static memory plan: views cost nothing, element-wise kernels write in place, lifetimes let blocks be
reused, and the numbers stay right."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import metrics
from tilegrad.errors import MemoryLimitError
from tilegrad.executor import compile_graph
from tilegrad.passes.memory_plan import check_fits, intermediates_of, kernel_count, nbytes, plan_memory
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


def test_sizes_are_exact_and_a_tensor_larger_than_memory_is_refused_before_building():
    b = GraphBuilder()
    big = b.op("expand", b.input("x", (1,)), shape=(2**32, 2**32))
    g = b.build(b.op("relu", b.op("reduce_sum", big, keepdims=0)))
    assert nbytes(big) == 2**66  # 2**64 elements: an int64 product would wrap to 0
    metrics.reset()
    with pytest.raises(MemoryLimitError, match=r"value 'expand' of shape \(4294967296, 4294967296\) float32 needs "
                                               r"64 EiB, more than this machine's memory"):
        compile_graph(g)
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == 0


def test_a_model_larger_than_memory_in_total_is_refused():
    b = GraphBuilder()
    g = b.build(b.op("neg", b.op("exp", b.input("x", (64, 64)))))
    plan = plan_memory(g, intermediates_of(g))
    check_fits(g, plan, limit=3 * 64 * 64 * 4)
    with pytest.raises(MemoryLimitError, match=r"the model needs 49152 bytes \(workspace 16384 bytes, inputs, "
                                               r"outputs and weights 32768 bytes\), more than this machine's memory"):
        check_fits(g, plan, limit=3 * 64 * 64 * 4 - 1)
