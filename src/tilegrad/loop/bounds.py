"""Symbolic bounds of index expressions over loops that vary: the basis of bound inference for compute_at.

`bounds(e, free)` gives expressions (lo, hi) such that lo <= e <= hi whenever each free variable v lies in
[0, free[v] - 1] and the other variables are held fixed. Affine terms are exact; other atoms fall back to
monotonicity (floordiv, min, max) or to their full numeric range.
"""

from __future__ import annotations

from ..te import expr as E
from ..te.simplify import from_linear, linear_merged, simplify


def _depends(e: E.Expr, free: dict[str, E.Expr]) -> bool:
    return any(v.name in free for v in E.free_vars(e))


def bounds(e: E.Expr, free: dict[str, E.Expr]) -> tuple[E.Expr, E.Expr] | None:
    """(lo, hi) of integer `e` as expressions of the fixed variables, or None when unknown. A free variable's
    extent may name another free one (the rows of a thread's part of a tile that a fused loop splits, inside the
    block's thread loops): the variables no other extent names are let run first, the others held fixed, then
    the next layer, so the terms each layer leaves still cancel exactly."""
    lo, hi, left = e, e, dict(free)
    while left:
        named = {v.name for extent in left.values() for v in E.free_vars(extent)}
        layer = {name: extent for name, extent in left.items() if name not in named} or left
        low, high = _bounds_once(lo, layer), _bounds_once(hi, layer)
        if low is None or high is None:
            return None
        lo, hi = low[0], high[1]
        left = {name: extent for name, extent in left.items() if name not in layer}
    return lo, hi


def _bounds_once(e: E.Expr, free: dict[str, E.Expr]) -> tuple[E.Expr, E.Expr] | None:
    """(lo, hi) of `e` where each free variable runs to its extent, which may name other free variables."""
    if not _depends(e, free):
        return e, e
    terms, c = linear_merged(e)
    lo: E.Expr = E.Const(c, e.dtype)
    hi: E.Expr = E.Const(c, e.dtype)
    fixed: dict = {}
    for mono, k in terms.items():
        varying = [a for a in mono if _depends(a, free)]
        if not varying:
            fixed[mono] = k
            continue
        coeff: E.Expr = E.Const(k, e.dtype)
        for a in mono:
            if a not in varying:
                if a.lo < 0:
                    return None
                coeff = coeff * a
        if len(varying) == 1 and type(varying[0]) is E.Var:
            v = varying[0]
            top = free[v.name] - 1
            if k > 0:
                hi = hi + coeff * top
            else:
                lo = lo + coeff * top
            continue
        if len(varying) != 1:
            return None
        inner = _atom_bounds(varying[0], free)
        if inner is None:
            return None
        a_lo, a_hi = inner
        if k > 0:
            lo, hi = lo + coeff * a_lo, hi + coeff * a_hi
        else:
            lo, hi = lo + coeff * a_hi, hi + coeff * a_lo
    rest = from_linear(fixed, 0, e.dtype) if fixed else E.Const(0, e.dtype)
    return simplify(lo + rest), simplify(hi + rest)


def _atom_bounds(a: E.Expr, free: dict[str, E.Expr]) -> tuple[E.Expr, E.Expr] | None:
    t = type(a)
    if t is E.FloorDiv and type(a.b) is E.Const and a.b.value > 0:
        inner = bounds(a.a, free)
        if inner is None:
            return None
        return E.floordiv(inner[0], a.b), E.floordiv(inner[1], a.b)
    if t is E.FloorMod and type(a.b) is E.Const and a.b.value > 0:
        inner = bounds(a.a, free)
        if inner is not None and simplify(inner[1] - inner[0]) == E.Const(0, a.dtype):  # one value (extents of 1)
            at = E.floormod(inner[0], a.b)
            return at, at
        return E.Const(0, a.dtype), E.Const(a.b.value - 1, a.dtype)
    if t in (E.Min, E.Max):
        ba, bb = bounds(a.a, free), bounds(a.b, free)
        if ba is None or bb is None:
            return None
        pick = E.minimum if t is E.Min else E.maximum
        return pick(ba[0], bb[0]), pick(ba[1], bb[1])
    if t is E.Select:
        bt, bf = bounds(a.t, free), bounds(a.f, free)
        if bt is None or bf is None:
            return None
        return E.minimum(bt[0], bf[0]), E.maximum(bt[1], bf[1])
    if a.lo > -E.INF and a.hi < E.INF:
        return E.Const(int(a.lo), a.dtype), E.Const(int(a.hi), a.dtype)
    return None


def span_bound(e: E.Expr) -> int | None:
    """A constant upper bound of `e`, a region's extent `hi - lo + 1`, through the pairs of floor divisions it
    subtracts: `k * (A // d) - k * (B // d)` with `A - B` a constant c >= 0 is at most `k * ceil(c / d)`, whatever
    A is. The rows a tile of a fused (row, column) loop touches are such a pair, which the terms' separate
    ranges bound only by the whole height. None where a term left over is unbounded."""
    terms, total = linear_merged(e)
    pending = dict(terms)
    for mono, k in terms.items():
        if mono not in pending or k <= 0 or len(mono) != 1 or type(mono[0]) is not E.FloorDiv:
            continue
        a = mono[0]
        if type(a.b) is not E.Const or a.b.value <= 0:
            continue
        for other, j in pending.items():
            if j != -k or len(other) != 1 or type(other[0]) is not E.FloorDiv or other[0].b != a.b:
                continue
            gap = simplify(a.a - other[0].a)
            if type(gap) is E.Const and gap.value >= 0:
                total += k * -(-gap.value // a.b.value)
                del pending[mono], pending[other]
                break
    for mono, k in pending.items():
        hi = from_linear({mono: k}, 0, e.dtype).hi
        if hi >= E.INF:
            return None
        total += int(hi)
    return total
