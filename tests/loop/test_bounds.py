"""Bounds of index expressions over the loops inside an attach point: sound (every value within them) and tight
enough that a tile of fused rows and columns stays a tile (not the whole map)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad.loop.bounds import bounds, span_bound
from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate
from tilegrad.te.simplify import simplify


def _tile_rows(block: int, per_block: int, threads: int, per_thread: int, width: int):
    """The rows a thread's `per_thread` columns of a fused (row, column) loop touch, as lowering sees them: the
    thread's first row plus a row loop whose extent depends on the thread."""
    x = E.Var("x", lo=0, hi=10 ** 6)
    t = E.Var("t", lo=0, hi=threads - 1)
    first = x * per_block + t * per_thread
    extent = simplify(E.floordiv(first + (per_thread - 1), width) - E.floordiv(first, width) + 1)
    h = E.Var("h", lo=0, hi=per_thread)
    row = simplify(h + E.floordiv(first, width))
    return x, row, {"t": E.Const(threads, E.INDEX), "h": extent}, extent


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.sampled_from([(16, 4), (64, 1), (8, 2)]), st.integers(3, 60), st.integers(1, 2))
def test_the_rows_of_a_block_tile_are_bounded_without_its_threads_and_tightly(block, shape, width, stride):
    threads, per_thread = shape
    per_block = threads * per_thread
    x, row, free, extent = _tile_rows(block, per_block, threads, per_thread, width)
    lo, hi = bounds(row * stride, free)
    assert not ({v.name for v in E.free_vars(lo) | E.free_vars(hi)} & {"t", "h"})
    env = {"x": block}
    rows = [evaluate(row * stride, {**env, "t": t, "h": h}) for t in range(threads)
            for h in range(evaluate(extent, {**env, "t": t}))]
    assert evaluate(lo, env) <= min(rows) and max(rows) <= evaluate(hi, env)  # sound
    span = span_bound(simplify(hi - lo + 1))
    assert span is not None and span >= evaluate(hi, env) - evaluate(lo, env) + 1
    assert span <= stride * -(-(per_block - 1) // width) + 1  # the tile's rows, not the map's


def test_a_modulo_of_one_value_is_that_value():
    x = E.Var("x", lo=0, hi=1000)
    r = E.Var("r", lo=0, hi=0)
    lo, hi = bounds(E.floormod(x * 64 + r, 14), {"r": E.Const(1, E.INDEX)})
    assert simplify(hi - lo) == E.Const(0, E.INDEX)
    assert evaluate(lo, {"x": 5}) == (5 * 64) % 14
