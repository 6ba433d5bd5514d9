"""The C renderer: a golden tiny kernel, spelling of every expression node, vector code in the assembly."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.codegen.c import CRenderer, render_c
from tilegrad.loop import lower
from tilegrad.loop.ir import Buffer, For, Kernel, Store
from tilegrad.runtime import assemble
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import Target, host
from tilegrad.te import expr as E


def _add():
    a = te.placeholder((4, 8), name="A")
    b = te.placeholder((8,), name="B")
    return te.compute((4, 8), lambda i, j: a[i, j] + b[j], name="C")


def test_golden_tiny_kernel():
    sch = Schedule(_add())
    sch.parallel("C", "i")
    sch.vectorize("C", "j")
    src = render_c(lower(sch.state, "add"))
    body = src[src.index("void add_team"):]
    assert body == """\
void add_team(void** args, tg_team* tg) {
  float* restrict A = (float*)args[0];
  float* restrict B = (float*)args[1];
  float* restrict C = (float*)args[2];
  { int64_t i_lo, i_hi; tg_loop i_loop; tg_loop_begin(tg, 4, &i_loop);
    while (tg_next(tg, &i_loop, &i_lo, &i_hi)) {
      for (int64_t i = i_lo; i < i_hi; ++i) {
        #pragma omp simd
        for (int64_t j = 0; j < 8; ++j) {
          C[((i * 8) + j)] = (A[((i * 8) + j)] + B[j]);
        }
      }
    }
  }
  tg_barrier(tg);
}
void add(void** args) {
  TG_TEAM_BEGIN add_team(args, tg); TG_TEAM_END
}
"""


def test_every_expression_node_renders():
    r = CRenderer()
    x = te.Var("x", "float32")
    i = te.Var("i", lo=-3, hi=3)
    samples = [x + 1.0, x - 1.0, x * 2.0, x / 2.0, i // 2, i % 2, E.minimum(i, 1), E.maximum(x, 0.0),
               i.eq(1), i.ne(1), i < 1, i <= 1, (i < 1) & (i > -1), (i < 1) | (i > 2), E.logical_not(i < 1),
               E.select(i < 0, x, 0.0), E.cast("int32", x), E.bit_and(i, 6), E.bit_or(i, 1), E.bit_xor(i, 3),
               E.shift_left(i, 2), E.shift_right(i, 1)]
    samples += [cls(x) if cls.arity == 1 else cls(x, x) for cls in E.MATH_CALLS]
    rendered = {type(s) for s in samples}
    structural = {E.Const, E.Var, E.Load, E.Reduce}
    assert set(E.NODE_CLASSES) - structural <= rendered
    for s in samples:
        assert r.expr(s)
    assert set(r.calls) == set(E.MATH_CALLS)
    assert "tg_floordiv" in r.expr(i // 2)  # i may be negative: floor semantics
    assert r.expr(te.Var("n", lo=0, hi=9) // 2) == "(n / 2)"  # provably non-negative: plain C division


def test_vectorized_loop_uses_vector_registers():
    a = te.placeholder((4, 64), name="A")
    b = te.placeholder((64,), name="B")
    c = te.compute((4, 64), lambda i, j: a[i, j] + b[j], name="C")  # rows of whole zmm vectors, not one ymm
    sch = default_schedule(c)
    lanes = host().vector_lanes
    asm = assemble(build(sch).source)
    reg = "zmm" if lanes == 16 else "ymm"
    assert re.search(rf"v(add|mov)[a-z]*ps\s.*%{reg}", asm), f"no packed {reg} instructions"


def test_an_offset_sums_its_terms_from_the_outermost_loops_to_the_innermost():
    """The outer loop's term first, the unrolled inner loop's last (not by name): then gcc addresses the unrolled
    reads from one base with displacements instead of one register each."""
    a = te.placeholder((8, 4), name="A")
    c = te.compute((4, 8), lambda z, a_: a[a_, z] * 2.0, name="C")
    sch = Schedule(c)
    sch.unroll("C", "a_")
    source = render_c(lower(sch.state, "transposed"))
    assert "A[(z + (a_ * 4))]" in source, source


def test_avx512_code_with_avx512_flags():
    from tilegrad import config

    a = te.placeholder((64, 64), name="A")
    b = te.placeholder((64, 64), name="B")
    c = te.compute((64, 64), lambda i, j: a[i, j] * b[i, j], name="C")
    sch = default_schedule(c, Target.with_lanes(16))
    flags = ("-O3", "-march=skylake-avx512", "-mprefer-vector-width=512", "-fopenmp", "-fPIC", "-shared")
    with config.override(cflags=flags):
        asm = assemble(render_c(lower(sch.state, "mul")))
    assert "zmm" in asm


@pytest.mark.parametrize("fn,ref", [(te.exp, np.exp), (te.tanh, np.tanh), (te.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
                                    (te.erf, None), (te.rsqrt, lambda v: 1 / np.sqrt(v))])
def test_math_calls_match_numpy(fn, ref):
    import math

    a = te.placeholder((257,), name="A")
    c = te.compute((257,), lambda i: fn(a[i]), name="C")
    x = np.linspace(-4, 4, 257).astype("float32")
    if fn is te.rsqrt:
        x = np.abs(x) + 0.05
    got = build(default_schedule(c)).run(x)
    want = np.vectorize(math.erf)(x) if ref is None else ref(x.astype("float64"))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


def test_vectorised_exp_is_accurate_and_inlined():
    a = te.placeholder((8192,), name="A")
    c = te.compute((8192,), lambda i: te.exp(a[i]), name="C")
    kern = build(default_schedule(c))
    assert "call\texpf" not in assemble(kern.source)
    x = np.concatenate([np.linspace(-110, 95, 8186), [np.nan, np.inf, -np.inf, 0, 1e-30, -1e-30]]).astype("float32")
    with np.errstate(over="ignore"):
        want = np.exp(x.astype("float64"))
    got = kern.run(x)
    normal = np.isfinite(want) & (want < 3.4e38) & (want > 2e-38)  # below 2^-126 results flush to zero
    np.testing.assert_allclose(got[normal], want[normal], rtol=2.5e-7)
    assert np.isnan(got[-6]) and got[-5] == np.inf and got[-4] == 0 and (got[want > 3.41e38] == np.inf).all()


@pytest.mark.parametrize("fn,ref", [(te.tanh, np.tanh), (te.erf, np.vectorize(__import__("math").erf))])
def test_vectorised_tanh_and_erf(fn, ref):
    """Over a grid dense enough to find the approximations' worst points (65,528 values across the range where the
    functions are not yet +-1 in float), within 5e-7 of the float64 result."""
    a = te.placeholder((65536,), name="A")
    c = te.compute((65536,), lambda i: fn(a[i]), name="C")
    kern = build(default_schedule(c))
    asm = assemble(kern.source)
    assert "call\ttanhf" not in asm and "call\terff" not in asm
    x = np.concatenate([np.linspace(-12, 12, 65528), [0.0, -0.0, 1e-30, -1e-30, np.inf, -np.inf, np.nan, 0.5]])
    x = x.astype("float32")
    got = kern.run(x)
    want = ref(x.astype("float64"))
    finite = np.isfinite(x)
    np.testing.assert_allclose(got[finite], want[finite], rtol=5e-7, atol=1e-37)
    assert got[-4] == 1 and got[-3] == -1 and np.isnan(got[-2])
    assert (np.signbit(got[-8:-4]) == [False, True, False, True]).all()  # the sign of a zero and of a tiny x


def test_bfloat16_is_stored_as_bits_and_rounded_where_stored():
    a = te.placeholder((16,), "bfloat16", name="A")
    c = te.compute((16,), lambda i: a[i] * a[i] + 1.0, name="C")
    src = render_c(lower(Schedule(c).state, "sq"))
    assert src.count("#define TG_BFLOAT16") == 1 and "uint16_t* restrict A = (uint16_t*)args[0];" in src
    # each bfloat16 result is rounded, the stored value too; the arithmetic itself is float32
    assert "C[i] = tg_float_to_bf16(tg_bf16_to_float(tg_float_to_bf16(" in src
    assert "(tg_bf16_to_float(A[i]) * tg_bf16_to_float(A[i]))" in src and "1.0f" in src
    assert "TG_BFLOAT16" not in render_c(lower(Schedule(_add()).state, "add"))  # float32 sources are unchanged
    x = (np.arange(16, dtype="float32") * 1.37).astype("bfloat16")
    want = ((x.astype("float32") * x.astype("float32")).astype("bfloat16").astype("float32") + 1).astype("bfloat16")
    got = build(default_schedule(c)).run(x)
    np.testing.assert_array_equal(got.view("uint16"), want.view("uint16"))


def test_unsigned_division_comparison_and_constants():
    r = CRenderer()
    u = te.Var("u", "uint64")
    assert r.expr(E.floordiv(u, E.const(3, "uint64"))) == "(u / 3)"  # unsigned division is floor division
    assert r.expr(u < E.const(2**63 + 1, "uint64")) == "(u < 9223372036854775809ULL)"
    assert r.expr(E.add(te.Var("v", "uint8"), E.const(200, "uint8"))) == "((uint8_t)(v + 200))"  # wraps at once


def test_float64_calls_cannot_be_hidden_by_a_buffer_named_like_them():
    r = CRenderer()
    x = te.Var("x", "float64")
    assert r.expr(E.exp(x)) == "__builtin_exp(x)" and r.expr(E.erf(x)) == "__builtin_erf(x)"
    a = te.placeholder((6,), "float64", name="A")
    exp = te.compute((6,), lambda i: E.exp(a[i]), name="exp")
    out = te.compute((6,), lambda i: exp[i] + E.exp(exp[i]), name="C")
    sch = default_schedule(out)
    got = build(sch).run(np.linspace(-1, 1, 6))
    np.testing.assert_allclose(got, np.exp(np.linspace(-1, 1, 6)) + np.exp(np.exp(np.linspace(-1, 1, 6))), rtol=1e-15)


def test_a_single_element_read_in_a_select_is_read_once_and_the_loop_vectorises():
    """`isnan(x) ? fill[0] : x`: the fill read once at the start, so gcc makes the select a blend (a load under
    a condition it cannot prove safe kept the loop scalar); a single element of a buffer the kernel writes is
    read where it is."""
    x = te.placeholder((4, 64), name="X")
    fill = te.placeholder((1,), name="fill")
    y = te.compute((4, 64), lambda i, j: E.select(x[i, j].ne(x[i, j]), fill[0], x[i, j]), name="Y")
    src = build(default_schedule(y)).source
    assert "const float tg_read_fill_0 = fill[0];" in src
    assert src.count("fill[0]") == 1
    reg = "zmm" if host().vector_lanes == 16 else "ymm"
    assert re.search(rf"v(blendv|cmp[a-z]*)ps\s.*%{reg}", assemble(src)), "the select was not vectorised"
    corner = te.compute((1,), lambda i: x[0, 0] * 2, name="corner")
    assert "tg_read_X_0_0" in build(default_schedule(corner)).source
    one = (E.Const(1, E.INDEX),)
    count, step = Buffer("count", one, "float32"), Buffer("step", one, "float32")
    zero = (E.Const(0, E.INDEX),)
    bump = Store(count, zero, E.Load(count, zero) + E.Load(step, zero))  # count[0] += step[0]: count is written
    src = render_c(Kernel("bump", (step, count), For(E.Var("t", E.INDEX, 0, 3), E.Const(4, E.INDEX), "serial", bump)))
    assert "tg_read_step_0 = step[0];" in src and "count[0] = (count[0] + tg_read_step_0);" in src


def test_a_select_between_reads_in_bounds_is_a_blend_of_bits():
    """col2im clamps its reads so that both arms of each select may be computed: the renderer blends their bits
    (gcc sank a read used by one arm of a ternary into a branch and left the loop scalar); exact where an unchosen
    arm holds NaN. A read the clamp does not keep in bounds stays under its condition. (A test of one loop's index
    alone, `i < 15`, is versioned at that loop instead, loop/tails.py, and the clamp goes with it.)"""
    a = te.placeholder((16, 8), name="A")
    blended = te.compute((16, 8), lambda i, j: E.select((i + j) % 2 < 1, a[E.minimum(i + 1, 15), j], 0.0), name="B")
    src = build(default_schedule(blended)).source
    assert "= TG_BLEND_F32(" in src
    # rows of 8 float32s fill a ymm register; an AVX-512 host keeps them in ymm too
    assert re.search(r"v[a-z]+\s.*%[yz]mm", assemble(src)), "the blended select was not vectorised"
    x = np.arange(128, dtype="float32").reshape(16, 8)
    x[15] = np.nan  # read (clamped) by row 15, whose condition chooses 0 at every other column
    rows, cols = np.indices((16, 8))
    want = np.where((rows + cols) % 2 < 1, x[np.minimum(rows + 1, 15), cols], np.float32(0))
    np.testing.assert_array_equal(build(default_schedule(blended)).run(x), want)
    guarded = te.compute((16, 8), lambda i, j: E.select(i < 15, a[i + 1, j], 0.0), name="G")
    assert "= TG_BLEND_F32(" not in build(default_schedule(guarded)).source


def test_a_small_output_of_costly_elements_still_runs_on_the_threads():
    """12,288 elements are below the threads' threshold for a plain sum, not for a tanh over four reads (DCGAN's
    last col2im): the weight of an element counts its inlined producers' reads and its calls."""
    shape = (3, 64, 64)
    a, b, c, d = (te.placeholder(shape, name=n) for n in "ABCD")
    plain = te.compute(shape, lambda *i: a[i] + b[i], name="plain")
    total = te.compute(shape, lambda *i: a[i] + b[i] + c[i] + d[i], name="total")
    costly = te.compute(shape, lambda *i: te.tanh(total[i]), name="costly")
    assert "tg->tid == 0" in build(default_schedule(plain)).source
    src = build(default_schedule(costly)).source
    assert "tg_loop_begin" in src and "tg->tid == 0" not in src
