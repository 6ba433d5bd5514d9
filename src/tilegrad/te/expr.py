"""The one expression system: integer, float and boolean expressions over variables.

Tensor indices, loop bounds, program features and Felix's formulas are all built from these nodes. Nodes are
immutable with structural equality and a cached hash. `==` is structural equality (so nodes work as dict keys);
comparisons that *build* expressions are `<`, `<=`, `>`, `>=` and the methods `eq` / `ne`.

Constructors fold constants and drop identities (x + 0, x * 1) as they build, which keeps lowered index
expressions small without a full simplifier pass; `simplify` does the rest.

The node classes and their constructors share this module because each needs the other (an operator of `Expr`
is a constructor, a constructor builds a node), so apart they would import each other. The printer and the
interval rules, defined over every node class, import this module and register themselves in `DERIVED`.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..errors import ExprError
from ..dtype import DTYPES, FLOAT_DTYPES, INDEX, INT_DTYPES, INT_RANGES, is_float, is_int, is_unsigned  # noqa: F401

INF = math.inf

# What `repr(e)`, `e.lo` and `e.hi` compute, registered by the modules that define them over every node class:
# "text" (te.printer.format_expr) and "interval" (te.intervals.interval). They import this module, so it cannot
# import them; the te package imports both before anything else.
DERIVED: dict[str, Callable[[Any], Any]] = {}



class Expr:
    """Base of all expression nodes. Subclasses list their fields in `_fields`."""

    # _simple: the node's simplified form, once known (nodes are immutable, so it never goes stale);
    # _text: its printed form, used as a deterministic sort key by canonicalisation.
    __slots__ = ("dtype", "_hash", "_lo", "_hi", "_simple", "_text")
    _fields: tuple[str, ...] = ()

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((type(self), self.dtype, self._key()))
        return h

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other) or hash(self) != hash(other):
            return False
        return self.dtype == other.dtype and self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def children(self) -> tuple["Expr", ...]:
        return tuple(getattr(self, f) for f in self._fields if isinstance(getattr(self, f), Expr))

    def __repr__(self) -> str:
        text = self._text
        if text is None:
            text = self._text = DERIVED["text"](self)
        return text

    __str__ = __repr__

    # -- bounds: numeric intervals from the variables' declared ranges (inclusive; +-inf when unknown) --
    @property
    def lo(self):
        if self._lo is None:
            self._lo, self._hi = DERIVED["interval"](self)
        return self._lo

    @property
    def hi(self):
        if self._hi is None:
            self._lo, self._hi = DERIVED["interval"](self)
        return self._hi

    # -- arithmetic builders --
    def __add__(self, o):
        return add(self, o)

    def __radd__(self, o):
        return add(o, self)

    def __sub__(self, o):
        return sub(self, o)

    def __rsub__(self, o):
        return sub(o, self)

    def __mul__(self, o):
        return mul(self, o)

    def __rmul__(self, o):
        return mul(o, self)

    def __truediv__(self, o):
        return div(self, o)

    def __rtruediv__(self, o):
        return div(o, self)

    def __floordiv__(self, o):
        return floordiv(self, o)

    def __rfloordiv__(self, o):
        return floordiv(o, self)

    def __mod__(self, o):
        return floormod(self, o)

    def __rmod__(self, o):
        return floormod(o, self)

    def __neg__(self):
        return sub(const(0, self.dtype), self)

    def __lt__(self, o):
        return _compare(LT, self, o)

    def __le__(self, o):
        return _compare(LE, self, o)

    def __gt__(self, o):
        return _compare(LT, o, self)

    def __ge__(self, o):
        return _compare(LE, o, self)

    def eq(self, o):
        return _compare(EQ, self, o)

    def ne(self, o):
        return _compare(NE, self, o)

    def __and__(self, o):
        return logical_and(self, o)

    def __rand__(self, o):
        return logical_and(o, self)

    def __or__(self, o):
        return logical_or(self, o)

    def __ror__(self, o):
        return logical_or(o, self)

    def __invert__(self):
        return logical_not(self)

    def __bool__(self):
        raise ExprError(f"the truth value of the expression {self} is unknown; use te.select or simplify it first")

    def astype(self, dtype: str) -> "Expr":
        return cast(dtype, self)


def _init(node: Expr, dtype: str) -> None:
    node.dtype = dtype
    node._hash = None
    node._lo = None
    node._hi = None
    node._simple = None
    node._text = None


class Const(Expr):
    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, value, dtype: str):
        _init(self, dtype)
        if dtype == "bool":
            value = bool(value)
        elif is_int(dtype):
            value = int(value)
            lo, hi = INT_RANGES[dtype]
            if dtype != INDEX and not lo <= value <= hi:  # a folded result wraps around, as its C type does
                value = (value - lo) % (hi - lo + 1) + lo
        else:
            value = float(value)
        self.value = value

    def __bool__(self):  # a constant's truth value is known (e.g. a condition that simplified to True)
        return bool(self.value)


class Var(Expr):
    """A variable: a loop index, an index of a compute, or a schedule parameter.

    Identity is the name and dtype; `lo`/`hi` (inclusive) and `upper` (a symbolic exclusive upper bound, e.g. the
    extent of the loop it indexes) are facts about it that the simplifier may use.
    """

    __slots__ = ("name", "upper")
    _fields = ("name",)

    def __init__(self, name: str, dtype: str = INDEX, lo=None, hi=None, upper: Expr | None = None):
        _init(self, dtype)
        self.name = name
        self.upper = upper
        self._lo = -INF if lo is None else lo
        self._hi = INF if hi is None else hi


class Binary(Expr):
    __slots__ = ("a", "b")
    _fields = ("a", "b")
    op = ""

    def __init__(self, a: Expr, b: Expr, dtype: str | None = None):
        _init(self, a.dtype if dtype is None else dtype)
        self.a = a
        self.b = b

    def _key(self) -> tuple:
        return (self.a, self.b)

    def children(self):
        return (self.a, self.b)


class Add(Binary):
    __slots__ = ()
    op = "+"


class Sub(Binary):
    __slots__ = ()
    op = "-"


class Mul(Binary):
    __slots__ = ()
    op = "*"


class Div(Binary):
    """True division of floats."""

    __slots__ = ()
    op = "/"


class FloorDiv(Binary):
    __slots__ = ()
    op = "//"


class FloorMod(Binary):
    __slots__ = ()
    op = "%"


class Min(Binary):
    __slots__ = ()


class Max(Binary):
    __slots__ = ()


class Compare(Binary):
    __slots__ = ()

    def __init__(self, a: Expr, b: Expr):
        Binary.__init__(self, a, b, "bool")


class EQ(Compare):
    __slots__ = ()
    op = "=="


class NE(Compare):
    __slots__ = ()
    op = "!="


class LT(Compare):
    __slots__ = ()
    op = "<"


class LE(Compare):
    __slots__ = ()
    op = "<="


class And(Binary):
    __slots__ = ()
    op = "&&"


class Or(Binary):
    __slots__ = ()
    op = "||"


class BitAnd(Binary):
    """Bitwise operations and shifts of integers (ONNX's BitwiseAnd/Or/Xor/Not and BitShift)."""

    __slots__ = ()
    op = "&"


class BitOr(Binary):
    __slots__ = ()
    op = "|"


class BitXor(Binary):
    __slots__ = ()
    op = "^"


class ShiftLeft(Binary):
    """`a << b` for a shift `b` below the bit width (the builder guards wider ones)."""

    __slots__ = ()
    op = "<<"


class ShiftRight(Binary):
    __slots__ = ()
    op = ">>"


class Not(Expr):
    __slots__ = ("a",)
    _fields = ("a",)

    def __init__(self, a: Expr):
        _init(self, "bool")
        self.a = a


class Select(Expr):
    __slots__ = ("cond", "t", "f")
    _fields = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr):
        _init(self, t.dtype)
        self.cond = cond
        self.t = t
        self.f = f


