"""Simplifying a kernel about to be rendered: each branch knows what its test proves of the loop indices
(loop/simplify.py's `narrowed`), so a versioned full tile's indices drop the divisions its guard rules out."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings, strategies as st

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.loop.simplify import narrowed
from tilegrad.schedule.defaults import default_schedule
from tilegrad.te import expr as E
from tilegrad.te import nn


def _loop(name: str, extent: int) -> E.Var:
    return E.Var(name, E.INDEX, 0, extent - 1, E.Const(extent, E.INDEX))


def test_a_full_vector_branch_holds_for_the_first_tile_only():
    i = _loop("i", 2)
    guard = i * 16 + 15 < 28
    assert (narrowed(guard, {"i": i}, True)["i"].hi, narrowed(guard, {"i": i}, False)["i"].lo) == (0, 1)
    assert narrowed(E.logical_not(guard), {"i": i}, True)["i"].lo == 1
    assert narrowed(E.logical_and(i * 16 - 1 >= 0, guard), {"i": i}, True) is None  # never both


@settings(max_examples=200, deadline=None)
@given(a=st.integers(-5, 5), b=st.integers(-5, 5), c=st.integers(-20, 20), ei=st.integers(1, 6),
       ej=st.integers(1, 6), strict=st.booleans(), holds=st.booleans())
def test_narrowed_ranges_hold_every_point_where_the_test_does(a, b, c, ei, ej, strict, holds):
    i, j = _loop("i", ei), _loop("j", ej)
    lhs = i * a + j * b + c
    cond = (lhs < 0) if strict else (lhs <= 0)
    ranges = narrowed(cond, {"i": i, "j": j}, holds)
    points = [(x, y) for x, y in itertools.product(range(ei), range(ej))
              if ((a * x + b * y + c < 0) if strict else (a * x + b * y + c <= 0)) == holds]
    if ranges is None:
        assert not points
        return
    for x, y in points:
        for name, value in (("i", x), ("j", y)):
            if name in ranges:
                assert ranges[name].lo <= value <= ranges[name].hi


def test_a_channel_shuffle_on_a_row_of_28_reads_without_divisions():
    """ShuffleNet's reshape-transpose-reshape on 28 x 28: the row of 28 runs as a vector of 16 and a tail of 12;
    in the full vector's branch the index of the source stays within one row, so no division by the plane
    (1568 = 2 x 784) is left, and the numbers are NumPy's."""
    x = te.placeholder((1, 116, 28, 28), name="X")
    grouped = nn.reshape(x, (1, 2, 58, 28, 28))
    y = nn.reshape(nn.transpose(grouped, (0, 2, 1, 3, 4)), (1, 116, 28, 28))
    k = build(default_schedule(te.compute(y.shape, lambda *i: y[i], name="Y")))
    assert "/ 1568" not in k.source and "% 28" not in k.source
    data = np.random.default_rng(0).standard_normal((1, 116, 28, 28)).astype("float32")
    want = data.reshape(1, 2, 58, 28, 28).transpose(0, 2, 1, 3, 4).reshape(1, 116, 28, 28)
    np.testing.assert_array_equal(k.run(data), want)
