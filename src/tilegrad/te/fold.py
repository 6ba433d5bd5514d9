"""Building expressions: constructors that fold constants and drop identities (x + 0, x * 1) as they build.

They are the expression system's public constructors, reached as `expr.add`, `expr.select`, ... and through the
operators of `Expr`; keeping them here leaves `expr.py` the node classes and their traversals.
"""

from __future__ import annotations

import math
from typing import Iterable

from ..errors import ExprError
from ..dtype import DTYPES, INDEX, INT_RANGES, is_float, is_int, is_unsigned
from .expr import (Abs, Acos, Acosh, Add, And, Asin, Asinh, Atan, Atanh, BitAnd, BitOr, BitXor, Call, Cast, Ceil, Const,
                   Cos, Cosh, Div, Erf, Exp, Expr, Floor, FloorDiv, FloorMod, Fmod, Log, Max, Min, Mul, Not, Or, Pow,
                   Round, Rsqrt, Select, ShiftLeft, ShiftRight, Sigmoid, Sin, Sinh, Sqrt, Sub, Tan, Tanh)

def const(value, dtype: str | None = None) -> Const:
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else INDEX if isinstance(value, int) else "float32"
    return Const(value, dtype)


def as_expr(value, like: str | None = None) -> Expr:
    """Lift a Python number to a constant; `like` is the dtype of the other operand, which a literal adopts."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(value, "bool")
    if isinstance(value, int):
        return Const(value, like if like is not None and like != "bool" else INDEX)
    if isinstance(value, float):
        return Const(value, like if like is not None and is_float(like) else "float32")
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return as_expr(value.item(), like)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    raise ExprError(f"cannot use {value!r} ({type(value).__name__}) in an expression")


def _operands(a, b) -> tuple[Expr, Expr]:
    if isinstance(a, Expr):
        b = as_expr(b, a.dtype)
    elif isinstance(b, Expr):
        a = as_expr(a, b.dtype)
    else:
        a, b = as_expr(a), as_expr(b)
    if a.dtype != b.dtype:
        if is_int(a.dtype) and is_int(b.dtype):
            wide = INDEX if INDEX in (a.dtype, b.dtype) else max(a.dtype, b.dtype, key=_int_width)
            a, b = cast(wide, a), cast(wide, b)
        else:
            raise ExprError(f"dtype mismatch: {a} is {a.dtype} but {b} is {b.dtype}; cast one of them explicitly")
    return a, b


def _int_width(dtype: str) -> int:
    return int("".join(ch for ch in dtype if ch.isdigit()) or 64)


def _is_const(e: Expr, value=None) -> bool:
    return type(e) is Const and (value is None or e.value == value)


def add(a, b) -> Expr:
    a, b = _operands(a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value + b.value, a.dtype)
    if _is_const(b, 0):
        return a
    if _is_const(a, 0):
        return b
    return Add(a, b)


def sub(a, b) -> Expr:
    a, b = _operands(a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value - b.value, a.dtype)
    if _is_const(b, 0):
        return a
    if a == b and not is_float(a.dtype):
        return Const(0, a.dtype)
    return Sub(a, b)


def mul(a, b) -> Expr:
    a, b = _operands(a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value * b.value, a.dtype)
    if _is_const(b, 1):
        return a
    if _is_const(a, 1):
        return b
    if not is_float(a.dtype) and (_is_const(a, 0) or _is_const(b, 0)):
        return Const(0, a.dtype)
    return Mul(a, b)


def div(a, b) -> Expr:
    a, b = _operands(a, b)
    if not is_float(a.dtype):
        raise ExprError(f"true division of integers ({a} / {b}); use // for floor division")
    if type(a) is Const and type(b) is Const and b.value != 0:
        return Const(a.value / b.value, a.dtype)
    if _is_const(b, 1):
        return a
    return Div(a, b)


def floordiv(a, b) -> Expr:
    a, b = _operands(a, b)
    if is_float(a.dtype):
        raise ExprError(f"floor division of floats ({a} // {b}); use te.floor(a / b)")
    if type(b) is Const:
        if b.value == 0:
            raise ExprError(f"division by zero in {a} // 0")
        if type(a) is Const:
            return Const(a.value // b.value, a.dtype)
        if b.value == 1:
            return a
    return FloorDiv(a, b)


def floormod(a, b) -> Expr:
    a, b = _operands(a, b)
    if is_float(a.dtype):
        raise ExprError(f"floor modulo of floats ({a} % {b})")
    if type(b) is Const:
        if b.value == 0:
            raise ExprError(f"modulo by zero in {a} % 0")
        if type(a) is Const:
            return Const(a.value % b.value, a.dtype)
        if b.value == 1:
            return Const(0, a.dtype)
    return FloorMod(a, b)


def minimum(a, b) -> Expr:
    a, b = _operands(a, b)
    if type(a) is Const and type(b) is Const:
        return Const(min(a.value, b.value), a.dtype)
    if a == b:
        return a
    return Min(a, b)


def maximum(a, b) -> Expr:
    a, b = _operands(a, b)
    if type(a) is Const and type(b) is Const:
        return Const(max(a.value, b.value), a.dtype)
    if a == b:
        return a
    return Max(a, b)


def _integers(what: str, a, b) -> tuple[Expr, Expr]:
    a, b = _operands(a, b)
    if not is_int(a.dtype):
        raise ExprError(f"{what} needs integer operands, got {a} and {b} of dtype {a.dtype}")
    return a, b


def bit_and(a, b) -> Expr:
    a, b = _integers("&", a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value & b.value, a.dtype)
    return BitAnd(a, b)


def bit_or(a, b) -> Expr:
    a, b = _integers("|", a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value | b.value, a.dtype)
    return BitOr(a, b)


def bit_xor(a, b) -> Expr:
    a, b = _integers("^", a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value ^ b.value, a.dtype)
    return BitXor(a, b)


def bit_not(a) -> Expr:
    """Every bit flipped: `a ^ ~0`, whose all-ones constant is -1 for signed types and the maximum for unsigned."""
    a = as_expr(a)
    if not is_int(a.dtype):
        raise ExprError(f"~ needs an integer operand, got {a} of dtype {a.dtype}")
    return bit_xor(a, Const(INT_RANGES[a.dtype][1] if is_unsigned(a.dtype) else -1, a.dtype))


def shift_left(a, b) -> Expr:
    a, b = _integers("<<", a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value << b.value, a.dtype)
    return ShiftLeft(a, b)


def shift_right(a, b) -> Expr:
    a, b = _integers(">>", a, b)
    if type(a) is Const and type(b) is Const:
        return Const(a.value >> b.value, a.dtype)
    return ShiftRight(a, b)


_COMPARE_FOLD = {
    "EQ": lambda x, y: x == y,
    "NE": lambda x, y: x != y,
    "LT": lambda x, y: x < y,
    "LE": lambda x, y: x <= y,
}


def _compare(cls, a, b) -> Expr:
    a, b = _operands(a, b)
    if type(a) is Const and type(b) is Const:
        return Const(_COMPARE_FOLD[cls.__name__](a.value, b.value), "bool")
    return cls(a, b)


def _as_bool(e) -> Expr:
    e = as_expr(e)
    if e.dtype != "bool":
        raise ExprError(f"expected a boolean expression, got {e} of dtype {e.dtype}")
    return e


def logical_and(a, b) -> Expr:
    a, b = _as_bool(a), _as_bool(b)
    if type(a) is Const:
        return b if a.value else a
    if type(b) is Const:
        return a if b.value else b
    return And(a, b, "bool")


def logical_or(a, b) -> Expr:
    a, b = _as_bool(a), _as_bool(b)
    if type(a) is Const:
        return a if a.value else b
    if type(b) is Const:
        return b if b.value else a
    return Or(a, b, "bool")


def logical_not(a) -> Expr:
    a = _as_bool(a)
    if type(a) is Const:
        return Const(not a.value, "bool")
    if type(a) is Not:
        return a.a
    return Not(a)


def all_of(conds: Iterable) -> Expr:
    out: Expr = Const(True, "bool")
    for c in conds:
        out = logical_and(out, c)
    return out


def select(cond, t, f) -> Expr:
    cond = _as_bool(cond)
    t, f = _operands(t, f)
    if type(cond) is Const:
        return t if cond.value else f
    if t == f:
        return t
    return Select(cond, t, f)


def cast(dtype: str, a) -> Expr:
    if dtype not in DTYPES:
        raise ExprError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPES)}")
    a = as_expr(a)
    if a.dtype == dtype:
        return a
    if type(a) is Const and (not is_int(dtype) or _fits(a.value, dtype)):
        return Const(a.value, dtype)
    return Cast(dtype, a)


def _fits(value, dtype: str) -> bool:
    """Whether casting the number `value` to integer `dtype` needs no wrap-around (so folding it is exact)."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    lo, hi = INT_RANGES[dtype]
    return lo <= int(value) <= hi


