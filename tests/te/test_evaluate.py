"""The evaluators: every node class in both tables, and Python numbers agree with NumPy arrays everywhere."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ExprError
from tilegrad.te import expr as E
from tilegrad.te.evaluate import EVAL_NUMPY, EVAL_PY, evaluate, evaluate_numpy

STRUCTURAL = {E.Const, E.Var, E.Cast, E.Load, E.Reduce}

a, b = E.Var("a"), E.Var("b")
x, y = E.Var("x", "float64"), E.Var("y", "float64")
p, q = E.Var("p", "bool"), E.Var("q", "bool")


@pytest.mark.parametrize("table", [EVAL_PY, EVAL_NUMPY], ids=["EVAL_PY", "EVAL_NUMPY"])
def test_tables_cover_every_node_class(table):
    assert set(table) == set(E.NODE_CLASSES)
    assert {cls for cls, fn in table.items() if fn is None} == STRUCTURAL
    for cls, fn in table.items():
        assert cls in STRUCTURAL or callable(fn), cls.__name__


def _pointwise(e: E.Expr, env: dict) -> np.ndarray:
    """`evaluate` at each position of the arrays in `env`."""
    n = len(next(iter(env.values())))
    return np.array([evaluate(e, {k: v[i].item() for k, v in env.items()}) for i in range(n)])


def _agree(e: E.Expr, env: dict, rtol=1e-12):
    got = np.broadcast_to(evaluate_numpy(e, env), (len(next(iter(env.values()))),))
    want = _pointwise(e, env)
    if np.issubdtype(got.dtype, np.floating):
        np.testing.assert_allclose(got, want.astype(np.float64), rtol=rtol, atol=1e-300)
    else:
        np.testing.assert_array_equal(got, want)


rng = np.random.default_rng(0)
# An argument range inside each math function's domain, with exact halves for the rounding functions.
_DOMAIN = {
    E.Log: (0.05, 20.0), E.Sqrt: (0.0, 20.0), E.Rsqrt: (0.05, 20.0), E.Pow: (0.05, 4.0), E.Exp: (-20.0, 20.0),
    E.Sigmoid: (-40.0, 40.0), E.Asin: (-0.99, 0.99), E.Acos: (-0.99, 0.99), E.Atanh: (-0.99, 0.99),
    E.Acosh: (1.0, 20.0), E.Tan: (-1.5, 1.5),
}
_HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])


@pytest.mark.parametrize("cls", E.MATH_CALLS, ids=lambda cls: cls.__name__)
def test_math_calls_agree(cls):
    lo, hi = _DOMAIN.get(cls, (-4.0, 4.0))
    xs = np.concatenate([rng.uniform(lo, hi, 40), _HALVES[(lo <= _HALVES) & (_HALVES <= hi)]])
    env = {"x": xs, "y": rng.uniform(-2.0, 2.0, xs.shape)}
    e = cls(x, y) if cls.arity == 2 else cls(x)
    _agree(e, env)


_INT_OPS = [
    lambda u, v: u + v, lambda u, v: u - v, lambda u, v: u * v, lambda u, v: u // v, lambda u, v: u % v,
    E.minimum, E.maximum, lambda u, v: u < v, lambda u, v: u <= v, lambda u, v: u > v, lambda u, v: u >= v,
    lambda u, v: u.eq(v), lambda u, v: u.ne(v),
    lambda u, v: E.select(u < v, u * 2, v - 1),
]


@pytest.mark.parametrize("op", range(len(_INT_OPS)))
def test_integer_operators_agree(op):
    us = rng.integers(-20, 21, 60)
    vs = rng.integers(-6, 7, 60)
    vs[vs == 0] = 3
    _agree(_INT_OPS[op](a, b), {"a": us, "b": vs})


@pytest.mark.parametrize("f", [
    lambda: x + y, lambda: x - y, lambda: x * y, lambda: x / y, lambda: E.minimum(x, y), lambda: E.maximum(x, y),
    lambda: x < y, lambda: x.eq(y), lambda: E.select(x < 0.0, -x, y), lambda: E.cast("int32", x),
    lambda: E.cast("float32", x) * 2.0,
], ids=["add", "sub", "mul", "div", "min", "max", "lt", "eq", "select", "to_int", "to_float32"])
def test_float_operators_agree(f):
    xs = np.concatenate([rng.uniform(-9, 9, 40), [-2.7, -0.5, 0.0, 2.7]])
    ys = rng.uniform(0.5, 3.0, xs.shape)
    _agree(f(), {"x": xs, "y": ys}, rtol=1e-6)


@pytest.mark.parametrize("f", [lambda: p & q, lambda: p | q, lambda: ~p, lambda: E.select(p, q, ~q)],
                         ids=["and", "or", "not", "select"])
def test_boolean_operators_agree(f):
    _agree(f(), {"p": np.array([False, False, True, True]), "q": np.array([False, True, False, True])})


@pytest.mark.parametrize("u, v", [(-7, 2), (7, -2), (-7, -2), (-1, 8), (-8, 8), (0, 5)])
def test_floor_division_and_modulo_follow_python(u, v):
    env = {"a": u, "b": v}
    assert evaluate(a // b, env) == u // v
    assert evaluate(a % b, env) == u % v
    assert evaluate_numpy(a // b, env) == u // v
    assert evaluate_numpy(a % b, env) == u % v


def test_casts_wrap_and_truncate_like_c():
    assert evaluate(E.cast("int8", a), {"a": 200}) == -56
    assert evaluate_numpy(E.cast("int8", a), {"a": np.array([200])})[0] == -56
    assert evaluate(E.cast("int32", x), {"x": -2.7}) == -2
    assert evaluate(E.cast("int64", p), {"p": True}) == 1
    assert evaluate(E.cast("float32", x), {"x": 0.1}) == float(np.float32(0.1))


def test_special_function_values():
    assert evaluate(E.sigmoid(x), {"x": 0.0}) == 0.5
    assert evaluate(E.sigmoid(x), {"x": 2.0}) == pytest.approx(0.8807970779778823, rel=1e-15)
    assert evaluate(E.erf(x), {"x": 0.5}) == pytest.approx(0.5204998778130465, rel=1e-15)
    assert evaluate(E.erf(x), {"x": -1.0}) == pytest.approx(-0.8427007929497149, rel=1e-15)
    assert evaluate(E.rsqrt(x), {"x": 4.0}) == 0.5
    assert evaluate(E.rsqrt(x), {"x": 0.25}) == 2.0
    vs = np.array([0.0, 2.0, 0.5, -1.0])
    np.testing.assert_allclose(evaluate_numpy(E.erf(x), {"x": vs}), [math.erf(v) for v in vs], rtol=1e-15)
    np.testing.assert_allclose(evaluate_numpy(E.rsqrt(x), {"x": np.array([4.0, 0.25])}), [0.5, 2.0])


def test_sigmoid_saturates_without_overflow():
    vs = np.array([-1000.0, -100.0, 100.0, 1000.0])
    for dtype in ("float32", "float64"):
        v = E.Var("v", dtype)
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            got = evaluate_numpy(E.sigmoid(v), {"v": vs.astype(dtype)})
        np.testing.assert_allclose(got, [0.0, 0.0, 1.0, 1.0], atol=1e-40)
        assert [evaluate(E.sigmoid(v), {"v": s}) for s in (-1000.0, 1000.0)] == [0.0, 1.0]


def test_pow_outside_its_domain_is_an_error_not_a_complex_number():
    assert evaluate(E.power(x, y), {"x": 2.0, "y": 0.5}) == math.sqrt(2.0)
    assert evaluate(E.power(x, y), {"x": -2.0, "y": 3.0}) == -8.0
    with pytest.raises(ValueError):
        evaluate(E.power(x, y), {"x": -8.0, "y": 1.0 / 3.0})
    with np.errstate(invalid="ignore"):
        assert np.isnan(evaluate_numpy(E.power(x, y), {"x": -8.0, "y": 1.0 / 3.0}))


def test_loads_read_the_named_array():
    A = te.placeholder((3, 4), "float32", name="A")
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    e = A[a, b + 1] * 2.0
    assert evaluate(e, {"a": 2, "b": 1}, {"A": arr}) == 20.0
    got = evaluate_numpy(e, {"a": np.array([[0], [2]]), "b": np.array([[0, 2]])}, {"A": arr})
    np.testing.assert_array_equal(got, [[2.0, 6.0], [18.0, 22.0]])


def test_select_evaluates_only_the_taken_branch():
    assert evaluate(E.select(b.eq(0), a, a // b), {"a": 5, "b": 0}) == 5


def test_variables_may_be_bound_by_name_or_by_var():
    assert evaluate(a + b, {"a": 1, b: 2}) == 3


def test_errors_name_what_is_missing():
    with pytest.raises(ExprError, match="'b'"):
        evaluate(a + b, {"a": 1})
    with pytest.raises(ExprError, match="'A'"):
        evaluate(te.placeholder((2,), name="A")[a], {"a": 0})
    k = te.reduce_axis(4)
    with pytest.raises(ExprError, match="Reduce"):
        evaluate_numpy(te.sum(E.cast("float32", k), k))
