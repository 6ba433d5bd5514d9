"""Division by a value the loop does not change (codegen/c.py's `tg_div_by`: a reciprocal, corrected once by an
exact remainder) rounds as IEEE division does: bit for bit against NumPy over many x for divisors of every kind,
wherever x and x / y are at least 2^-100 in size (below, the corrections are denormal and the result is within an
ulp); zeros, infinities and NaNs as division's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import tilegrad
from tilegrad.codegen.c import CRenderer
from tilegrad.loop import lower
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import Target
from tilegrad.te import tensor as te

SMALLEST = np.float32(2.0**-100)
DIVISORS = [np.sqrt(np.float32(2)), 3.0, 0.1, -7.0, 2.0**127, 1.5 * 2.0**126, np.finfo(np.float32).max,
            np.finfo(np.float32).tiny, 0.0, -0.0, np.inf, -np.inf, np.nan]
SPECIAL_X = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 0.5, np.finfo(np.float32).max, 1e-30, 1e30]


@pytest.fixture(scope="module")
def divide():
    """x (a vector) / y (a scalar input): y is read once into a local, so the division is by a loop invariant."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n"])
    graph = helper.make_graph([helper.make_node("Div", ["x", "y"], ["z"])], "divide", [x, y], [z])
    module = tilegrad.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))

    def run(xs, ys) -> np.ndarray:
        out = module(x=np.asarray(xs, np.float32), y=np.asarray(ys, np.float32))
        return out[0] if isinstance(out, list) else out
    return run


def _x_values(count: int, seed: int) -> np.ndarray:
    """Every float32 bit pattern is equally likely (all magnitudes, signs, NaNs), with the special values first."""
    bits = np.random.default_rng(seed).integers(0, 2**32, size=count, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([np.array(SPECIAL_X, np.float32), bits.view(np.float32)])


def _assert_divides(run, xs: np.ndarray, y: float) -> None:
    y32 = np.float32(y)
    got = run(xs, y32)
    tiny = np.finfo(np.float32).tiny
    with np.errstate(all="ignore"):  # a denormal x reads as a zero (DAZ; tests/runtime/test_denormals.py)
        want = np.where(np.abs(xs) < tiny, np.copysign(np.float32(0), xs), xs) / y32
    normal_y = y32 == 0 or not np.isfinite(y32) or abs(y32) >= tiny
    assert normal_y, "a denormal divisor reads as zero in the kernels (DAZ): not this test's case"
    checked = (np.isnan(want) | np.isinf(want) | (want == 0)
               | ((np.abs(xs) >= SMALLEST) & (np.abs(want) >= SMALLEST) & (np.abs(want) < np.finfo(np.float32).max)))
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(checked & ~same)
    assert bad.size == 0, [(float(xs[i]), float(y32), float(want[i]), float(got[i])) for i in bad[:5]]
    rest = ~checked & np.isfinite(want)  # tiny quotients: within an ulp, or flushed from a denormal to zero
    assert np.all(np.abs(got[rest] - want[rest]) <= np.spacing(np.abs(want[rest])) + tiny)


@pytest.mark.parametrize("y", DIVISORS)
def test_division_by_an_invariant_rounds_as_ieee(divide, y):
    _assert_divides(divide, _x_values(200_000, seed=1), y)


@settings(max_examples=60, deadline=None)
@given(y=st.floats(width=32, allow_subnormal=False))
def test_division_by_any_normal_divisor(divide, y):
    _assert_divides(divide, _x_values(20_000, seed=2), y)


def test_only_an_invariant_divisor_takes_the_reciprocal():
    """x / y[j] in the loop over j stays a division, as does s / 3 (the loop does not change it: gcc hoists it);
    x / s, with s read once, is the corrected reciprocal."""
    x, y = te.placeholder((64,), name="x"), te.placeholder((64,), name="y")
    s = te.placeholder((), name="s")
    cases = {"by_vector": (lambda j: x[j] / y[j], [x, y]), "by_scalar": (lambda j: x[j] / s[()], [x, s]),
             "invariant": (lambda j: x[j] * (s[()] / 3.0), [x, s])}
    fma = Target(flags=frozenset({"avx2", "fma"}))
    texts = {}
    for name, (body, inputs) in cases.items():
        out = te.compute((64,), body, name=name)
        sch = default_schedule(out, fma)
        texts[name] = CRenderer(fma).render_function(lower(sch.state, name, inputs + [sch.state.outputs[0]]))
    assert "tg_div_by" not in texts["by_vector"] and " / " in texts["by_vector"]
    assert "tg_div_by(" in texts["by_scalar"]
    assert "tg_div_by" not in texts["invariant"] and " / " in texts["invariant"]
