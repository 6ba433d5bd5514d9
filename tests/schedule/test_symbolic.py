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
