"""The simplification passes (fold_constants, simplify, cse, bn_fold, fold_bias, hoist_slice): each rewrites the
patterns it is for, leaves the near misses alone, and keeps the graph's numbers (checked with the NumPy oracle on
random inputs, before against after)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegrad
from tilegrad.ir import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.bias import fold_bias
from tilegrad.passes.bn_fold import fold_batch_norm
from tilegrad.passes.cse import eliminate_common_subexpressions
from tilegrad.passes.fold import fold_constants
from tilegrad.passes.hoist_slice import hoist_slice
from tilegrad.passes.context import PassContext
from tilegrad.passes.simplify import RESHAPES, simplify


def _apply(pass_fn, g):
    ctx = PassContext()
    return pass_fn(g, ctx), ctx.notes


def _ops(g) -> list[str]:
    return [n.op for n in g.nodes]


def _assert_same_numbers(before, after, rtol=1e-5, atol=1e-5, seed=0):
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(v.shape).astype(v.dtype) for v in before.inputs]
    assert [v.name for v in after.outputs] == [v.name for v in before.outputs]
    for want, got in zip(run_reference(before, inputs), run_reference(after, inputs)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _const(b, rng, shape, name="c"):
    return b.const(rng.standard_normal(shape).astype("float32"), name)


# ---- fold_constants ----

def test_fold_constants_folds_chains_and_keeps_types():
    rng = np.random.default_rng(1)
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    c = b.op("mul", b.op("add", _const(b, rng, (2, 3)), _const(b, rng, (3,))), _const(b, rng, (1, 3)))
    total = b.op("reduce_sum", b.const(np.arange(6, dtype="int32").reshape(2, 3)), keepdims=0)  # rank 0, int32
    scale = b.op("cast", total, to="float32")
    g = b.build(b.op("mul", b.op("add", x, c), scale))
    after, notes = _apply(fold_constants, g)
    assert _ops(after) == ["add", "mul"]
    assert {v.dtype for v in after.constants} == {"float32"} and () in {v.shape for v in after.constants}
    assert len(notes) == 4
    _assert_same_numbers(g, after)


def test_fold_constants_drops_dead_nodes_and_keeps_live_ones():
    b = GraphBuilder()
    x = b.input("x", (4,))
    b.op("exp", x)  # read by nothing
    g = b.build(b.op("relu", x))
    after, notes = _apply(fold_constants, g)
    assert _ops(after) == ["relu"] and notes == []


# ---- simplify ----

def test_unit_operands_are_removed():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    ones, zeros = b.const(np.ones(3, "float32"), "ones"), b.const(np.zeros((1, 3), "float32"), "zeros")
    y = b.op("mul", ones, b.op("mul", x, ones))
    y = b.op("sub", b.op("add", zeros, b.op("add", y, zeros)), zeros)
    y = b.op("pow", b.op("div", y, ones), b.const(np.ones((), "float32")))
    g = b.build(b.op("relu", y))
    after, notes = _apply(simplify, g)
    assert _ops(after) == ["relu"] and len(notes) == 7
    _assert_same_numbers(g, after)


def test_near_miss_unit_operands_stay():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    ones, zeros = b.const(np.ones(3, "float32"), "ones"), b.const(np.zeros(3, "float32"), "zeros")
    twos = b.const(np.full(3, 2, "float32"), "twos")
    outs = [b.op("mul", x, twos),  # x * 2
            b.op("sub", zeros, x),  # 0 - x is -x
            b.op("div", ones, x),  # 1 / x
            b.op("add", x, b.const(np.zeros((4, 2, 3), "float32"))),  # broadcasting changes the shape
            b.op("pow", ones, x)]  # 1 ** x has ones' shape, not x's
    g = b.build(outs)
    after, notes = _apply(simplify, g)
    assert after is g and notes == []


def test_shape_keeping_data_movement_is_removed():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    y = b.op("identity", x)
    y = b.op("cast", y, to="float32")
    y = b.op("reshape", y, shape=(2, -1))
    y = b.op("slice", y, starts=(0,), ends=(100,), axes=(1,))
    y = b.op("expand", y, shape=(1, 3))
    y = b.op("concat", y, axis=0)
    y = b.op("transpose", y, perm=(0, 1))
    kept = b.op("cast", y, to="float64")  # changes the dtype: stays
    g = b.build([b.op("exp", y), kept])
    after, _ = _apply(simplify, g)
    assert _ops(after) == ["cast", "exp"]
    assert all(n.inputs[0] is x for n in after.nodes)
    _assert_same_numbers(g, after)


def test_transposes_compose():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    t = b.op("transpose", b.op("transpose", x, perm=(1, 2, 0)), perm=(0, 2, 1))
    back = b.op("transpose", b.op("transpose", x, perm=(2, 0, 1)), perm=(1, 2, 0))  # inverse pair: nothing
    default = b.op("transpose", b.op("transpose", x), perm=None)  # reversed twice: nothing
    g = b.build([b.op("exp", t), b.op("exp", back), b.op("exp", default)])
    after, _ = _apply(simplify, g)
    assert _ops(after) == ["transpose", "exp", "exp", "exp"]
    assert after.nodes[0].attrs["perm"] == (1, 0, 2)
    _assert_same_numbers(g, after)


def test_reshape_chains_become_one_reshape():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    y = b.op("squeeze", b.op("reshape", b.op("unsqueeze", b.op("flatten", x, axis=2), axes=(0,)), shape=(1, 24, 1)),
             axes=(0,))
    undone = b.op("squeeze", b.op("unsqueeze", x, axes=(1,)), axes=(1,))
    g = b.build([b.op("relu", y), b.op("relu", undone)])
    after, _ = _apply(simplify, g)
    assert _ops(after) == ["reshape", "relu", "relu"]
    assert after.nodes[0].inputs[0] is x and after.nodes[0].outputs[0].shape == (24, 1)
    _assert_same_numbers(g, after)


def test_transposes_are_absorbed_into_gemm():
    rng = np.random.default_rng(2)
    b = GraphBuilder()
    a, w = b.input("a", (5, 4)), b.input("w", (3, 5))
    product = b.op("matmul", b.op("transpose", a), b.op("transpose", w))
    again = b.op("gemm", b.op("transpose", product, perm=(1, 0)), _const(b, rng, (3, 6)), _const(b, rng, (6,)),
                 alpha=0.5, trans_a=1)
    batched = b.op("matmul", b.input("x", (2, 3, 4)), b.op("transpose", b.input("v", (5, 4))))  # 3-D: stays
    g = b.build([again, batched])
    after, _ = _apply(simplify, g)
    assert _ops(after) == ["gemm", "gemm", "transpose", "matmul"]
    first, second = after.nodes[:2]
    assert (first.attrs["trans_a"], first.attrs["trans_b"]) == (1, 1) and first.inputs[:2] == (a, w)
    assert (second.attrs["trans_a"], second.attrs["alpha"]) == (0, 0.5) and second.inputs[0] is first.outputs[0]
    _assert_same_numbers(g, after)


def test_small_constant_powers_become_products():
    """x ** 2, 3 and 4 (a scalar or a filled constant that broadcasting does not widen) are products of x; other
    exponents, a widening constant and integer bases keep the pow."""
    b = GraphBuilder()
    x = b.input("x", (3, 5))
    powers = [b.op("pow", x, b.const(np.full(shape, n, "float32"), f"n{n}"))
              for n, shape in ((2, ()), (3, (1, 5)), (4, (5,)))]
    kept = [b.op("pow", x, b.const(np.float32(2.5), "half")),
            b.op("pow", x, b.const(np.array([2, 3, 2, 2, 2], "float32"), "mixed")),
            b.op("pow", x, b.const(np.full((2, 3, 5), 2, "float32"), "wide")),
            b.op("pow", b.input("i", (4,), "int32"), b.const(np.int32(2), "two"))]
    g = b.build([*powers, *kept])
    after, notes = _apply(simplify, g)
    assert _ops(after) == ["mul"] + ["mul"] * 2 + ["mul"] * 2 + ["pow"] * 4
    assert len(notes) == 3
    _assert_same_numbers(g, after, rtol=1e-6)


def test_zero_spatial_pads_are_absorbed_into_convolutions():
    """TensorFlow's "same" padding as exported: a zero pad of the spatial axes becomes the convolution's own
    (asymmetric) pads, 1-D and 2-D, grouped or not; a pad of another value or of the channels, stays."""
    rng = np.random.default_rng(4)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 9, 8))
    same = b.op("conv", b.op("pad", x, pads=(0, 0, 0, 0, 0, 0, 1, 1)), _const(b, rng, (6, 4, 3, 3), "w1"),
                strides=(2, 2), pads=(0, 0, 0, 0))
    more = b.op("conv", b.op("pad", same, pads=(0, 0, 1, 0, 0, 0, 2, 1)), _const(b, rng, (6, 3, 3, 3), "w2"),
                pads=(1, 1, 0, 1), group=2)
    signal = b.op("conv", b.op("pad", b.input("s", (2, 3, 11)), pads=(0, 0, 2, 0, 0, 1)),
                  _const(b, rng, (5, 3, 3), "w3"), _const(b, rng, (5,), "b3"))
    valued = b.op("conv", b.op("pad", x, pads=(0, 0, 1, 1, 0, 0, 1, 1), value=1.0), _const(b, rng, (2, 4, 3, 3), "w4"))
    channels = b.op("conv", b.op("pad", x, pads=(0, 1, 0, 0, 0, 1, 0, 0)), _const(b, rng, (2, 6, 1, 1), "w5"))
    g = b.build([more, signal, valued, channels])
    after, notes = _apply(simplify, g)
    assert _ops(after) == ["conv", "conv", "conv", "pad", "conv", "pad", "conv"]
    first, second, third = after.nodes[:3]
    assert first.inputs[0] is x and first.attrs["pads"] == [0, 0, 1, 1]
    assert second.attrs["pads"] == [2, 1, 2, 2] and second.attrs["group"] == 2
    assert third.attrs["pads"] == [2, 1] and len(third.inputs) == 3
    assert len(notes) == 3
    _assert_same_numbers(g, after)


def test_taps_that_only_read_padding_are_dropped():
    """Dilated by 36 over 28 x 28 only the centre tap reads the image: a 1 x 1 convolution; by 6 over 5 x 9 and
    stride 2, the rows shrink to the centre and the columns keep three; by 2 every tap reads the image; a tap
    kept past a cropped edge (padding would turn negative) keeps the kernel."""
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    x = b.input("x", (1, 4, 28, 28))
    aspp = b.op("conv", x, _const(b, rng, (3, 4, 3, 3), "w1"), _const(b, rng, (3,), "b1"), pads=(36,) * 4,
                dilations=(36, 36))
    y = b.input("y", (1, 4, 5, 9))
    rows = b.op("conv", y, _const(b, rng, (2, 4, 3, 3), "w2"), pads=(6, 6, 6, 6), dilations=(6, 6), strides=(2, 2))
    dense = b.op("conv", x, _const(b, rng, (2, 4, 3, 3), "w3"), pads=(2,) * 4, dilations=(2, 2))
    cropped = b.op("conv", b.input("z", (1, 2, 10)), _const(b, rng, (2, 2, 3), "w4"), pads=(5, 5), dilations=(8,))
    g = b.build([aspp, rows, dense, cropped])
    after, notes = _apply(simplify, g)
    kernels = [n.inputs[1].shape[2:] for n in after.nodes]
    assert kernels == [(1, 1), (1, 3), (3, 3), (3,)] and len(notes) == 2
    assert after.nodes[0].attrs["pads"] == [0, 0, 0, 0] and after.nodes[1].attrs["pads"] == [0, 6, 0, 6]
    _assert_same_numbers(g, after)


def test_graph_outputs_keep_their_names():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    r = b.op("relu", x)
    g = b.build([b.op("identity", x), r, b.op("reshape", r, shape=(2, 3)), b.op("identity", r)],
                names=["copy", "r", "same", "again"])
    after, _ = _apply(simplify, g)
    assert [v.name for v in after.outputs] == ["copy", "r", "same", "again"]
    _assert_same_numbers(g, after)


_MOVES = st.sampled_from(["transpose", "reshape", "flatten", "squeeze", "unsqueeze", "identity", "exp"])


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4), moves=st.lists(st.tuples(_MOVES, st.randoms()),
                                                                                      min_size=1, max_size=8))
def test_random_data_movement_chains_simplify_soundly(shape, moves):
    b = GraphBuilder()
    y = b.input("x", shape)
    for move, rnd in moves:
        rank = len(y.shape)
        if move == "transpose":
            y = b.op("transpose", y, perm=tuple(rnd.sample(range(rank), rank)))
        elif move == "reshape":
            y = b.op("reshape", y, shape=(-1,) + (1,) * rnd.randint(0, 2))
        elif move == "flatten":
            y = b.op("flatten", y, axis=rnd.randint(0, rank))
        elif move == "squeeze":
            y = b.op("squeeze", y) if 1 in y.shape and rank > 1 else y
        elif move == "unsqueeze":
            y = b.op("unsqueeze", y, axes=(rnd.randint(-rank - 1, rank),))
        else:
            y = b.op(move, y)
    g = b.build(b.op("neg", y))
    after, _ = _apply(simplify, g)
    assert len(after.nodes) <= len(g.nodes)
    producers = after.producers()
    for n in after.nodes:  # no pair that a rule merges is left
        producer = producers.get(id(n.inputs[0]))
        if n.op == "transpose" and producer is not None:
            assert producer.op != "transpose"
        if n.op in RESHAPES and producer is not None:
            assert producer.op not in RESHAPES
        assert n.op != "identity"
    _assert_same_numbers(g, after, rtol=0, atol=0)


# ---- cse ----

def test_cse_merges_equal_nodes_and_constants():
    b = GraphBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (2, 3))
    c1, c2 = b.const(np.full(3, 0.5, "float32"), "c1"), b.const(np.full(3, 0.5, "float32"), "c2")
    s1, s2 = b.op("add", x, y), b.op("add", y, x)  # commutes
    m1, m2 = b.op("mul", b.op("relu", s1), c1), b.op("mul", b.op("relu", s2), c2)
    g = b.build(b.op("sub", m1, m2))
    after, notes = _apply(eliminate_common_subexpressions, g)
    assert _ops(after) == ["add", "relu", "mul", "sub"]
    assert len(after.constants) == 1 and len(notes) == 4
    _assert_same_numbers(g, after)


def test_cse_near_misses_stay():
    b = GraphBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (2, 3))
    outs = [b.op("leaky_relu", x, alpha=0.1), b.op("leaky_relu", x, alpha=0.2),  # other attributes
            b.op("sub", x, y), b.op("sub", y, x),  # sub does not commute
            b.op("add", x, b.const(np.zeros(3, "float32"))), b.op("add", x, b.const(-np.zeros(3, "float32"))),
            b.op("cast", b.const(np.ones(3, "float32")), to="float64"),
            b.op("cast", b.const(np.ones(3, "float64")), to="float64"),  # equal values, other dtypes
            b.op("relu", x), b.op("relu", x)]  # graph outputs keep their own nodes
    g = b.build(outs, names=[f"out{i}" for i in range(len(outs))])
    after, notes = _apply(eliminate_common_subexpressions, g)
    assert after is g and notes == []
    _assert_same_numbers(g, after)


def test_cse_compares_large_constants_whole_not_by_their_sample():
    """Two weights alike except for one byte between the sampled ones stay two; an exact copy merges."""
    b = GraphBuilder()
    x = b.input("x", (3, 40000))
    w = np.random.default_rng(0).standard_normal(40000).astype("float32")
    near = w.copy()
    near[20001] = -near[20001]  # byte 80004..80007: between the evenly spaced samples
    outs = [b.op("mul", x, b.const(w, "w")), b.op("mul", x, b.const(near, "near")),
            b.op("add", x, b.const(w.copy(), "copy"))]
    g = b.build(outs, names=["a", "b", "c"])
    after, notes = _apply(eliminate_common_subexpressions, g)
    assert len(after.constants) == 2 and notes == ["constant copy is w"]
    _assert_same_numbers(g, after)


def test_products_sharing_a_weight_read_one_packed_copy():
    """Each product packs its weight as `conv_algorithm` rewrites it; `cse_late` leaves one pack per weight, as in
    an unrolled recurrence whose steps all multiply by the same matrix."""
    b = GraphBuilder()
    w = b.const(np.random.default_rng(1).standard_normal((64, 96)).astype("float32"), "w")
    h = b.input("h", (1, 64))
    for step in range(4):
        h = b.op("tanh", b.op("slice", b.op("matmul", h, w), starts=[0], ends=[64], axes=[1]))
    g = b.build(h)
    after, report = optimize(g, target=tilegrad.target.host())
    packed = [c for c in after.constants if c.name.endswith("_wpack")]
    assert len(packed) == 1, [c.name for c in after.constants]
    assert any(r.name == "cse_late" and r.notes for r in report.records)
    _assert_same_numbers(g, after)


# ---- bn_fold ----

def _batch_norm(b, rng, x, channels, name="bn"):
    params = [rng.uniform(0.5, 1.5, channels), rng.standard_normal(channels), rng.standard_normal(channels),
              rng.uniform(0.2, 2.0, channels)]
    return b.op("batch_norm", x, *(b.const(p.astype("float32"), f"{name}_{i}") for i, p in enumerate(params)),
                epsilon=1e-3, name=name)


@pytest.mark.parametrize("op, x_shape, w_shape, attrs, bias", [
    ("conv", (2, 4, 7, 6), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    ("conv", (1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "strides": [2, 2]}, False),
    ("conv", (2, 4, 9), (4, 1, 3), {"group": 4}, True),
    ("conv_transpose", (1, 4, 5, 5), (4, 3, 3, 3), {"group": 2, "strides": [2, 2]}, True),
    ("conv_transpose", (2, 3, 6), (3, 5, 2), {}, False),
])
def test_batch_norm_folds_into_convolution(op, x_shape, w_shape, attrs, bias):
    rng = np.random.default_rng(3)
    b = GraphBuilder()
    x = b.input("x", x_shape)
    inputs = [x, _const(b, rng, w_shape, "w")]
    if bias:
        channels = w_shape[0] if op == "conv" else w_shape[1] * attrs.get("group", 1)
        inputs.append(_const(b, rng, (channels,), "b"))
    conv = b.op(op, *inputs, name="conv", **attrs)
    g = b.build(b.op("relu", _batch_norm(b, rng, conv, conv.shape[1])))
    after, notes = _apply(fold_batch_norm, g)
    assert _ops(after) == [op, "relu"] and notes == ["folded bn into conv"]
    _assert_same_numbers(g, after, rtol=1e-4, atol=1e-4)


def test_batch_norm_without_a_foldable_convolution_is_a_multiply_add():
    rng = np.random.default_rng(4)
    b = GraphBuilder()
    x = b.input("x", (2, 4, 5, 5))
    conv = b.op("conv", x, _const(b, rng, (4, 4, 1, 1), "w"))
    shared = _batch_norm(b, rng, conv, 4, "shared")  # the conv has a second reader
    after_relu = _batch_norm(b, rng, b.op("relu", x), 4, "after_relu")
    flat = _batch_norm(b, rng, b.input("f", (3, 4)), 4, "flat")
    runtime = b.op("batch_norm", x, *(b.input(f"p{i}", (4,)) for i in range(4)))  # not constant: stays
    g = b.build([shared, b.op("exp", conv), after_relu, flat, runtime])
    after, notes = _apply(fold_batch_norm, g)
    assert _ops(after).count("batch_norm") == 1 and _ops(after).count("conv") == 1
    assert _ops(after).count("mul") == _ops(after).count("add") == 3
    assert notes == [f"{n}: batch_norm as mul and add" for n in ("shared", "after_relu", "flat")]
    _assert_same_numbers(g, after, rtol=1e-4, atol=1e-4)


# ---- fold_bias ----

def test_bias_folds_into_matrix_products():
    rng = np.random.default_rng(5)
    b = GraphBuilder()
    x, rows = b.input("x", (4, 8)), b.input("rows", (2, 3, 8))
    dense = b.op("add", b.op("matmul", x, _const(b, rng, (8, 5))), _const(b, rng, (5,)))
    swapped = b.op("add", _const(b, rng, (1, 5)), b.op("gemm", x, _const(b, rng, (5, 8)), alpha=0.5, beta=3.0,
                                                        trans_b=1))
    batched = b.op("add", b.op("matmul", rows, _const(b, rng, (8, 5))), _const(b, rng, (5,)))
    g = b.build([dense, swapped, batched])
    after, notes = _apply(fold_bias, g)
    assert _ops(after) == ["gemm", "gemm", "reshape", "gemm", "reshape"] and len(notes) == 3
    assert all(len(n.inputs) == 3 and n.attrs["beta"] == 1.0 for n in after.nodes if n.op == "gemm")
    _assert_same_numbers(g, after)


def test_bias_near_misses_stay():
    rng = np.random.default_rng(6)
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    shared = b.op("matmul", x, _const(b, rng, (8, 5)))
    outs = [b.op("add", shared, _const(b, rng, (5,))), b.op("relu", shared),  # the product has two readers
            b.op("add", b.op("matmul", x, _const(b, rng, (8, 5))), _const(b, rng, (4, 1))),  # varies along rows
            b.op("add", b.op("matmul", x, b.input("w", (8, 5))), _const(b, rng, (5,))),  # weight not constant
            b.op("add", b.op("gemm", x, _const(b, rng, (8, 5)), _const(b, rng, (5,))), _const(b, rng, (5,))),
            b.op("add", b.op("matmul", x, _const(b, rng, (8, 5))), _const(b, rng, (3, 1, 5)))]  # grows the shape
    g = b.build(outs)
    after, notes = _apply(fold_bias, g)
    assert after.nodes == g.nodes and notes == []


def test_bias_folds_into_convolutions():
    rng = np.random.default_rng(7)
    b = GraphBuilder()
    x = b.input("x", (2, 4, 6, 6))
    plain = b.op("add", b.op("conv", x, _const(b, rng, (6, 4, 3, 3))), _const(b, rng, (6, 1, 1)))
    biased = b.op("add", _const(b, rng, (1, 6, 1, 1)),
                  b.op("conv", x, _const(b, rng, (6, 2, 1, 1)), _const(b, rng, (6,)), group=2))
    transposed = b.op("add", b.op("conv_transpose", x, _const(b, rng, (4, 3, 2, 2))), b.const(np.float32(0.25)))
    spatial = b.op("add", b.op("conv", x, _const(b, rng, (6, 4, 3, 3))), _const(b, rng, (4,)))  # along W: stays
    g = b.build([plain, biased, transposed, spatial])
    after, notes = _apply(fold_bias, g)
    assert _ops(after) == ["conv", "conv", "conv_transpose", "conv", "add"] and len(notes) == 3
    assert [len(n.inputs) for n in after.nodes[:3]] == [3, 3, 3]
    _assert_same_numbers(g, after)


# ---- hoist_slice ----

def test_slices_move_above_element_wise_chains():
    rng = np.random.default_rng(8)
    b = GraphBuilder()
    x, row = b.input("x", (4, 8)), b.input("row", (1, 8))
    y = b.op("relu", b.op("mul", b.op("add", x, row), _const(b, rng, (4, 1))))
    g = b.build(b.op("slice", y, starts=(-6, 1), ends=(7, 100), axes=(1, 0), steps=(2, 1)))
    after, notes = _apply(hoist_slice, g)
    assert _ops(after) == ["slice", "slice", "add", "mul", "relu"] and len(notes) == 3
    assert after.nodes[2].outputs[0].shape == (3, 3)
    assert [v.shape for v in after.constants] == [(3, 1)]
    _assert_same_numbers(g, after)


def test_slice_hoisting_near_misses_stay():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    shared = b.op("exp", x)
    outs = [b.op("slice", shared, starts=(1,), ends=(3,)), b.op("neg", shared),  # two readers
            b.op("slice", b.op("trilu", x), starts=(1,), ends=(3,)),  # depends on the position
            b.op("slice", b.op("softmax", x), starts=(1,), ends=(3,), axes=(1,))]  # not element-wise
    g = b.build(outs)
    after, notes = _apply(hoist_slice, g)
    assert after.nodes == g.nodes and notes == []


# ---- the pipeline and an exported model ----

def test_passes_are_registered_in_order():
    from tilegrad.passes import pass_names

    names = pass_names()
    mine = ["fold_constants", "simplify", "cse", "bn_fold", "fold_bias", "hoist_slice"]
    assert [n for n in names if n in mine] == mine


def test_the_passes_together_keep_the_numbers():
    """A graph with work for every pass, through optimize(opt_level=2) with only these passes on."""
    from tilegrad.passes import pass_names

    rng = np.random.default_rng(10)
    b = GraphBuilder()
    x = b.input("x", (2, 3, 6, 6))
    w = b.op("mul", _const(b, rng, (4, 3, 3, 3)), b.const(np.float32(0.5)))  # folds
    y = b.op("relu", _batch_norm(b, rng, b.op("conv", x, w, pads=[1, 1, 1, 1]), 4))
    twice = b.op("add", b.op("exp", y), b.op("exp", y))  # cse
    flat = b.op("reshape", b.op("flatten", b.op("mul", twice, b.const(np.float32(1))), axis=1), shape=(2, -1))
    head = b.op("add", b.op("matmul", flat, _const(b, rng, (144, 5))), _const(b, rng, (5,)))
    g = b.build(b.op("slice", b.op("sigmoid", head), starts=(1,), ends=(4,), axes=(1,)))
    mine = {"fold_constants", "simplify", "cse", "bn_fold", "fold_bias", "hoist_slice"}
    after, report = optimize(g, 2, disable=set(pass_names()) - mine)
    assert [r.name for r in report.records] == sorted(mine, key=pass_names().index)
    assert _ops(after) == ["conv", "relu", "exp", "add", "flatten", "gemm", "slice", "sigmoid"]
    _assert_same_numbers(g, after, rtol=1e-4, atol=1e-4)


def test_exported_conv_batch_norm_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    from tilegrad.frontend.onnx import import_onnx

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 6, 3, groups=2, padding=1), torch.nn.BatchNorm2d(6),
                                torch.nn.ReLU(), torch.nn.Conv2d(6, 6, 1), torch.nn.BatchNorm2d(6)).eval()
    with torch.no_grad():
        for bn in (model[1], model[4]):
            bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    path = tmp_path / "conv_bn.onnx"
    torch.onnx.export(model, (torch.randn(1, 4, 7, 7),), str(path), dynamo=False, opset_version=17,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    g = import_onnx(path)
    assert "batch_norm" in _ops(g)  # the export kept the batch norms, so folding them is tested
    optimized, report = optimize(g, 2)
    assert "batch_norm" not in _ops(optimized)
    folds = [note for r in report.records if r.name == "bn_fold" for note in r.notes]
    assert len(folds) == 2 and all(note.startswith("folded") for note in folds)
    x = np.random.default_rng(9).standard_normal((1, 4, 7, 7)).astype("float32")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    got = tilegrad.compile(path, opt_level=2)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
