"""The simplifier: canonical integer sums and products, div/mod rules that use variable ranges, min/max/select.

Integer arithmetic is put in a canonical form (a sum of monomials with integer coefficients, terms in a fixed
order, the constant last) so that equal index expressions print and hash alike. Float arithmetic is only
constant-folded: reassociating floats would change the numbers. Unsigned arithmetic wraps around, so the algebra
of signed integers does not hold for it: it is left as written, and only its intervals are used.
"""

from __future__ import annotations

import math

from ..dtype import is_unsigned
from . import expr as E
from .rewrite import P, Rewriter, Rules

# ---------------------------------------------------------------------------------------------------------------
# canonical linear forms: {monomial: coefficient}, constant; a monomial is a sorted tuple of atoms

Monomial = tuple


def _atom_key(e: E.Expr):
    return (0, e.name) if type(e) is E.Var else (1, repr(e))


def linear(e: E.Expr) -> tuple[dict[Monomial, int], int]:
    """Integer `e` as a polynomial over atoms (anything that is not + - * of integers)."""
    t = type(e)
    if t is E.Const:
        return {}, e.value
    if t is E.Add or t is E.Sub:
        ta, ca = linear(e.a)
        tb, cb = linear(e.b)
        sign = 1 if t is E.Add else -1
        terms = dict(ta)
        for m, k in tb.items():
            terms[m] = terms.get(m, 0) + sign * k
        return {m: k for m, k in terms.items() if k}, ca + sign * cb
    if t is E.Mul:
        ta, ca = linear(e.a)
        tb, cb = linear(e.b)
        terms: dict[Monomial, int] = {}

        def put(m, k):
            if k:
                terms[m] = terms.get(m, 0) + k

        for m, k in ta.items():
            put(m, k * cb)
        for m, k in tb.items():
            put(m, k * ca)
        for ma, ka in ta.items():
            for mb, kb in tb.items():
                put(tuple(sorted(ma + mb, key=_atom_key)), ka * kb)
        return {m: k for m, k in terms.items() if k}, ca * cb
    return {(e,): 1}, 0


def from_linear(terms: dict[Monomial, int], constant: int, dtype: str = E.INDEX) -> E.Expr:
    """Rebuild a canonical expression: terms sorted, positive first, `x*c` spelled with the constant last."""
    ordered = sorted(terms.items(), key=lambda mk: (mk[1] < 0, [_atom_key(a) for a in mk[0]]))
    out: E.Expr | None = None
    for mono, k in ordered:
        prod: E.Expr = mono[0]
        for a in mono[1:]:
            prod = E.Mul(prod, a)
        mag = abs(k)
        term = prod if mag == 1 else E.Mul(prod, E.Const(mag, dtype))
        if out is None:
            out = term if k > 0 else E.Mul(prod, E.Const(k, dtype))
        else:
            out = E.Add(out, term) if k > 0 else E.Sub(out, term)
    if out is None:
        return E.Const(constant, dtype)
    if constant > 0:
        return E.Add(out, E.Const(constant, dtype))
    if constant < 0:
        return E.Sub(out, E.Const(-constant, dtype))
    return out


def canonical(e: E.Expr) -> E.Expr:
    if not E.is_int(e.dtype):
        return e
    return from_linear(*linear_merged(e), e.dtype)


def linear_merged(e: E.Expr) -> tuple[dict[Monomial, int], int]:
    """`linear(e)` with a fused loop's row and column terms merged back into it (`_merged_div_mod`)."""
    return _merged_div_mod(*linear(e))


def _merged_div_mod(terms: dict[Monomial, int], constant: int) -> tuple[dict[Monomial, int], int]:
    """`x % c * k + x // c * (c * k)` as `x * k` (floor division and modulo by c > 0, a constant or an expression
    of dynamic dimensions), so that a loop fused from a split one indexes as the loop it was (the split's two
    indices, rebuilt from the fused one, add up to it)."""
    for mono in [m for m in terms if len(m) == 1 and type(m[0]) is E.FloorMod]:
        mod = mono[0]
        if mono not in terms or mod.b.lo <= 0:
            continue
        k = terms[mono]
        quotient = _times_divisor(mod, k)
        if any(terms.get(m) != j for m, j in quotient.items()):
            continue
        del terms[mono]
        for m in quotient:
            del terms[m]
        inner, c = linear(mod.a)
        for m, j in inner.items():
            terms[m] = terms.get(m, 0) + k * j
        terms = {m: j for m, j in terms.items() if j}
        constant += k * c
    return terms, constant