class Cast(Expr):
    __slots__ = ("a",)
    _fields = ("a",)

    def __init__(self, dtype: str, a: Expr):
        _init(self, dtype)
        self.a = a


class Call(Expr):
    """A math function of one or two float arguments; subclasses name the function."""

    __slots__ = ("args",)
    _fields = ("args",)
    fn = ""
    arity = 1

    def __init__(self, *args: Expr):
        _init(self, args[0].dtype)
        self.args = tuple(args)

    def children(self):
        return self.args


def _math(cls_name: str, fn: str, arity: int = 1) -> type[Call]:
    return type(cls_name, (Call,), {"__slots__": (), "fn": fn, "arity": arity})


Exp = _math("Exp", "exp")
Log = _math("Log", "log")
Sqrt = _math("Sqrt", "sqrt")
Rsqrt = _math("Rsqrt", "rsqrt")
Tanh = _math("Tanh", "tanh")
Erf = _math("Erf", "erf")
Sigmoid = _math("Sigmoid", "sigmoid")
Abs = _math("Abs", "abs")
Sin = _math("Sin", "sin")
Cos = _math("Cos", "cos")
Floor = _math("Floor", "floor")
Ceil = _math("Ceil", "ceil")
Round = _math("Round", "round")
Pow = _math("Pow", "pow", 2)
Fmod = _math("Fmod", "fmod", 2)  # C's remainder: the sign of the dividend
Tan = _math("Tan", "tan")
Asin = _math("Asin", "asin")
Acos = _math("Acos", "acos")
Atan = _math("Atan", "atan")
Sinh = _math("Sinh", "sinh")
Cosh = _math("Cosh", "cosh")
Asinh = _math("Asinh", "asinh")
Acosh = _math("Acosh", "acosh")
Atanh = _math("Atanh", "atanh")
MATH_CALLS: tuple[type[Call], ...] = (Exp, Log, Sqrt, Rsqrt, Tanh, Erf, Sigmoid, Abs, Sin, Cos, Floor, Ceil, Round, Pow,
                                      Fmod, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh)


