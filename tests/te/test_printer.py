"""Golden strings of the expression printer: minimal parentheses, yet the text reads back as the same tree."""

from __future__ import annotations

import pytest

from tilegrad import te
from tilegrad.te import expr as E
from tilegrad.te.printer import format_expr

a, b, c = E.Var("a"), E.Var("b"), E.Var("c")
x, y = E.Var("x", "float32"), E.Var("y", "float32")
A = te.placeholder((4, 8), "float32", name="A")
k = te.reduce_axis(8, "k")


@pytest.mark.parametrize("e, text", [
    (a + b * c, "a + b * c"),
    ((a + b) * c, "(a + b) * c"),
    (a - b - c, "a - b - c"),
    (a - (b - c), "a - (b - c)"),
    (a - (b + c), "a - (b + c)"),
    (E.Add(a, E.Sub(b, c)), "a + (b - c)"),
    (E.Add(a, E.Add(b, c)), "a + b + c"),
    (a * b // c, "a * b // c"),
    (a * (b // c), "a * (b // c)"),
    (a * (b % c), "a * (b % c)"),
    (a // (b * c), "a // (b * c)"),
    (a // b // c, "a // b // c"),
    (a // (b // c), "a // (b // c)"),
    (a % (b + 1), "a % (b + 1)"),
    (x / (y * x), "x / (y * x)"),
    (x * (y / x), "x * (y / x)"),
    (a < b + 1, "a < b + 1"),
    ((a < b).eq(c < a), "(a < b) == (c < a)"),
    ((a < b) & (b <= c) | c.ne(a), "a < b && b <= c || c != a"),
    ((a < b) & ((b < c) | (c < a)), "a < b && (b < c || c < a)"),
    (~(a < b), "!(a < b)"),
    (~E.Var("p", "bool"), "!p"),
    (E.minimum(a, b + 1), "min(a, b + 1)"),
    (E.maximum(a, 0), "max(a, 0)"),
    (E.select(a < b, a, b + 1), "select(a < b, a, b + 1)"),
    (E.cast("float32", a) + 1.0, "float32(a) + 1.0"),
    (E.cast("int32", x), "int32(x)"),
    (E.const(1.5, "float64"), "float64(1.5)"),
    (E.const(True), "True"),
    (E.const(-3), "-3"),
    (a - -2, "a - -2"),
    (A[a, b + 1] * 2.0, "A[a, b + 1] * 2.0"),
    (te.sum(A[a, k], k), "sum(A[a, k], axis=[k])"),
    (E.exp(x) + E.power(x, 2.0), "exp(x) + pow(x, 2.0)"),
    (E.sigmoid(x * y), "sigmoid(x * y)"),
])
def test_golden(e, text):
    assert format_expr(e) == text
    assert repr(e) == str(e) == text


def _instance(cls) -> E.Expr:
    """One node of class `cls`, built directly (no folding)."""
    p, q = E.Var("p", "bool"), E.Var("q", "bool")
    if cls is E.Const:
        return E.const(1)
    if cls is E.Var:
        return a
    if cls in (E.And, E.Or):
        return cls(p, q, "bool")
    if issubclass(cls, E.Compare):
        return cls(a, b)
    if issubclass(cls, E.Binary):
        return cls(x, y) if cls is E.Div else cls(a, b)
    if issubclass(cls, E.Call):
        return cls(*[x, y][:cls.arity])
    return {
        E.Not: E.Not(p), E.Select: E.Select(p, a, b), E.Cast: E.Cast("int32", a), E.Load: A[a, b],
        E.Reduce: E.Reduce("max", A[a, k], (k,)),
    }[cls]


@pytest.mark.parametrize("cls", E.NODE_CLASSES, ids=lambda cls: cls.__name__)
def test_every_node_class_prints(cls):
    e = _instance(cls)
    assert type(e) is cls
    assert format_expr(e)
