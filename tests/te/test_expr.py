"""Expression nodes: folding constructors, dtype rules, structural equality, substitution and numeric bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ExprError
from tilegrad.te import expr as E
from tilegrad.te.evaluate import evaluate

a, b = E.Var("a"), E.Var("b")
x, y = E.Var("x", "float32"), E.Var("y", "float32")
k32 = E.Var("k", "int32")
p = E.Var("p", "bool")
i = E.Var("i", lo=0, hi=9)
j = E.Var("j", lo=-3, hi=4)


# -- constant folding ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("e, want", [
    (E.const(3) + 4, E.const(7)),
    (E.const(3) - 5, E.const(-2)),
    (E.const(3) * 4, E.const(12)),
    (E.const(-7) // 2, E.const(-4)),
    (E.const(-7) % 2, E.const(1)),
    (E.const(7) % -2, E.const(-1)),
    (E.minimum(E.const(3), 4), E.const(3)),
    (E.maximum(E.const(3), 4), E.const(4)),
    (E.const(3) < 4, E.const(True)),
    (E.const(3).eq(4), E.const(False)),
    (E.const(1.5) / 2.0, E.const(0.75)),
    (E.cast("int32", E.const(2.7)), E.const(2, "int32")),
    (E.cast("float32", E.const(3)), E.const(3.0)),
    (E.select(E.const(True), a, b), a),
    (E.select(p, a, a), a),
    (E.logical_and(E.const(True), p), p),
    (E.logical_and(E.const(False), p), E.const(False)),
    (E.logical_or(p, E.const(True)), E.const(True)),
    (E.logical_not(E.logical_not(p)), p),
    (E.all_of([]), E.const(True)),
])
def test_constants_fold(e, want):
    assert e == want


def test_identities_are_dropped_as_expressions_are_built():
    assert a + 0 is a and 0 + a is a and a - 0 is a
    assert a * 1 is a and 1 * a is a
    assert a * 0 == E.const(0) and a - a == E.const(0)
    assert a // 1 is a and a % 1 == E.const(0)
    assert E.minimum(a, a) is a and E.maximum(a, a) is a
    assert x / 1.0 is x and E.cast("float32", x) is x


def test_float_identities_that_are_wrong_for_nan_are_kept():
    assert type(x * 0.0) is E.Mul
    assert type(x - x) is E.Sub


def test_narrowing_casts_of_constants_fold_only_without_wrap_around():
    assert E.cast("int8", 100) == E.const(100, "int8")
    for value in (300, math.nan, math.inf):
        e = E.cast("int8", E.const(value, "float32") if isinstance(value, float) else value)
        assert type(e) is E.Cast
    w = E.cast("int8", a)
    assert E.substitute(w, {a: 300}) == E.cast("int8", 300)
    assert evaluate(E.substitute(w, {a: 300})) == evaluate(w, {"a": 300}) == 44


def test_division_by_a_zero_constant_raises():
    with pytest.raises(ExprError, match="division by zero"):
        a // 0
    with pytest.raises(ExprError, match="modulo by zero"):
        a % 0


# -- dtype rules ---------------------------------------------------------------------------------------------------


def test_python_literals_adopt_the_other_operands_dtype():
    assert (x + 1).b == E.const(1.0, "float32")
    assert (x + 1).dtype == "float32"
    assert (k32 + 1).dtype == "int32" and (1 + k32).dtype == "int32"
    assert (k32 < 3).a.dtype == "int32"
    assert (E.Var("h", "float16") * 2.5).dtype == "float16"
    assert (a + np.int32(2)).b == E.const(2)


def test_integer_widths_widen_with_a_cast():
    e = k32 + a
    assert e.dtype == "int64" and e.a == E.cast("int64", k32)


@pytest.mark.parametrize("make", [lambda: x + a, lambda: a * 1.5, lambda: E.select(p, x, a), lambda: x < a,
                                  lambda: E.power(x, a), lambda: E.minimum(k32, y)])
def test_float_and_int_do_not_mix(make):
    with pytest.raises(ExprError, match="dtype mismatch.*cast"):
        make()


def test_division_operators_need_the_right_kind():
    with pytest.raises(ExprError, match="true division of integers.*use //"):
        a / b
    with pytest.raises(ExprError, match="floor division of floats"):
        x // y
    with pytest.raises(ExprError, match="needs a float"):
        E.exp(a)
    with pytest.raises(ExprError, match="boolean"):
        E.logical_and(a, p)
    with pytest.raises(ExprError, match="unknown dtype"):
        E.cast("float8", a)
    with pytest.raises(ExprError, match="cannot use"):
        a + "1"


def test_truth_value_of_a_symbolic_expression_raises():
    with pytest.raises(ExprError, match="truth value.*unknown"):
        bool(a < b)
    with pytest.raises(ExprError):
        if a + 1:
            pass
    assert bool(E.const(3) < 4) is True and bool(E.const(0)) is False  # a constant's truth value is known


# -- structural equality -------------------------------------------------------------------------------------------


def test_equal_trees_are_equal_and_hash_alike():
    e1, e2 = a * 4 + b // 2, a * 4 + b // 2
    assert e1 is not e2 and e1 == e2 and hash(e1) == hash(e2)
    table = {e1: "first"}
    assert table[e2] == "first"
    assert len({e1, e2, a * 4 + b // 3}) == 2


@pytest.mark.parametrize("other", [
    E.Var("a", "int32"), E.Var("c"), E.const(1.0), E.const(True), a + 1, E.Add(b, a), E.Sub(a, b),
])
def test_different_trees_are_different(other):
    assert (a + b) != other and other != (a + b)


def test_variables_are_identified_by_name_and_dtype():
    assert E.Var("a", lo=0, hi=3) == a and hash(E.Var("a", lo=0, hi=3)) == hash(a)
    assert E.Var("a", "int32") != a
    assert E.const(1) != E.const(1, "int32") and E.const(1) != E.const(1.0)


def test_comparisons_build_expressions_and_eq_is_structural():
    assert type(a < b) is E.LT and type(a >= b) is E.LE and (a >= b).a is b
    assert type(a.eq(b)) is E.EQ and type(a.ne(b)) is E.NE
    assert (a == b) is False and (a == E.Var("a")) is True


# -- substitution and free variables -------------------------------------------------------------------------------


def test_substitute_by_var_or_name():
    e = a * 4 + b
    assert E.substitute(e, {a: 2}) == 8 + b
    assert E.substitute(e, {"a": 2, "b": 1}) == E.const(9)
    assert E.substitute(e, {b: a}) == a * 4 + a
    assert E.substitute(e, {}) is e
    assert E.substitute(e, {"z": 1}) is e


def test_substituted_numbers_take_the_variables_dtype():
    assert E.substitute(x * 2.0 + y, {x: 3}) == 6.0 + y
    s = E.substitute(k32 + 1, {k32: 3})
    assert s == E.const(4, "int32")


def test_substitute_reaches_every_kind_of_node():
    A = te.placeholder((8,), "float32", name="A")
    e = E.select(a < b, E.exp(A[a + 1]), E.cast("float32", E.maximum(a, b)))
    s = E.substitute(e, {a: 2, b: 5})
    assert E.free_vars(s) == set()
    assert s == E.exp(A[E.const(3)])


def test_free_vars():
    A = te.placeholder((8,), "float32", name="A")
    kk = te.reduce_axis(8, "kk")
    assert E.free_vars(a * b + a // 2) == {a, b}
    assert E.free_vars(A[a] + E.cast("float32", b)) == {a, b}
    assert E.free_vars(te.sum(A[kk + a], kk)) == {a}
    assert E.free_vars(E.const(1)) == set()


# -- numeric intervals ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("e, lo, hi", [
    (i * 8 + j, -3, 76),
    (i - j, -4, 12),
    (i * j, -27, 36),
    (i // 4, 0, 2),
    (j // 2, -2, 2),
    (i % 4, 0, 3),
    (i % 16, 0, 9),
    (j % 4, 0, 3),
    (E.minimum(i, j), -3, 4),
    (E.maximum(i, j), 0, 9),
    (E.select(p, i, j), -3, 9),
    (i < j, 0, 1),
    (E.cast("int32", i), 0, 9),
    (E.cast("int8", i * 100), -128, 127),
    (a + 1, -math.inf, math.inf),
    (i * a, -math.inf, math.inf),
    (i // E.Var("d", lo=1, hi=3), 0, 9),
])
def test_intervals(e, lo, hi):
    assert (e.lo, e.hi) == (lo, hi)


def test_intervals_contain_every_value_on_a_grid():
    d = E.Var("d", lo=1, hi=3)
    exprs = [i * 8 - j, (i - j) // d, (j * 3) % d, E.minimum(i - 5, j) * j, E.select(i < j, i // 2, j - i)]
    for e in exprs:
        for vi in range(0, 10):
            for vj in range(-3, 5):
                for vd in range(1, 4):
                    v = evaluate(e, {"i": vi, "j": vj, "d": vd})
                    assert e.lo <= v <= e.hi, f"{e} = {v} outside [{e.lo}, {e.hi}]"


def test_nodes_rebuild_through_the_folding_constructors():
    e = E.Add(a, b)
    assert E.rebuild(e, (E.const(2), E.const(3))) == E.const(5)
    assert E.map_children(e, lambda c: c) is e
    assert E.count_nodes(a * 4 + b) == 5
