"""The numeric interval of an expression: from its variables' declared ranges, inclusive, +-inf when unknown.

`Expr.lo` and `Expr.hi` read them (once per node) through `expr.DERIVED`, where this module registers `interval`;
the simplifier's rules and the renderers' choices of division read those.
"""

from __future__ import annotations

import math

from ..dtype import INT_RANGES, is_int, is_unsigned
from .expr import DERIVED, Add, Cast, Const, Expr, FloorDiv, FloorMod, Max, Min, Mul, Select, Sub

INF = math.inf

def interval(e: Expr) -> tuple:
    """(lo, hi) of `e`."""
    t = type(e)
    if t is Const:
        v = e.value
        return (v, v) if not isinstance(v, bool) else (int(v), int(v))
    rule = _INTERVALS.get(t)
    if rule is None:
        if e.dtype == "bool":
            return 0, 1
        return INT_RANGES[e.dtype] if is_unsigned(e.dtype) else (-INF, INF)
    lo, hi = rule(e)
    if is_unsigned(e.dtype):  # unsigned arithmetic wraps around: outside its range, any value is possible
        full = INT_RANGES[e.dtype]
        return (lo, hi) if full[0] <= lo and hi <= full[1] else full
    return lo, hi


def _mul_interval(a_lo, a_hi, b_lo, b_hi):
    products = []
    for x in (a_lo, a_hi):
        for y in (b_lo, b_hi):
            if (x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x)):
                products.append(0)
            else:
                products.append(x * y)
    return min(products), max(products)


def _floordiv_interval(e):
    a, b = e.a, e.b
    if b.lo > 0:
        cands = []
        for x in (a.lo, a.hi):
            for y in (b.lo, b.hi):
                if math.isinf(x) or math.isinf(y):
                    cands.append(x / y if not (math.isinf(x) and math.isinf(y)) else INF)
                else:
                    cands.append(x // y)
        lo, hi = min(cands), max(cands)
        return lo, hi
    return -INF, INF


def _floormod_interval(e):
    a, b = e.a, e.b
    if b.lo > 0:
        if a.lo >= 0 and a.hi < b.lo:
            return a.lo, a.hi
        return 0, b.hi - 1
    return -INF, INF


def _select_interval(e):
    return min(e.t.lo, e.f.lo), max(e.t.hi, e.f.hi)


def _cast_interval(e):
    if is_int(e.dtype) and (is_int(e.a.dtype) or e.a.dtype == "bool"):
        lo, hi = INT_RANGES[e.dtype]
        if lo <= e.a.lo and e.a.hi <= hi:
            return e.a.lo, e.a.hi
        return lo, hi
    return -INF, INF


_INTERVALS = {
    Add: lambda e: (e.a.lo + e.b.lo, e.a.hi + e.b.hi),
    Sub: lambda e: (e.a.lo - e.b.hi, e.a.hi - e.b.lo),
    Mul: lambda e: _mul_interval(e.a.lo, e.a.hi, e.b.lo, e.b.hi),
    FloorDiv: _floordiv_interval,
    FloorMod: _floormod_interval,
    Min: lambda e: (min(e.a.lo, e.b.lo), min(e.a.hi, e.b.hi)),
    Max: lambda e: (max(e.a.lo, e.b.lo), max(e.a.hi, e.b.hi)),
    Select: _select_interval,
    Cast: _cast_interval,
}

DERIVED["interval"] = interval
