"""compute_with: stages sharing their leading loops run as one nest, so a producer computed at a shared loop holds
one iteration's slice while the sharing stages' buffers stay whole and are read after the nest."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.errors import LoweringError, ScheduleError
from tilegrad.kernel import build, lower_kernel
from tilegrad.loop.ir import Allocate, For, walk
from tilegrad.schedule import Schedule


def _row_stats(rows: int, cols: int):
    """P = 2A; the row sums and maxima of P; their sum per row: two reductions of one producer."""
    a = te.placeholder((rows, cols), name="A")
    p = te.compute((rows, cols), lambda i, j: a[i, j] * 2.0, name="P")
    ks, km = te.reduce_axis(cols, "ks"), te.reduce_axis(cols, "km")
    total = te.compute((rows,), lambda i: te.sum(p[i, ks], axis=ks), name="S")
    peak = te.compute((rows,), lambda i: te.max(p[i, km], axis=km), name="M")
    out = te.compute((rows,), lambda i: total[i] + peak[i], name="Out")
    return a, out


def _shared(rows: int, cols: int, split: int | None = None) -> Schedule:
    """S runs in M's row loop; P is computed at that loop, one row at a time."""
    _, out = _row_stats(rows, cols)
    sch = Schedule([out])
    first, second = [s.name for s in sch.state.stages if s.name in ("S", "M")]
    i = sch.loops(second)[0]
    if split:
        i, _ = sch.split(second, i, split)
        sch.split(first, sch.loops(first)[0], split)
    sch.compute_with(first, second, i)
    sch.compute_at("P", second, i)
    return sch


def _expected(x: np.ndarray) -> np.ndarray:
    return (2 * x).sum(axis=1) + (2 * x).max(axis=1)


def test_shared_loop_computes_both_reductions():
    x = np.random.default_rng(0).standard_normal((7, 13)).astype(np.float32)
    np.testing.assert_allclose(build(_shared(7, 13)).run(x), _expected(x), rtol=1e-5, atol=1e-5)


def test_producer_at_the_shared_loop_holds_one_row():
    kernel = lower_kernel(_shared(7, 13))
    allocs = {n.buffer.name: n.buffer for n in walk(kernel.body) if isinstance(n, Allocate)}
    assert [d.value for d in allocs["P"].shape] == [1, 13]
    assert [d.value for d in allocs["S"].shape] == [7]  # whole: Out reads it after the shared loop
    row_loops = [n for n in walk(kernel.body) if isinstance(n, For) and n.extent.value == 7]
    assert len(row_loops) == 2  # the shared one, and Out's


@settings(max_examples=15, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 17), split=st.integers(1, 4))
def test_shared_split_loops(rows, cols, split):
    """Split shared loops with tails: the guards of the sharing stage sit inside the shared loops."""
    x = np.random.default_rng(rows * 31 + cols).standard_normal((rows, cols)).astype(np.float32)
    np.testing.assert_allclose(build(_shared(rows, cols, split)).run(x), _expected(x), rtol=1e-5, atol=1e-5)


def test_extents_must_match():
    _, out = _row_stats(8, 5)
    sch = Schedule([out])
    first, second = [s.name for s in sch.state.stages if s.name in ("S", "M")]
    i0, _ = sch.split(second, sch.loops(second)[0], 4)
    sch.compute_with(first, second, i0)  # S's row loop runs 8 times, M's outer loop 2
    with pytest.raises(LoweringError, match="runs 8 times"):
        lower_kernel(sch)


def test_refused():
    _, out = _row_stats(8, 5)
    sch = Schedule([out])
    first, second = [s.name for s in sch.state.stages if s.name in ("S", "M")]
    with pytest.raises(ScheduleError, match="must come before"):
        sch.compute_with(second, first, sch.loops(first)[0])
    with pytest.raises(ScheduleError, match="spatial"):
        sch.compute_with(first, second, sch.loops(second)[1])  # M's reduction loop
