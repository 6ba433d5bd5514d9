"""Rules as data: patterns, rule tables that compose with +, and the Rewriter that applies them bottom-up."""

from __future__ import annotations

from tilegrad.te import expr as E
from tilegrad.te.rewrite import P, Rewriter, Rules, match

a, b = E.Var("a"), E.Var("b")
x, y, c = P.var("x"), P.var("y"), P.const("c")

# Raw nodes: the folding constructors would already drop `* 1` and `+ 0`.
one, zero = E.const(1), E.const(0)

times_one = Rules("times_one", [(x * 1, lambda x: x), (1 * x, lambda x: x)])
plus_zero = Rules("plus_zero", [(x + 0, lambda x: x)])


def test_a_rule_table_rewrites_everywhere_bottom_up():
    e = E.Add(E.Mul(a, one), E.Mul(one, E.Mul(b, one)))
    assert Rewriter(times_one)(e) == E.Add(a, b)


def test_tables_compose_with_plus():
    both = times_one + plus_zero
    assert both.name == "times_one+plus_zero"
    assert len(both.rules) == 3 and len(times_one.rules) == 2
    e = E.Add(E.Mul(a, one), zero)
    assert Rewriter(times_one)(e) == a  # the rebuilt a + 0 folds
    assert Rewriter(both)(E.Add(E.Sub(a, b), zero)) == E.Sub(a, b)
    assert Rewriter(times_one)(E.Add(E.Sub(a, b), zero)) == E.Add(E.Sub(a, b), zero)


def test_an_action_returning_none_does_not_apply():
    seen = []

    def never(x, c):
        seen.append((x, c))
        return None

    e = E.Mul(a, E.const(3))
    out = Rewriter(Rules("never", [(x * c, never)]))(e)
    assert out is e and seen == [(a, E.const(3))]


def test_the_first_rule_that_applies_wins_and_rewriting_reaches_a_fixpoint():
    rules = Rules("shrink", [
        (x * c, lambda x, c: E.mul(x, c.value - 1) if c.value > 1 else None),
        (x * c, lambda x, c: None),
    ])
    assert Rewriter(rules)(E.Mul(a, E.const(5))) == a


def test_repeated_captures_must_match_the_same_subtree():
    cancel = Rules("cancel", [(x - x, lambda x: E.const(0))])
    assert Rewriter(cancel)(E.Add(E.Sub(a, a), E.Sub(a, b))) == E.Sub(a, b)


def test_const_captures_match_only_constants_and_literals_only_their_value():
    assert match(x * c, E.Mul(a, E.const(4)), caps := {}) and caps == {"x": a, "c": E.const(4)}
    assert not match(x * c, E.Mul(a, b), {})
    assert not match(x * 1, E.Mul(a, E.const(2)), {})
    assert not match(x * 1, E.Add(a, one), {})


def test_class_patterns_and_explicit_nodes():
    flip = Rules("flip", [(E.Max, lambda e: E.Min(e.a, e.b)), (P.node(E.Select, P.var("q"), x, x), lambda q, x: x)])
    r = Rewriter(flip)
    assert r(E.Max(a, b)) == E.Min(a, b)
    assert r(E.Select(a < b, a, a)) is a


def test_comparison_patterns():
    order = Rules("order", [(x < y, lambda x, y: E.LE(x, y - 1) if E.is_int(x.dtype) else None)])
    assert Rewriter(order)(a < b) == E.LE(a, b - 1)


def test_nothing_to_rewrite_returns_the_same_object():
    e = E.FloorDiv(E.Add(a, b), E.const(4))
    assert Rewriter(times_one + plus_zero)(e) is e
