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
    params: dict = {}
    while True:
        _, space = sketch.space(params)
        pending = [c for c in space.structural if c.var not in params]
        if not pending:
            break
        params[pending[0].var] = data.draw(st.sampled_from(pending[0].values))
    for c in space.choices:
        params[c.var] = data.draw(st.sampled_from(c.values))
    inputs, output = _gemm()
    sch = Schedule([output])
    sch.state = apply_trace([output], sketch.bind(params))
    arrays, want = _operands(np.random.default_rng(len(params)))
    got = build(sch, args=inputs + list(sch.state.outputs), target=TARGETS[path]).run(*arrays)
    np.testing.assert_array_equal(got, want, err_msg=str(params))
