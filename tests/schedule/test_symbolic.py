"""Symbolic replay: a trace whose factors are variables, lowered once and then bound, equals the trace built with
the integers directly: same loop extents, same output."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.codegen.c import render_c
from tilegrad.loop import For, format_kernel, lower
from tilegrad.loop.ir import walk
from tilegrad.loop.simplify import bind, simplify_kernel
from tilegrad.runtime import Kernel, build
from tilegrad.runtime.kernel import BufferSpec
from tilegrad.schedule import Schedule, apply_trace

M, N, K = 37, 24, 19


def matmul():
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis(K, "k")
    return te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")


def tiled_trace():
    tile_i, tile_j, tile_k = (te.Var(n, lo=1, hi=48) for n in ("tile_i", "tile_j", "tile_k"))
    sch = Schedule(matmul())
    cl = sch.cache_write("C")
    i0, j0, i1, j1 = sch.tile("C", "i", "j", tile_i, tile_j)
    sch.compute_at(cl, "C", j0)
    k0, k1 = sch.split(cl, "k", tile_k)
    sch.reorder(cl, k0, "i", k1, "j")
    sch.parallel("C", i0)
    sch.vectorize(cl, "j")
    return sch.trace


def extents(kernel):
    return [s.extent for s in walk(kernel.body) if isinstance(s, For)]


def test_symbolic_extents_are_expressions():
    kern = lower(apply_trace(matmul(), tiled_trace()), "mm")
    names = {v.name for e in extents(kern) for v in te.free_vars(e)}
    assert {"tile_i", "tile_j", "tile_k"} <= names


@settings(max_examples=15)
@given(st.integers(1, 40), st.integers(1, 30), st.integers(1, 25))
def test_bound_symbolic_equals_concrete(ti, tj, tk):
    trace = tiled_trace()
    params = {"tile_i": ti, "tile_j": tj, "tile_k": tk}
    symbolic = lower(apply_trace(matmul(), trace), "mm")
    bound = bind(symbolic, params)
    concrete = simplify_kernel(lower(apply_trace(matmul(), trace.bind(params)), "mm"))
    assert extents(bound) == extents(concrete)
    assert format_kernel(bound) == format_kernel(concrete)
    rng = np.random.default_rng(ti * 1000 + tj * 10 + tk)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    c = np.empty((M, N), "float32")
    specs = [BufferSpec(p.name, tuple(int(d.value) for d in p.shape), p.dtype) for p in bound.params]
    Kernel(build(render_c(bound)), "mm", specs)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def conv2d():
    from tilegrad.te import nn

    x = te.placeholder((1, 3, 13, 11), name="X")
    w = te.placeholder((5, 3, 3, 3), name="W")
    return nn.conv2d(x, w, padding=1, name="Y")


def conv_trace():
    tile_c, tile_w = te.Var("tile_c", lo=1, hi=8), te.Var("tile_w", lo=1, hi=16)
    sch = Schedule(conv2d())
    local = sch.cache_write("Y")
    c0, c1 = sch.split("Y", "c", tile_c)
    w0, w1 = sch.split("Y", "w", tile_w)
    sch.reorder("Y", "n", c0, "h", w0, c1, w1)
    sch.compute_at(local, "Y", w0)
    sch.compute_at("Y_pad", local, "h")
    sch.parallel("Y", c0)
    return sch.trace


@settings(max_examples=10)
@given(st.integers(1, 7), st.integers(1, 14))
def test_bound_symbolic_conv_with_compute_at_regions(tc, tw):
    """Regions of compute_at stages (the padded input inside the output tile) are inferred symbolically too."""
    from tilegrad.te.interpret import interpret

    trace = conv_trace()
    params = {"tile_c": tc, "tile_w": tw}
    bound = bind(lower(apply_trace(conv2d(), trace), "conv"), params)
    concrete = simplify_kernel(lower(apply_trace(conv2d(), trace.bind(params)), "conv"))
    assert extents(bound) == extents(concrete)
    assert format_kernel(bound) == format_kernel(concrete)
    rng = np.random.default_rng(tc * 100 + tw)
    x = rng.standard_normal((1, 3, 13, 11)).astype("float32")
    w = rng.standard_normal((5, 3, 3, 3)).astype("float32")
    y = np.empty((1, 5, 13, 11), "float32")
    specs = [BufferSpec(p.name, tuple(int(d.value) for d in p.shape), p.dtype) for p in bound.params]
    Kernel(build(render_c(bound)), "conv", specs)(x, w, y)
    out = conv2d()
    want = interpret(out, {"X": x, "W": w})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
