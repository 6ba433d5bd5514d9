"""Every supported dtype compiles and computes like NumPy: float32, float16, int8, int32, int64, bool."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.schedule.defaults import default_schedule


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int32", "int64"])
def test_arithmetic_and_reduction(dtype):
    a = te.placeholder((6, 20), dtype, name="A")
    b = te.placeholder((20,), dtype, name="B")
    s = te.compute((6, 20), lambda i, j: a[i, j] * b[j] + a[i, j], name="S")
    k = te.reduce_axis(20, "k")
    m = te.compute((6,), lambda i: te.max(s[i, k], axis=k), name="M")
    rng = np.random.default_rng(1)
    x = rng.integers(-5, 6, size=(6, 20)).astype(dtype)
    y = rng.integers(-5, 6, size=(20,)).astype(dtype)
    got = build(default_schedule(m)).run(x, y)
    np.testing.assert_array_equal(got, (x * y + x).max(axis=1))


def test_bool_masks_and_casts():
    a = te.placeholder((5, 7), "float32", name="A")
    mask = te.compute((5, 7), lambda i, j: a[i, j] > 0.0, name="mask")
    out = te.compute((5, 7), lambda i, j: te.select(mask[i, j], te.cast("float32", i * 7 + j), -1.0), name="out")
    x = np.random.default_rng(2).standard_normal((5, 7)).astype("float32")
    want = np.where(x > 0, np.arange(35, dtype="float32").reshape(5, 7), -1.0)
    sch = default_schedule(out)
    np.testing.assert_array_equal(build(sch).run(x), want)
    bool_out = build(default_schedule(te.compute((5, 7), lambda i, j: a[i, j] > 0.0, name="pos"))).run(x)
    assert bool_out.dtype == np.bool_ and (bool_out == (x > 0)).all()


@pytest.mark.parametrize("extra", [(), ("-mno-avx512f",)], ids=["native", "no_avx512"])
@pytest.mark.parametrize("width", [64, 24])
@pytest.mark.parametrize("dtype, lo, hi", [("uint8", 0, 255), ("int8", -128, 127)])
def test_bytes_computed_in_float_are_rendered_through_a_float_array_and_round_like_numpy(dtype, lo, hi, width,
                                                                                       extra):
    """A requantization (x / s rounded half to even, plus a zero point, clamped, cast to a byte) in a vectorized
    loop: its floats are computed in their own loop, so they run in whole float vectors, and narrowed to bytes
    16 at a time by a helper, the last vector overlapping the one before where 16 does not divide the row
    (codegen/c.py); on every path the bytes are NumPy's."""
    from tilegrad import config
    from tilegrad.codegen.c import render_c
    from tilegrad.loop import lower

    a = te.placeholder((4, width), "float32", name="A")
    clamped = lambda i, j: te.minimum(te.maximum(te.round(a[i, j] / 0.37) + 3.0, float(lo)), float(hi))  # noqa: E731
    q = te.compute((4, width), lambda i, j: te.cast(dtype, clamped(i, j)), name="Q")
    sch = default_schedule(q)
    source = render_c(lower(sch.state, "q", [a, sch.state.outputs[0]]))
    assert "tg_wide_" in source and f"tg_narrow_{dtype}_tx16(&" in source
    x = (np.random.default_rng(3).standard_normal((4, width)) * 40).astype("float32")
    x[0, :4] = [0.185, -0.185, 0.555, 0.37 * 200]  # ties at +-0.5 steps, and past the clamp
    want = np.clip(np.round(x / np.float32(0.37)) + 3, lo, hi).astype(dtype)
    with config.override(extra_cflags=extra):
        np.testing.assert_array_equal(build(sch).run(x), want)


@pytest.mark.parametrize("extra", [(), ("-mno-avx512f",)], ids=["native", "no_avx512"])
@pytest.mark.parametrize("dtype, zero_point, lo, hi", [("uint8", 3, 0, 255), ("uint8", 0, 0, 6),
                                                      ("int8", -5, -128, 127)])
def test_a_requantization_saturated_by_comparisons_narrows_through_its_helper_like_numpy(dtype, zero_point, lo, hi,
                                                                                       extra):
    """te.nn.quantized's requantize (round half to even, plus the zero point, saturated by comparisons, cast to
    a byte) in rows of whole vectors of 16 goes to `tg_requantize_*`, which clamps before it rounds: ties, values
    past either bound and values whose int32 conversion would overflow give NumPy's bytes on every path."""
    from tilegrad import config
    from tilegrad.codegen.c import render_c
    from tilegrad.loop import lower
    from tilegrad.te.nn.quantized import requantize

    a = te.placeholder((4, 32), "int32", name="A")
    m = te.placeholder((32,), "float32", name="M")
    q = te.compute((4, 32), lambda i, j: requantize(a[i, j], m[j], zero_point, lo, hi, dtype), name="Q")
    sch = default_schedule(q)
    assert f"tg_requantize_{dtype}_tx16(&" in render_c(lower(sch.state, "q", [a, m, sch.state.outputs[0]]))
    rng = np.random.default_rng(4)
    acc = rng.integers(-3000, 3000, (4, 32)).astype(np.int32)
    acc[0, :6] = [1, 3, -1, -3, 2**31 - 1, -2**31]  # ties at 0.5 and 1.5 steps, and the int32 extremes
    mult = np.full(32, 0.5, np.float32)
    mult[6:] = rng.uniform(0.001, 0.2, 26).astype(np.float32)
    mult[4:6] = 4.0  # scaled past the int32 range
    want = np.clip(np.rint(acc.astype(np.float32) * mult) + zero_point, lo, hi).astype(dtype)
    with config.override(extra_cflags=extra):
        np.testing.assert_array_equal(build(sch).run(acc, mult), want)
