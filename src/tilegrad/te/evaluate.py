"""Evaluation of expressions: to Python numbers, and vectorised over NumPy arrays.

Each evaluator is a table keyed by node class; a test checks that every table covers every node class. Integer
division and modulo are floor operations in both, as in the expression semantics (and Python). `EVAL_NUMPY` is the
one NumPy table: `evaluate_numpy`, `interpret` and the feature formulas' batches (`tune.formulas`) all run an
expression's numbered program (`program.py`) with it.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ExprError
from . import expr as E
from .program import number, run


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))


def _rsqrt(v):
    return 1.0 / math.sqrt(v)


def _py_round(v):
    return float(np.round(v))  # round half to even, like nearbyint / rintf


EVAL_PY = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.Div: lambda a, b: a / b,
    E.FloorDiv: lambda a, b: a // b,
    E.FloorMod: lambda a, b: a % b,
    E.Min: min,
    E.Max: max,
    E.EQ: lambda a, b: a == b,
    E.NE: lambda a, b: a != b,
    E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b,
    E.And: lambda a, b: bool(a) and bool(b),
    E.Or: lambda a, b: bool(a) or bool(b),
    E.Not: lambda a: not a,
    E.BitAnd: lambda a, b: a & b,
    E.BitOr: lambda a, b: a | b,
    E.BitXor: lambda a, b: a ^ b,
    E.ShiftLeft: lambda a, b: a << b,
    E.ShiftRight: lambda a, b: a >> b,
    E.Select: lambda c, t, f: t if c else f,
    E.Exp: math.exp,
    E.Log: math.log,
    E.Sqrt: math.sqrt,
    E.Rsqrt: _rsqrt,
    E.Tanh: math.tanh,
    E.Erf: math.erf,
    E.Sigmoid: _sigmoid,
    E.Abs: abs,
    E.Sin: math.sin,
    E.Cos: math.cos,
    E.Floor: lambda v: float(math.floor(v)),
    E.Ceil: lambda v: float(math.ceil(v)),
    E.Round: _py_round,
    E.Pow: math.pow,  # a float or a domain error, like math.log; `**` would return a complex number
    E.Fmod: math.fmod,
    E.Tan: math.tan,
    E.Asin: math.asin,
    E.Acos: math.acos,
    E.Atan: math.atan,
    E.Sinh: math.sinh,
    E.Cosh: math.cosh,
    E.Asinh: math.asinh,
    E.Acosh: math.acosh,
    E.Atanh: math.atanh,
    E.Cast: None,  # handled in `evaluate` (needs the target dtype)
    E.Const: None,
    E.Var: None,
    E.Load: None,
    E.Reduce: None,
}


def _np_sigmoid(v):
    with np.errstate(over="ignore"):  # exp(-v) = inf for very negative v gives the right limit, 0
        return 1.0 / (1.0 + np.exp(-v))


EVAL_NUMPY = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.Div: np.true_divide,
    E.FloorDiv: np.floor_divide,
    E.FloorMod: np.mod,
    E.Min: np.minimum,
    E.Max: np.maximum,
    E.EQ: np.equal,
    E.NE: np.not_equal,
    E.LT: np.less,
    E.LE: np.less_equal,
    E.And: np.logical_and,
    E.Or: np.logical_or,
    E.Not: np.logical_not,
    E.BitAnd: np.bitwise_and,
    E.BitOr: np.bitwise_or,
    E.BitXor: np.bitwise_xor,
    E.ShiftLeft: np.left_shift,
    E.ShiftRight: np.right_shift,
    E.Select: np.where,
    E.Exp: np.exp,
    E.Log: np.log,
    E.Sqrt: np.sqrt,
    E.Rsqrt: lambda v: 1.0 / np.sqrt(v),
    E.Tanh: np.tanh,
    E.Erf: None,  # filled below: NumPy has no erf; vectorise math.erf
    E.Sigmoid: _np_sigmoid,
    E.Abs: np.abs,
    E.Sin: np.sin,
    E.Cos: np.cos,
    E.Floor: np.floor,
    E.Ceil: np.ceil,
    E.Round: np.round,
    E.Pow: np.power,
    E.Fmod: np.fmod,
    E.Tan: np.tan,
    E.Asin: np.arcsin,
    E.Acos: np.arccos,
    E.Atan: np.arctan,
    E.Sinh: np.sinh,
    E.Cosh: np.cosh,
    E.Asinh: np.arcsinh,
    E.Acosh: np.arccosh,
    E.Atanh: np.arctanh,
    E.Cast: None,
    E.Const: None,
    E.Var: None,
    E.Load: None,
    E.Reduce: None,
}
EVAL_NUMPY[E.Erf] = np.vectorize(math.erf, otypes=[np.float64])


def _env_value(env: dict, v: E.Var):
    if v.name in env:
        return env[v.name]
    if v in env:
        return env[v]
    raise ExprError(f"no value for variable {v.name!r}")


def evaluate(e: E.Expr, env: dict | None = None, tensors: dict | None = None):
    """`e` as a Python number; `env` maps variables (or names) to numbers, `tensors` names to NumPy arrays."""
    env = env or {}
    t = type(e)
    if t is E.Const:
        return e.value
    if t is E.Var:
        return _env_value(env, e)
    if t is E.Cast:
        v = evaluate(e.a, env, tensors)
        return _cast_py(e.dtype, v)
    if t is E.Load:
        if tensors is None or e.buffer.name not in tensors:
            raise ExprError(f"no array for tensor {e.buffer.name!r}")
        idx = tuple(int(evaluate(i, env, tensors)) for i in e.indices)
        return tensors[e.buffer.name][idx].item()
    if t is E.Reduce:
        raise ExprError("evaluate a Reduce through a compute, not as a scalar expression")
    if t is E.Select:  # lazy: only the taken branch
        return evaluate(e.t if evaluate(e.cond, env, tensors) else e.f, env, tensors)
    fn = EVAL_PY[t]
    return fn(*(evaluate(k, env, tensors) for k in e.children()))


def _cast_py(dtype: str, v):
    if dtype == "bool":
        return bool(v)
    if E.is_int(dtype):
        return int(np.array(v).astype(dtype))  # C-like truncation and wrap-around
    return float(np.array(v, dtype=dtype))


def evaluate_numpy(e: E.Expr, env: dict | None = None, tensors: dict | None = None):
    """`e` evaluated elementwise over NumPy arrays (broadcasting) bound to its variables."""
    program = number([e])
    if any(type(x) is E.Reduce for x in program.nodes):
        raise ExprError("evaluate a Reduce through a compute, not as a scalar expression")
    env = env or {}

    def load(x: E.Load, *indices):
        if tensors is None or x.buffer.name not in tensors:
            raise ExprError(f"no array for tensor {x.buffer.name!r}")
        return tensors[x.buffer.name][tuple(np.asarray(i).astype(np.int64) for i in indices)]

    structural = {E.Const: numpy_const, E.Var: lambda x: np.asarray(_env_value(env, x)), E.Cast: numpy_cast,
                  E.Load: load}
    return run(program, EVAL_NUMPY, structural)[0]


def numpy_const(x: E.Const) -> np.ndarray:
    """A constant as a 0-d array of its dtype, so that NumPy promotes it as the expression semantics do."""
    return np.asarray(x.value, dtype=x.dtype)


def numpy_cast(x: E.Cast, a) -> np.ndarray:
    return np.asarray(a).astype(x.dtype)