class Load(Expr):
    """A read of `buffer[indices]`; `buffer` is a te Tensor or a loop-IR Buffer (anything with name/shape/dtype)."""

    __slots__ = ("buffer", "indices")
    _fields = ("buffer", "indices")

    def __init__(self, buffer: Any, indices: tuple[Expr, ...]):
        _init(self, buffer.dtype)
        self.buffer = buffer
        self.indices = tuple(indices)

    def children(self):
        return self.indices


class Reduce(Expr):
    """`combiner` ("sum", "max", "min") of `source` over the reduction variables `axes` (te computes only)."""

    __slots__ = ("combiner", "source", "axes")
    _fields = ("combiner", "source", "axes")

    def __init__(self, combiner: str, source: Expr, axes: tuple[Var, ...]):
        _init(self, source.dtype)
        self.combiner = combiner
        self.source = source
        self.axes = tuple(axes)

    def children(self):
        return (self.source,)


NODE_CLASSES: tuple[type[Expr], ...] = (
    Const, Var, Add, Sub, Mul, Div, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, And, Or, Not, Select, Cast,
    Load, Reduce, BitAnd, BitOr, BitXor, ShiftLeft, ShiftRight,
) + MATH_CALLS


# ---------------------------------------------------------------------------------------------------------------
# construction: folding constructors, also behind the operators of Expr


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


# ---------------------------------------------------------------------------------------------------------------
# traversal


def rebuild(e: Expr, children: tuple[Expr, ...]) -> Expr:
    """`e` with its expression children replaced, through the folding constructors."""
    t = type(e)
    builder = _REBUILD.get(t)
    if builder is not None:
        return builder(e, children)
    if issubclass(t, Call):
        return t(*children)
    raise ExprError(f"cannot rebuild {t.__name__}")


_REBUILD = {
    Add: lambda e, c: add(*c),
    Sub: lambda e, c: sub(*c),
    Mul: lambda e, c: mul(*c),
    Div: lambda e, c: div(*c),
    FloorDiv: lambda e, c: floordiv(*c),
    FloorMod: lambda e, c: floormod(*c),
    Min: lambda e, c: minimum(*c),
    Max: lambda e, c: maximum(*c),
    EQ: lambda e, c: _compare(EQ, *c),
    NE: lambda e, c: _compare(NE, *c),
    LT: lambda e, c: _compare(LT, *c),
    LE: lambda e, c: _compare(LE, *c),
    And: lambda e, c: logical_and(*c),
    Or: lambda e, c: logical_or(*c),
    BitAnd: lambda e, c: bit_and(*c),
    BitOr: lambda e, c: bit_or(*c),
    BitXor: lambda e, c: bit_xor(*c),
    ShiftLeft: lambda e, c: shift_left(*c),
    ShiftRight: lambda e, c: shift_right(*c),
    Not: lambda e, c: logical_not(*c),
    Select: lambda e, c: select(*c),
    Cast: lambda e, c: cast(e.dtype, *c),
    Load: lambda e, c: Load(e.buffer, c),
    Reduce: lambda e, c: Reduce(e.combiner, c[0], e.axes),
}


def map_children(e: Expr, fn) -> Expr:
    """Apply `fn` to each child; return `e` itself when nothing changed."""
    kids = e.children()
    if not kids:
        return e
    new = tuple(fn(k) for k in kids)
    if all(n is k for n, k in zip(new, kids)):
        return e
    return rebuild(e, new)


def loads(e: Expr) -> list[Load]:
    """Every Load in `e`, once per occurrence in the tree (a read used twice counts twice)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if type(x) is Load:
            out.append(x)
        stack.extend(x.children())
    return out


def flat_index(buffer, indices) -> Expr:
    """The row-major element number of `indices` in `buffer` (anything with a shape: a tensor, a loop buffer)."""
    flat: Expr = Const(0, INDEX)
    for extent, i in zip(buffer.shape, indices):
        flat = flat * extent + i
    return flat


def substitute(e: Expr, mapping: dict) -> Expr:
    """Replace variables (keys: Var or name) by expressions or numbers; a number takes the variable's dtype."""
    if not mapping:
        return e
    by_name = {(k.name if isinstance(k, Var) else k): v for k, v in mapping.items()}
    memo: dict[int, Expr] = {}

    def go(x: Expr) -> Expr:
        if type(x) is Var:
            return as_expr(by_name[x.name], x.dtype) if x.name in by_name else x
        if type(x) is Const:
            return x
        key = id(x)
        out = memo.get(key)
        if out is None:
            out = memo[key] = map_children(x, go)
        return out

    return go(e)


def free_vars(e: Expr) -> set[Var]:
    """The variables `e` reads (reduction axes of a Reduce are bound, not free)."""
    out: set[Var] = set()
    stack = [e]
    bound: set[Var] = set()
    while stack:
        x = stack.pop()
        if type(x) is Var:
            out.add(x)
        elif type(x) is Reduce:
            bound.update(x.axes)
            stack.append(x.source)
        else:
            stack.extend(x.children())
    return out - bound


def count_nodes(e: Expr) -> int:
    return 1 + sum(count_nodes(k) for k in e.children())