def _times_divisor(mod: E.FloorMod, k: int) -> dict[Monomial, int]:
    """The terms of `k * (x // d) * d` for `mod` = x % d: one per term of d's polynomial, each times x // d, in the
    form the simplifier leaves it in (`y // a // d` as `y // (a * d)`: the outer index of a loop fused from three
    or more, as a channels-last output's pixels are)."""
    nested = type(mod.a) is E.FloorDiv and type(mod.a.b) is E.Const and type(mod.b) is E.Const and mod.a.b.value > 0
    div = E.floordiv(mod.a.a, mod.a.b.value * mod.b.value) if nested else E.FloorDiv(mod.a, mod.b)
    d_terms, d_constant = linear(mod.b)
    out = {tuple(sorted((div, *m), key=_atom_key)): k * j for m, j in d_terms.items()}
    if d_constant:
        out[(div,)] = k * d_constant
    return out


# ---------------------------------------------------------------------------------------------------------------
# proofs from ranges: numeric intervals, plus a variable's symbolic upper bound (a loop index is < its extent)


def lower_bound(e: E.Expr):
    """A lower bound of integer `e`, tighter than `e.lo` where loop indices have symbolic extents."""
    terms, c = linear(e)
    rest: dict = {}
    sym = E.Const(c, e.dtype)
    bound = c
    for mono, k in terms.items():
        if k < 0 and len(mono) == 1 and type(mono[0]) is E.Var and mono[0].upper is not None:
            sym = sym + k * (mono[0].upper - 1)
        else:
            rest[mono] = k
    if len(rest) == len(terms):
        return e.lo
    remaining = from_linear(rest, 0, e.dtype) if rest else E.Const(0, e.dtype)
    bound = canonical(sym + remaining)
    return bound.lo


def _algebraic(dtype: str) -> bool:
    """Whether the algebra of integers holds for `dtype` (signed integers; unsigned ones wrap around)."""
    return E.is_int(dtype) and not is_unsigned(dtype)


def prove_lt(a: E.Expr, b: E.Expr) -> bool:
    if a.hi < b.lo:
        return True
    return _algebraic(a.dtype) and lower_bound(E.sub(b, a)) > 0


def prove_le(a: E.Expr, b: E.Expr) -> bool:
    if a.hi <= b.lo:
        return True
    return _algebraic(a.dtype) and lower_bound(E.sub(b, a)) >= 0


def prove_nonneg(e: E.Expr) -> bool:
    return e.lo >= 0


# ---------------------------------------------------------------------------------------------------------------
# rule actions


def _canonical_rule(e):
    return canonical(e) if _algebraic(e.dtype) else None


def _split_by_divisor(x: E.Expr, d: E.Expr):
    """x = quotient*d + rest where every term of quotient*d visibly has the factor d; None if nothing splits."""
    terms, c = linear(x)
    quot: dict = {}
    rest: dict = {}
    qc, rc = 0, c
    if type(d) is E.Const:
        dv = d.value
        for mono, k in terms.items():
            if k % dv == 0:
                quot[mono] = k // dv
            else:
                rest[mono] = k
        qc, rc = c // dv, c % dv
    else:
        for mono, k in terms.items():
            if d in mono:
                i = mono.index(d)
                m = mono[:i] + mono[i + 1:]
                quot[m if m else ()] = quot.get(m if m else (), 0) + k
            else:
                rest[mono] = k
    const_part = quot.pop((), 0) if () in quot else 0
    qc += const_part
    return quot, qc, rest, rc


