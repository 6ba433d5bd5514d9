"""The simplifier's canonical forms and the div/mod, min/max and comparison rules on hand-picked cases."""

from __future__ import annotations

import itertools

import pytest

from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate
from tilegrad.te.simplify import simplify

a, b, c = E.Var("a"), E.Var("b"), E.Var("c")
i = E.Var("i", lo=0, hi=63)
j = E.Var("j", lo=0, hi=7)
T = E.Var("T", lo=1, hi=64)
i_0 = E.Var("i_0", lo=0, hi=63)
i_1 = E.Var("i_1", lo=0, hi=T.hi - 1, upper=T)


def test_equal_sums_in_any_order_simplify_alike():
    terms = [a * 3, b, c // 2, E.const(5), a * b]
    forms = set()
    for order in itertools.permutations(terms):
        e = order[0]
        for t in order[1:]:
            e = e + t
        forms.add(simplify(e))
    assert len(forms) == 1
    s = forms.pop()
    assert hash(s) == hash(simplify(5 + (a * b + (c // 2 + (b + a * 3)))))


@pytest.mark.parametrize("left, right", [
    (a + b + c, c + (b + a)),
    (a * b * c, c * (b * a)),
    ((a + b) * (a - b), a * a - b * b),
    (a * 3 - b + 2, 2 - b + 3 * a),
    (a * b + b * a, 2 * (b * a)),
    ((a - 1) * 4, 4 * a - 4),
])
def test_canonical_forms_are_structurally_equal(left, right):
    sl, sr = simplify(left), simplify(right)
    assert sl == sr and hash(sl) == hash(sr)
    d = {sl: "value"}
    assert d[sr] == "value"


def test_terms_cancel():
    assert simplify(a * 4 + b - a * 4) == b
    assert simplify(a * 4 + b - 4 * a) is b
    assert simplify((a + 1) - (1 + a)) == E.const(0)


def test_canonical_spelling():
    assert repr(simplify(3 * a + 1 + b)) == "a * 3 + b + 1"
    assert repr(simplify(b - 3 * a - 1)) == "b - a * 3 - 1"
    assert repr(simplify(0 - a)) == "a * -1"


def test_split_index_recombines():
    assert simplify((i * 8 + j) // 8) == i
    assert simplify((i * 8 + j) % 8) == j
    assert simplify((j + i * 8) // 4 // 2) == i
    assert simplify((i * 8 + j) % 16 % 8) == j


def test_split_by_a_symbolic_extent_recombines():
    assert simplify((i_0 * T + i_1) // T) == i_0
    assert simplify((i_0 * T + i_1) % T) == i_1
    assert simplify((i_0 * T + i_1 + T) // T) == simplify(i_0 + 1)


def test_division_rules_keep_what_they_cannot_prove():
    n = E.Var("n", lo=-8, hi=8)
    assert simplify((i * 8 + n) // 8) != i      # n may be negative
    assert simplify(i * 3 // 8) == i * 3 // 8   # nothing divides
    e = simplify((i - 1) // 8)
    for v in range(64):
        assert evaluate(e, {"i": v}) == (v - 1) // 8


def test_small_operands_of_div_and_mod():
    assert simplify(j // 8) == E.const(0)
    assert simplify(j % 8) is j
    assert simplify(i_1 // T) == E.const(0)
    assert simplify(i_1 % T) is i_1


@pytest.mark.parametrize("e, want", [
    (E.minimum(j, 8), j),
    (E.maximum(j, 8), E.const(8)),
    (E.minimum(i_1, T), i_1),
    (E.maximum(i_1 + 1, T), T),
    (j < 8, E.const(True)),
    (j >= 8, E.const(False)),
    (i_1 < T, E.const(True)),
    ((a + 1).eq(1 + a), E.const(True)),
    ((a + 1).ne(a + 1), E.const(False)),
    (j.eq(9), E.const(False)),
    (E.select(a < b, c + 1, 1 + c), c + 1),
])
def test_minmax_select_and_comparisons(e, want):
    assert simplify(e) == want


def test_float_arithmetic_is_not_reassociated():
    x, y = E.Var("x", "float32"), E.Var("y", "float32")
    e = (x + y) - x
    assert simplify(e) == e
    assert simplify(x.eq(x)) == x.eq(x)  # NaN != NaN


def test_narrowing_cast_bounds_are_not_trusted():
    x = E.Var("x", lo=0, hi=300)
    e = E.cast("int8", x) >= 0
    assert evaluate(simplify(e), {"x": 200}) == evaluate(e, {"x": 200}) is False


def test_an_index_rebuilt_from_a_loop_fused_from_three_folds_back():
    """(n, h, w) fused into f: n = f // (H W), h = f // W % H, w = f % W; the row (n H + h) W + w is f (a
    channels-last convolution's pixels, numbered as its GEMM's rows)."""
    f = E.Var("f", lo=0)
    n, h, w = f // (56 * 56), f // 56 % 56, f % 56
    assert simplify(((n * 56 + h) * 56 + w) * 24 + 3) == simplify(f * 24 + 3)
    assert simplify(f // 12 % 5 * 12 + f // 60 * 60 + f % 12) == f
    assert simplify(f // 12 % 5 * 12 + f // 60 * 48 + f % 12) != f  # not the same multiple: kept
    for v in range(0, 400, 7):
        assert evaluate(f // 12 % 5 * 12 + f // 60 * 60 + f % 12, {"f": v}) == v


def test_simplify_returns_the_same_object_at_a_fixpoint():
    e = simplify(a * 3 + b // 2)
    assert simplify(e) is e


def test_a_split_index_rebuilt_from_its_fused_loop_folds_back():
    f, g = E.Var("f", lo=0, hi=31), E.Var("g", lo=-40, hi=40)
    assert simplify(f % 16 + f // 16 * 16 + g * 32) == simplify(f + g * 32)
    assert simplify((g * 3 + 1) % 16 * 2 + (g * 3 + 1) // 16 * 32) == simplify(g * 6 + 2)  # floor: any sign
    assert simplify(f % 16 + f // 16 * 8) != simplify(f)  # not the same multiple: kept
    for v in range(-40, 41):
        assert evaluate((g * 3 + 1) % 16 * 2 + (g * 3 + 1) // 16 * 32, {"g": v}) == v * 6 + 2
