"""The stitching explorer (passes/stitch.py), the buildable-pattern rules it shares with fuse.py
(passes/fusion_rules.py) and its evaluators (passes/stitch_cost.py): hand-built graphs whose best plan is known,
and stitched graphs against the unfused reference and compiled."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.fuse import fuse
from tilegrad.passes.fusion_rules import GraphIndex, refusal
from tilegrad.passes.memory_plan import kernel_count
from tilegrad.passes.context import PassContext
from tilegrad.passes.stitch import BLOCK, PACKING, THREAD, Explorer, K
from tilegrad.passes.stitch_cost import EXPENSIVE_WEIGHT, FusionCosts, op_class

COSTS = FusionCosts(seconds_per_byte=1e-10, call_seconds=5e-6, op_seconds=1e-9)


def _stitched(g, opt_level=1, **options):
    return optimize(g, opt_level, options={"fusion": "stitch", "fusion_costs": COSTS, **options})


def _positions(g, *names):
    index = {n.name: i for i, n in enumerate(g.nodes)}
    return frozenset(index[name] for name in names)


def _check_same(before, after, inputs, compiled=False, rtol=1e-5, atol=1e-5):
    want = run_reference(before, inputs)
    for got, w in zip(run_reference(after, inputs), want):
        np.testing.assert_allclose(got, w, rtol=rtol, atol=atol)
    if compiled:
        outs = compile_graph(after)(*inputs)
        for got, w in zip(outs if isinstance(outs, list) else [outs], want):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)


def _inputs(g, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, v.shape).astype(v.dtype) for v in g.inputs]


# -- the rules of a buildable pattern ---------------------------------------------------------------------------


def test_a_pattern_around_an_outside_op_is_refused_as_cyclic():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    a = b.op("exp", x, name="a")
    m = b.op("matmul", a, b.const(np.eye(8, dtype="float32"), "w"), name="m")
    c = b.op("add", a, m, name="c")
    g = b.build(c)
    ix = GraphIndex(g)
    assert "cyclic" in refusal(ix, _positions(g, "a", "c"))
    _, report = _stitched(g)
    notes = report.records[-1].notes
    assert any("refused at 'a': exp+add: a path leaves the pattern and re-enters it (cyclic)" in n for n in notes)


def test_a_reduction_read_per_element_is_refused_it_must_be_a_sub_root():
    b = GraphBuilder()
    x = b.input("x", (6, 5))
    s = b.op("reduce_sum", x, axes=(0,), keepdims=1, name="s")  # over the leading axis: no rows
    y = b.op("sub", x, s, name="y")
    g = b.build(y)
    assert "recompute it per element" in refusal(GraphIndex(g), _positions(g, "s", "y"))
    fused, _ = _stitched(g)
    assert [n.op for n in fused.nodes] == ["reduce_sum", "sub"]


def test_every_kernel_the_rules_make_is_buildable_by_the_shared_definition():
    for g in (_layer_norm_graph((3, 17)), _softmax_graph((5, 9)), _two_chains_graph(), _epilogue_graph()):
        expanded, _ = optimize(g, 2, disable=["fuse"])
        position = {id(n): i for i, n in enumerate(expanded.nodes)}
        ix = GraphIndex(expanded)
        for n in fuse(expanded, PassContext()).nodes:
            if n.op == "fused" and len(n.outputs) == 1:
                members = frozenset(position[id(m)] for m in n.attrs["body"].nodes)
                assert refusal(ix, members) is None, [m.op for m in n.attrs["body"].nodes]


# -- the explorer ----------------------------------------------------------------------------------------------


def _two_chains_graph():
    """Two small independent element-wise chains, a large one between them in topological order."""
    b = GraphBuilder()
    x, y, z = b.input("x", (4, 8)), b.input("y", (8, 4)), b.input("z", (96, 96))
    p = b.op("exp", b.op("relu", x, name="p0"), name="p1")
    big = b.op("tanh", b.op("neg", z, name="big0"), name="big1")
    q = b.op("sigmoid", b.op("abs", y, name="q0"), name="q1")
    return b.build([p, big, q])


def test_remote_fusion_packs_independent_small_kernels_that_are_not_neighbours():
    g = _two_chains_graph()
    fused, report = _stitched(g)
    packed = [n for n in fused.nodes if n.op == "fused" and len(n.outputs) == 2]
    assert len(packed) == 1 and {n.name for n in packed[0].attrs["body"].nodes} == {"p0", "p1", "q0", "q1"}
    assert report.decisions["stitch"][packed[0].name]["scheme"] == PACKING
    assert kernel_count(fused) == 2
    rules, _ = optimize(g, 1)
    assert kernel_count(rules) == 3  # horizontal fusion packs neighbours only
    _check_same(g, fused, _inputs(g), compiled=True)


def test_top_k_patterns_are_kept_per_vertex_the_vertex_alone_among_them():
    b = GraphBuilder()
    x = b.input("x", (8, 16))
    e = b.op("exp", x, name="e")
    outs = [b.op(op, e, name=op) for op in ("relu", "neg", "tanh", "abs", "sigmoid")]  # five readers of e
    g = b.build(b.op("add", b.op("add", b.op("add", outs[0], outs[1]), b.op("add", outs[2], outs[3])), outs[4]))
    ex = Explorer(g, COSTS)
    cands = ex.candidates()
    assert all(1 <= len(ps) <= K and frozenset({v}) in ps for v, ps in cands.items())
    for ps in cands.values():
        scores = [ex.score(p) for p in ps if len(p) > 1]
        assert scores == sorted(scores, reverse=True)
    everything = frozenset(range(len(g.nodes)))
    assert cands[0][0] == everything  # the whole graph is one kernel: e recomputed in each reader
    assert ex.evaluator.delta(everything).penalty == pytest.approx(4 * EXPENSIVE_WEIGHT * 128 * COSTS.op_seconds)


def test_beam_search_plans_cover_every_node_once_best_first():
    g, _ = optimize(_layer_norm_graph((4, 24)), 2, disable=["fuse"])
    ex = Explorer(g, COSTS)
    plans = ex.plans(ex.candidates())
    assert 1 <= len(plans) <= 3
    for plan in plans:
        covered = sorted(i for grp in plan.groups for i in grp)
        assert covered == list(range(len(g.nodes)))
    assert [p.score for p in plans] == sorted((p.score for p in plans), reverse=True)
    assert frozenset(range(len(g.nodes))) in plans[0].groups  # the layer norm as one pattern


def test_the_delta_evaluator_counts_bytes_kept_and_calls_saved():
    b = GraphBuilder()
    x = b.input("x", (10, 10))
    g = b.build(b.op("neg", b.op("exp", x, name="e"), name="n"))
    ex = Explorer(g, COSTS)
    score = ex.evaluator.delta(frozenset({0, 1}))
    assert score.reduced_mem == pytest.approx(100 * 4 * 2 * COSTS.seconds_per_byte)  # written once, read once
    assert score.reduced_calls == pytest.approx(COSTS.call_seconds)
    assert score.penalty == 0
    assert [op_class(n) for n in g.nodes] == ["expensive", "light"]


# -- row operations: one kernel each ------------------------------------------------------------------------------


def _layer_norm_graph(shape):
    b = GraphBuilder()
    x = b.input("x", shape)
    d = shape[-1]
    return b.build(b.op("layer_norm", x, b.const(np.linspace(0.5, 1.5, d, dtype="float32"), "gamma"),
                        b.const(np.linspace(-1, 1, d, dtype="float32"), "beta"), axis=-1))


def _softmax_graph(shape):
    b = GraphBuilder()
    return b.build(b.op("softmax", b.input("x", shape), axis=-1))


def _gelu_graph(shape):
    b = GraphBuilder()
    return b.build(b.op("gelu", b.input("x", shape)))


def _epilogue_graph():
    b = GraphBuilder()
    x = b.input("x", (6, 12))
    m = b.op("matmul", x, b.const(np.ones((12, 10), "float32") / 12, "w"))
    return b.build(b.op("add", b.op("gelu", m), b.op("exp", b.input("r", (6, 10)))))


@pytest.mark.parametrize("make, scheme", [(_layer_norm_graph, BLOCK), (_softmax_graph, BLOCK),
                                          (_gelu_graph, THREAD)])
def test_layer_norm_softmax_and_gelu_are_one_stitched_kernel(make, scheme):
    g = make((3, 7, 33))
    expanded, _ = optimize(g, 2, disable=["fuse"])
    assert len(expanded.nodes) > 3
    fused, report = _stitched(g, opt_level=2)
    assert [n.op for n in fused.nodes] == ["fused"] and kernel_count(fused) == 1
    assert report.decisions["stitch"][fused.nodes[0].name]["scheme"] == scheme
    assert any(n.startswith("    also considered: ") and " f=+" in n for n in report.records[-1].notes)
    _check_same(g, fused, _inputs(g), compiled=True)


def test_an_epilogue_takes_its_residual_producers():
    g = _epilogue_graph()
    fused, _ = _stitched(g, opt_level=2)
    assert kernel_count(fused) == 1
    _check_same(g, fused, _inputs(g), compiled=True)


# -- property: stitched kernels on random graphs and odd shapes ---------------------------------------------------

UNARY = ["relu", "exp", "neg", "tanh", "sigmoid"]


@st.composite
def random_graphs(draw):
    """Random DAGs over odd shapes: element-wise ops (producers read several times), row reductions broadcast
    back, reductions over the leading axis, transposes, a matmul with a constant, and several outputs."""
    rows, cols = draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([1, 7, 17]))
    b = GraphBuilder()
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    full = [b.op("exp", b.input("x", (2, rows, cols)))]
    reduced = []
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "rowop", "transpose", "matmul", "column"]))
        x = draw(st.sampled_from(full))
        if kind == "unary":
            full.append(b.op(draw(st.sampled_from(UNARY)), x))
        elif kind == "binary":
            full.append(b.op(draw(st.sampled_from(["add", "mul", "sub"])), x, draw(st.sampled_from(full))))
        elif kind == "reduce":
            reduced.append(b.op(draw(st.sampled_from(["reduce_sum", "reduce_max", "reduce_mean"])), x, axes=(2,),
                                keepdims=1))
        elif kind == "column":
            reduced.append(b.op("reduce_sum", x, axes=(1,), keepdims=1))
        elif kind == "rowop" and reduced:
            full.append(b.op(draw(st.sampled_from(["sub", "div", "add"])), x, draw(st.sampled_from(reduced))))
        elif kind == "transpose":
            full.append(b.op("transpose", b.op("transpose", x, perm=(1, 0, 2)), perm=(1, 0, 2)))
        elif kind == "matmul":
            w = b.const(rng.standard_normal((cols, cols)).astype("float32") / 4, "w")
            full.append(b.op("matmul", x, w))
    outs = [full[-1]] + draw(st.lists(st.sampled_from(full + reduced), max_size=2, unique_by=id))
    return b.build(list(dict.fromkeys(outs)))


@settings(max_examples=25, deadline=None)
@given(random_graphs())
def test_stitched_random_graphs_keep_their_values(g):
    fused, _ = _stitched(g)
    fused.verify()
    assert kernel_count(fused) <= kernel_count(g)
    _check_same(g, fused, _inputs(g), rtol=1e-4, atol=1e-5)


@settings(max_examples=6, deadline=None)
@given(random_graphs())
def test_compiled_stitched_random_graphs_match_numpy(g):
    fused, _ = _stitched(g)
    _check_same(g, fused, _inputs(g), compiled=True, rtol=1e-4, atol=1e-5)


def test_an_unknown_strategy_is_an_error_naming_the_choices():
    from tilegrad.errors import TilegradError

    with pytest.raises(TilegradError, match="'fastest' is not known; choose one of rules, stitch"):
        optimize(_gelu_graph((2, 3)), 1, options={"fusion": "fastest"})


def test_large_kernels_are_packed_only_with_the_same_parallel_extent():
    b = GraphBuilder()
    same = [b.op("exp", b.input(f"x{k}", shape)) for k, shape in enumerate([(80, 80), (160, 40)])]
    other = b.op("exp", b.input("z", (70, 70)))
    g = b.build([*same, other])
    fused, _ = _stitched(g)
    assert math.prod(other.shape) > 4096 and kernel_count(fused) == 2
    packed = next(n for n in fused.nodes if n.op == "fused")
    assert [v.shape for v in packed.outputs] == [(80, 80), (160, 40)]
    _check_same(g, fused, _inputs(g), compiled=True)


def test_the_plans_are_ranked_by_the_given_measurement_when_asked():
    g, _ = optimize(_layer_norm_graph((4, 24)), 2, disable=["fuse"])
    seen = []

    def rank(graphs):  # a stand-in for tune.fusion_plans.measured_latencies: the most kernels is fastest
        seen.extend(graphs)
        return [-kernel_count(x) for x in graphs]

    fused, report = _stitched(g, rank_plans=rank)
    assert len(seen) >= 2 and kernel_count(fused) == max(kernel_count(x) for x in seen) > 1
    assert any("(chosen): score" in n and "measured latency" in n for n in report.records[-1].notes)


@settings(max_examples=15, deadline=None)
@given(random_graphs())
def test_every_candidate_the_rules_accept_lowers_to_one_kernel(g):
    from tilegrad.kernel import lower_kernel
    from tilegrad.passes.editor import map_nodes
    from tilegrad.passes.stitch import _build

    g = map_nodes(g, lambda ed, n: None)  # without the dead nodes, whose kernels would be dropped
    ex = Explorer(g, COSTS)
    for p in {p for ps in ex.candidates().values() for p in ps if len(p) > 1}:
        alone = [(frozenset({i}),) for i in range(len(g.nodes)) if i not in p]
        built = _build(g, PassContext(), ex, [(p,), *alone])
        (node,) = [n for n in built.nodes if n.op == "fused"]
        assert len(node.attrs["body"].nodes) == len(p)
        lower_kernel(node)