def _split_modular(x: E.Expr, dv: int) -> E.Expr | None:
    """x // dv as sum(k // dv * term) when the remainders sum(k % dv * term) provably stay in [0, dv)."""
    terms, c = linear(x)
    rest = {m: k % dv for m, k in terms.items() if k % dv}
    r = from_linear(rest, c % dv, x.dtype)
    if not (prove_nonneg(r) and r.hi < dv):
        return None
    quot = {m: k // dv for m, k in terms.items() if k // dv}
    return from_linear(quot, c // dv, x.dtype)


def _split_aligned(x: E.Expr, dv: int) -> tuple[E.Expr, int, E.Expr] | None:
    """(a, c, b) with x = c*a + b, c a divisor of dv between 1 and dv, b provably in [0, c), the largest such c;
    else None. Then x // dv = a // (dv/c) and x % dv = (a % (dv/c))*c + b: the index of a transposed reshape,
    (8*i + j) % 64 with j < 8, keeps its contiguous run in j visible to the C compiler, which vectorises it."""
    terms, const = linear(x)
    for c in sorted({math.gcd(k, dv) for k in terms.values()} - {1, dv}, reverse=True):
        b = from_linear({m: k for m, k in terms.items() if k % c}, const % c, x.dtype)
        if prove_nonneg(b) and b.hi < c:
            return from_linear({m: k // c for m, k in terms.items() if k % c == 0}, const // c, x.dtype), c, b
    return None


def _positive_divisor(d: E.Expr) -> bool:
    return d.lo >= 1 and (type(d) is E.Const or type(d) is E.Var)


def _floordiv_rule(x, d):
    if not _algebraic(x.dtype) or not _positive_divisor(d):
        return None
    if prove_nonneg(x) and prove_lt(x, d):
        return E.Const(0, x.dtype)
    inner = x
    if type(x) is E.FloorDiv and type(d) is E.Const and type(x.b) is E.Const and x.b.value > 0:
        return E.floordiv(x.a, x.b.value * d.value)
    if type(d) is E.Const:
        modular = _split_modular(x, d.value)
        if modular is not None:
            return modular
        aligned = _split_aligned(x, d.value)
        if aligned is not None:
            a, c, _ = aligned
            return E.floordiv(a, d.value // c)
    quot, qc, rest, rc = _split_by_divisor(inner, d)
    if not quot and qc == 0:
        return None
    q = from_linear(quot, qc, x.dtype)
    r = from_linear(rest, rc, x.dtype)
    if prove_nonneg(r) and prove_lt(r, d):
        return q
    return E.add(q, E.floordiv(r, d))


def _floormod_rule(x, d):
    if not _algebraic(x.dtype) or not _positive_divisor(d):
        return None
    if prove_nonneg(x) and prove_lt(x, d):
        return x
    if type(x) is E.FloorMod and type(d) is E.Const and type(x.b) is E.Const and x.b.value % d.value == 0:
        return E.floormod(x.a, d)
    if type(d) is E.Const:
        aligned = _split_aligned(x, d.value)
        if aligned is not None:
            a, c, b = aligned
            return E.add(E.mul(E.floormod(a, d.value // c), c), b)
    quot, qc, rest, rc = _split_by_divisor(x, d)
    if not quot and qc == 0:
        return None
    r = from_linear(rest, rc, x.dtype)
    if prove_nonneg(r) and prove_lt(r, d):
        return r
    return E.floormod(r, d)


def _min_rule(x, y):
    a, b = x, y
    if prove_le(a, b):
        return a
    if prove_le(b, a):
        return b
    return None


def _max_rule(x, y):
    a, b = x, y
    if prove_le(a, b):
        return b
    if prove_le(b, a):
        return a
    return None


def _lt_rule(x, y):
    a, b = x, y
    if prove_lt(a, b):
        return E.Const(True, "bool")
    if prove_le(b, a):
        return E.Const(False, "bool")
    return None


def _le_rule(x, y):
    a, b = x, y
    if prove_le(a, b):
        return E.Const(True, "bool")
    if prove_lt(b, a):
        return E.Const(False, "bool")
    return None


def _eq_rule(x, y):
    a, b = x, y
    if _algebraic(a.dtype) and canonical(E.sub(a, b)) == E.Const(0, a.dtype):
        return E.Const(True, "bool")
    if prove_lt(a, b) or prove_lt(b, a):
        return E.Const(False, "bool")
    return None


def _select_rule(cond, t, f):
    return t if t == f else None


x, y, d = P.var("x"), P.var("y"), P.var("d")
c = P.const("c")

canonical_forms = Rules("canonical_forms", [(E.Add, _canonical_rule), (E.Sub, _canonical_rule), (E.Mul, _canonical_rule)])

divmod_rules = Rules("divmod_rules", [
    (x // d, _floordiv_rule),
    (x % d, _floormod_rule),
])

minmax_rules = Rules("minmax_rules", [
    (P.node(E.Min, x, y), _min_rule),
    (P.node(E.Max, x, y), _max_rule),
    (P.node(E.Select, P.var("cond"), P.var("t"), P.var("f")), _select_rule),
])

comparison_rules = Rules("comparison_rules", [
    (x < y, _lt_rule),
    (x <= y, _le_rule),
    (P.node(E.EQ, x, y), _eq_rule),
    (P.node(E.NE, x, y), lambda x, y: E.logical_not(r) if type(r := _eq_rule(x, y)) is E.Const else None),
])

simplify = Rewriter(canonical_forms + divmod_rules + minmax_rules + comparison_rules, cache_on_nodes=True)