def _call(cls: type[Call], *args) -> Expr:
    first = as_expr(args[0])
    exprs = [first] + [as_expr(x, first.dtype) for x in args[1:]]
    for other in exprs[1:]:
        if other.dtype != first.dtype:
            raise ExprError(f"dtype mismatch in {cls.fn}: {first} is {first.dtype} but {other} is {other.dtype}; "
                            "cast one of them explicitly")
    if not is_float(first.dtype) and cls is not Abs:
        raise ExprError(f"{cls.fn} needs a float argument, got {first} of dtype {first.dtype}")
    return cls(*exprs)


def exp(x):
    return _call(Exp, x)


def log(x):
    return _call(Log, x)


def sqrt(x):
    return _call(Sqrt, x)


def rsqrt(x):
    return _call(Rsqrt, x)


def tanh(x):
    return _call(Tanh, x)


def erf(x):
    return _call(Erf, x)


def sigmoid(x):
    return _call(Sigmoid, x)


def abs_(x):
    return _call(Abs, x)


def sin(x):
    return _call(Sin, x)


def cos(x):
    return _call(Cos, x)


def floor(x):
    return _call(Floor, x)


def ceil(x):
    return _call(Ceil, x)


def round_(x):
    return _call(Round, x)


def power(x, y):
    return _call(Pow, x, y)


def fmod(x, y):
    """The remainder of x / y with the sign of x (C's fmod), for floats."""
    return _call(Fmod, x, y)


def tan(x):
    return _call(Tan, x)


def asin(x):
    return _call(Asin, x)


def acos(x):
    return _call(Acos, x)


def atan(x):
    return _call(Atan, x)


def sinh(x):
    return _call(Sinh, x)


def cosh(x):
    return _call(Cosh, x)


def asinh(x):
    return _call(Asinh, x)


def acosh(x):
    return _call(Acosh, x)


def atanh(x):
    return _call(Atanh, x)


def ceildiv(a, b) -> Expr:
    """ceil(a / b) for positive b."""
    return floordiv(add(a, sub(b, 1)), b)


