"""The int8 GEMM's default rule (schedule/rules_int8.py) as a sketch the tuner searches: its default point is the
default schedule, it has parameters (rows per block, panels per chunk, order, grain, unrolling), and random points
of it compile to NumPy's int64 sums, on the dot-product path and on the compiler-vectorised one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.target import Target
from tilegrad.te import nn

from .forced import Forced
from .strategies import sketch_points

M, K, N = 37, 21, 40
TARGETS = {"dot4": Target(flags=frozenset({"avx2"})), "vectorised": Target(flags=frozenset())}


def _gemm():
    a, w, bias = (te.placeholder((M, K), "uint8", "A"), te.placeholder((3, 6, 16, 4), "int8", "W"),
                  te.placeholder((N,), "int32", "B"))
    return [a, w, bias], nn.quantized_matmul(a, w, bias, None, N, 0, 0, 0, "int32", name="C")


def _operands(rng):
    a = rng.integers(0, 255, (M, K), endpoint=True).astype(np.uint8)
    w = np.zeros((48, 24), np.int8)
    w[:N, :K] = rng.integers(-128, 127, (N, K), endpoint=True)
    wpack = np.ascontiguousarray(w.reshape(3, 16, 6, 4).transpose(0, 2, 1, 3))
    bias = rng.integers(-999, 999, N).astype(np.int32)
    return (a, wpack, bias), a.astype(np.int64) @ w[:N, :K].astype(np.int64).T + bias


@pytest.mark.parametrize("path", sorted(TARGETS))
def test_default_point_is_the_default_schedule_and_has_parameters(path):
    sketch = generate_sketches(lambda: [_gemm()[1]], TARGETS[path])[0]
    params = sketch.default_params()
    assert {"C_mb", "C_nc", "C_order", "C_grain", "C_padded_unroll"} <= set(params)
    assert sketch.bind(params).steps == default_schedule(_gemm()[1], TARGETS[path]).trace.steps


@settings(max_examples=3, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("path", sorted(TARGETS))
def test_random_points_are_bit_exact(path, data):
    sketch = generate_sketches(lambda: [_gemm()[1]], TARGETS[path])[0]
    params = data.draw(sketch_points(sketch))
    inputs, output = _gemm()
    sch = Schedule([output])
    sch.state = apply_trace([output], sketch.bind(params))
    arrays, want = _operands(np.random.default_rng(len(params)))
    got = build(sch, args=inputs + list(sch.state.outputs), target=TARGETS[path]).run(*arrays)
    np.testing.assert_array_equal(got, want, err_msg=str(params))


@pytest.mark.parametrize("rows", [None, 1, 2, 4])
@pytest.mark.parametrize("grouped", [False, True])
def test_a_depthwise_convolution_copies_its_padded_rows_per_block_of_output_rows(rows, grouped):
    """By default a copy per block of 2 or 4 output rows where 4 blocks remain (17 rows: 4), fewer where the
    copy would pass 48 KiB; every block, the last one partial, gives NumPy's sums."""
    from tilegrad.schedule.rules_int8 import default_pad_rows

    assert default_pad_rows(17, (3, 1, 1), 600) == 4 and default_pad_rows(7, (3, 1, 1), 600) == 1
    assert default_pad_rows(56, (3, 1, 1), 9 * 59 * 16) == 2  # 6 rows of 8.3 KiB pass 48 KiB, 4 do not
    x = te.placeholder((1, 17, 10, 32), "uint8", "X")
    w, bias = te.placeholder((32, 1, 3, 3), "int8", "W"), te.placeholder((32,), "int32", "B")
    out = nn.quantized_depthwise_nhwc(x, w, bias, None, 5, 1, ((1, 1), (1, 1)), 1, 0, 0, 0, "int32",
                                      taps_grouped=grouped)
    knobs = Forced() if rows is None else Forced(_pad_rows=rows)
    kernel = build(default_schedule(out, Target(flags=frozenset({"avx2", "avx512f"})), knobs=knobs),
                   args=[x, w, bias, out])
    rng = np.random.default_rng(6)
    xv = rng.integers(0, 255, x.shape, endpoint=True).astype(np.uint8)
    wv = rng.integers(-128, 127, w.shape, endpoint=True).astype(np.int8)
    bv = rng.integers(-999, 999, 32).astype(np.int32)
    xp = np.pad(xv.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=5)
    want = sum(xp[:, r:r + 17, q:q + 10] * wv[:, 0, r, q].astype(np.int64) for r in range(3) for q in range(3)) + bv
    np.testing.assert_array_equal(kernel.run(xv, wv, bv), want)
