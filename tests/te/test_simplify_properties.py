"""Property tests of the simplifier: sound at every point of the declared ranges, idempotent, and with sound
numeric intervals. Expressions are random bounded integer and boolean trees over a few of the variables below."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate
from tilegrad.te.simplify import simplify

# A loop extent `T`, two loop indices bounded symbolically by it (i_0, i_1 < T), a small index, a signed value and
# a positive divisor.
T = E.Var("T", lo=1, hi=16)
P = E.Var("p", lo=1, hi=5)
I0 = E.Var("i_0", lo=0, hi=T.hi - 1, upper=T)
I1 = E.Var("i_1", lo=0, hi=T.hi - 1, upper=T)
J = E.Var("j", lo=0, hi=7)
N = E.Var("n", lo=-6, hi=6)
VARS = (T, P, I0, I1, J, N)

_INT_BINARY = [E.add, E.sub, E.mul, E.minimum, E.maximum]
_COMPARE = [
    lambda a, b: a < b, lambda a, b: a <= b, lambda a, b: a > b, lambda a, b: a >= b,
    lambda a, b: a.eq(b), lambda a, b: a.ne(b),
]


# Strategies draw *builders* (functions of the chosen variables) so that they are made once, at import.


def _apply(f, *kids):
    return lambda vs: f(*(k(vs) for k in kids))


def _with(f, value):
    return lambda vs: f(vs, value)


_LEAVES = st.one_of(
    st.integers(0, 3).map(lambda k: lambda vs: vs[k % len(vs)]),
    st.integers(-4, 8).map(lambda c: lambda vs: E.const(c)),
)


def _int_extend(kids):
    conds = st.builds(_apply, st.sampled_from(_COMPARE), kids, kids)
    return st.one_of(
        st.builds(_apply, st.sampled_from(_INT_BINARY), kids, kids),
        st.builds(lambda a, c: _with(lambda vs, c: a(vs) // c, c), kids, st.integers(1, 9)),
        st.builds(lambda a, c: _with(lambda vs, c: a(vs) % c, c), kids, st.integers(1, 9)),
        st.builds(lambda a, v: _with(lambda vs, v: a(vs) // v, v), kids, st.sampled_from([T, P])),
        st.builds(lambda a, v: _with(lambda vs, v: a(vs) % v, v), kids, st.sampled_from([T, P])),
        st.builds(lambda cond, a, b: _apply(E.select, cond, a, b), conds, kids, kids),
        st.builds(lambda a: _apply(_through_int8, a), kids),
    )


def _through_int8(a: E.Expr) -> E.Expr:
    """A narrowing cast, scaled so that it often wraps around (outside [-128, 127]), and back."""
    return E.cast(E.INDEX, E.cast("int8", a * 32))


_INTS = st.recursive(_LEAVES, _int_extend, max_leaves=10)
_BOOLS = st.recursive(
    st.builds(_apply, st.sampled_from(_COMPARE), _INTS, _INTS),
    lambda kids: st.one_of(
        st.builds(lambda a, b: _apply(E.logical_and, a, b), kids, kids),
        st.builds(lambda a, b: _apply(E.logical_or, a, b), kids, kids),
        st.builds(lambda a: _apply(E.logical_not, a), kids),
    ),
    max_leaves=4,
)


@st.composite
def points(draw) -> dict:
    """A point in the declared ranges where every loop index is below its symbolic extent."""
    t = draw(st.integers(1, 16))
    return {
        "T": t, "p": draw(st.integers(1, 5)), "i_0": draw(st.integers(0, t - 1)), "i_1": draw(st.integers(0, t - 1)),
        "j": draw(st.integers(0, 7)), "n": draw(st.integers(-6, 6)),
    }


@st.composite
def scenarios(draw, kind: str = "int"):
    """(expression over 2-4 of the variables, a few points in range)."""
    chosen = draw(st.lists(st.sampled_from(VARS), min_size=2, max_size=4, unique_by=lambda v: v.name))
    build = draw(_BOOLS if kind == "bool" else _INTS)
    return build(chosen), draw(st.lists(points(), min_size=1, max_size=6))


def _subexpressions(e: E.Expr):
    yield e
    for k in e.children():
        yield from _subexpressions(k)


def _fresh(e: E.Expr) -> E.Expr:
    """A structurally equal copy of `e` without cached simplified forms, printed text or bounds.

    The simplifier remembers its result on each node, so re-simplifying its own output would only read that back."""
    if not e.children():
        return e
    new = object.__new__(type(e))
    for cls in type(e).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            setattr(new, slot, getattr(e, slot))
    for f in e._fields:
        v = getattr(e, f)
        if isinstance(v, E.Expr):
            setattr(new, f, _fresh(v))
        elif type(e) is not E.Reduce and isinstance(v, tuple):
            setattr(new, f, tuple(_fresh(k) for k in v))
    new._hash = new._lo = new._hi = new._simple = new._text = None
    return new


@given(scenarios())
def test_simplify_is_sound_on_integer_expressions(case):
    e, envs = case
    s = simplify(e)
    for env in envs:
        assert evaluate(s, env) == evaluate(e, env), f"{e}  ->  {s}  at {env}"


@given(scenarios("bool"))
def test_simplify_is_sound_on_boolean_expressions(case):
    e, envs = case
    s = simplify(e)
    for env in envs:
        assert bool(evaluate(s, env)) == bool(evaluate(e, env)), f"{e}  ->  {s}  at {env}"


@given(scenarios())
def test_simplify_is_idempotent(case):
    e, _ = case
    s = simplify(e)
    again = simplify(_fresh(s))
    assert again == s and hash(again) == hash(s), f"{e}  ->  {s}  ->  {again}"


@given(scenarios("bool"))
def test_simplify_is_idempotent_on_booleans(case):
    e, _ = case
    s = simplify(e)
    again = simplify(_fresh(s))
    assert again == s, f"{e}  ->  {s}  ->  {again}"


@given(scenarios())
def test_simplified_forms_do_not_depend_on_the_cache(case):
    e, _ = case
    assert simplify(_fresh(e)) == simplify(e)


@given(scenarios())
def test_intervals_contain_every_value(case):
    e, envs = case
    for root in (e, simplify(e)):
        for sub in _subexpressions(root):
            for env in envs:
                v = evaluate(sub, env)
                assert sub.lo <= v <= sub.hi, f"{sub} = {v} outside [{sub.lo}, {sub.hi}] at {env}"


def test_fresh_copies_are_equal_and_uncached():
    e = simplify((I0 * T + I1) // T + J * 2)
    copy = _fresh(e)
    assert copy == e and copy is not e and copy._simple is None


@given(st.sampled_from([2, 4, 8]), st.integers(2, 6), st.integers(-3, 3), st.integers(-2, 5))
def test_a_division_whose_dividend_is_aligned_splits_soundly_and_drops_the_inner_index(c, q, k, const):
    """(c*a + b) // (c*q) = a // q and (c*a + b) % (c*q) = (a % q)*c + b when 0 <= b < c: the inner index b, the
    one a vectorised loop runs over, leaves the division (a transposed reshape's index)."""
    b = E.Var("b", lo=0, hi=c - 1)
    x = (k * I0 + N + const) * c + b
    quotient, remainder = simplify(x // (c * q)), simplify(x % (c * q))
    assert "b" not in str(quotient) and not any(type(t) in (E.FloorDiv, E.FloorMod) and "b" in str(t)
                                                  for t in _subterms(remainder))
    for i0 in range(T.hi):
        for n in range(N.lo, N.hi + 1):
            for bv in range(c):
                env = {"T": T.hi, "i_0": i0, "n": n, "b": bv}
                value = (k * i0 + n + const) * c + bv
                assert evaluate(quotient, env) == value // (c * q)
                assert evaluate(remainder, env) == value % (c * q)


def _subterms(e: E.Expr):
    yield e
    for child in e.children():
        yield from _subterms(child)
