"""Element-wise operations with NumPy broadcasting: arithmetic, comparisons, activations, clip, where and cast.

Operands are tensors or Python numbers; numbers take the dtype of the tensors they meet. Shapes broadcast as in
NumPy (aligned at the right, an extent of 1 stretches), and an operand that is stretched reads index 0 along that
axis. A result is tagged "elemwise" when every operand already has the output's shape and "broadcast" otherwise, so
a schedule can tell a plain map from one that re-reads an operand.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Sequence

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_float, check_same_dtype

Operand = te.Tensor | int | float


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The NumPy broadcast of `shapes`; a ShapeError names the first dimension where they disagree."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(-rank, 0):
        sizes = {s[d] for s in shapes if len(s) >= -d} - {1}
        if len(sizes) > 1:
            listed = ", ".join(str(tuple(s)) for s in shapes)
            raise ShapeError(f"shapes {listed} do not broadcast: dimension {d} has extents {sorted(sizes)}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_index(shape: Sequence[int], index: Sequence) -> tuple:
    """The index into an operand of `shape` that `index`, into a broadcast shape of at least that rank, reads."""
    lead = len(index) - len(shape)
    return tuple(0 if n == 1 else i for n, i in zip(shape, index[lead:]))


def add(a: Operand, b: Operand, name: str = "add") -> te.Tensor:
    return _map("add", [a, b], lambda u, v: u + v, name)


def sub(a: Operand, b: Operand, name: str = "sub") -> te.Tensor:
    return _map("sub", [a, b], lambda u, v: u - v, name)


def mul(a: Operand, b: Operand, name: str = "mul") -> te.Tensor:
    return _map("mul", [a, b], lambda u, v: u * v, name)


def div(a: Operand, b: Operand, name: str = "div") -> te.Tensor:
    """True division of float operands."""
    return _map("div", [a, b], lambda u, v: u / v, name, floats=True)


def maximum(a: Operand, b: Operand, name: str = "maximum") -> te.Tensor:
    return _map("maximum", [a, b], E.maximum, name)


def minimum(a: Operand, b: Operand, name: str = "minimum") -> te.Tensor:
    return _map("minimum", [a, b], E.minimum, name)


def power(a: Operand, b: Operand, name: str = "power") -> te.Tensor:
    """`a ** b` of float operands."""
    return _map("power", [a, b], E.power, name, floats=True)


def equal(a: Operand, b: Operand, name: str = "equal") -> te.Tensor:
    return _map("equal", [a, b], lambda u, v: u.eq(v), name)


def not_equal(a: Operand, b: Operand, name: str = "not_equal") -> te.Tensor:
    return _map("not_equal", [a, b], lambda u, v: u.ne(v), name)


def less(a: Operand, b: Operand, name: str = "less") -> te.Tensor:
    return _map("less", [a, b], lambda u, v: u < v, name)


def less_equal(a: Operand, b: Operand, name: str = "less_equal") -> te.Tensor:
    return _map("less_equal", [a, b], lambda u, v: u <= v, name)


def greater(a: Operand, b: Operand, name: str = "greater") -> te.Tensor:
    return _map("greater", [a, b], lambda u, v: u > v, name)


def greater_equal(a: Operand, b: Operand, name: str = "greater_equal") -> te.Tensor:
    return _map("greater_equal", [a, b], lambda u, v: u >= v, name)


def where(cond: te.Tensor, a: Operand, b: Operand, name: str = "where") -> te.Tensor:
    """`a` where the boolean tensor `cond` holds, else `b`, all three broadcast together."""
    if not isinstance(cond, te.Tensor) or cond.dtype != "bool":
        raise ShapeError(f"where: the condition must be a bool tensor, got {cond!r}")
    return _map("where", [cond, a, b], E.select, name, skip=1)


def relu(x: te.Tensor, name: str = "relu") -> te.Tensor:
    return _map("relu", [x], lambda v: E.maximum(v, 0), name)


def leaky_relu(x: te.Tensor, alpha: float = 0.01, name: str = "leaky_relu") -> te.Tensor:
    """`x` where positive, `alpha * x` elsewhere."""
    return _map("leaky_relu", [x], lambda v: E.select(v > 0, v, v * alpha), name, floats=True,
                attrs={"alpha": alpha})


def sigmoid(x: te.Tensor, name: str = "sigmoid") -> te.Tensor:
    return _map("sigmoid", [x], E.sigmoid, name, floats=True)


def tanh(x: te.Tensor, name: str = "tanh") -> te.Tensor:
    return _map("tanh", [x], E.tanh, name, floats=True)


def exp(x: te.Tensor, name: str = "exp") -> te.Tensor:
    return _map("exp", [x], E.exp, name, floats=True)


def log(x: te.Tensor, name: str = "log") -> te.Tensor:
    return _map("log", [x], E.log, name, floats=True)


def sqrt(x: te.Tensor, name: str = "sqrt") -> te.Tensor:
    return _map("sqrt", [x], E.sqrt, name, floats=True)


def erf(x: te.Tensor, name: str = "erf") -> te.Tensor:
    return _map("erf", [x], E.erf, name, floats=True)


def gelu(x: te.Tensor, name: str = "gelu") -> te.Tensor:
    """The exact GELU, `x * (1 + erf(x / sqrt(2))) / 2` (not the tanh approximation)."""
    return _map("gelu", [x], lambda v: v * 0.5 * (1.0 + E.erf(v * (1 / math.sqrt(2.0)))), name, floats=True)


def mod(a: Operand, b: Operand, fmod: bool = False, name: str = "mod") -> te.Tensor:
    """The remainder of a / b: with the divisor's sign (Python's %), or with `fmod` the dividend's (C's fmod). An
    integer divisor of 0 gives 0 rather than a trap; a float one gives NaN."""
    def rem(u, v):
        if E.is_float(u.dtype):
            r = E.fmod(u, v)
            return r if fmod else E.select(E.logical_and(r.ne(0.0), (r < 0.0).ne(v < 0.0)), r + v, r)
        safe = E.select(v.eq(0), E.const(1, v.dtype), v)
        r = E.floormod(u, safe)
        if fmod:  # floor modulo has the divisor's sign; C's remainder has the dividend's
            r = E.select(E.logical_and(r.ne(0), (u < 0).ne(v < 0)), r - safe, r)
        return E.select(v.eq(0), E.const(0, u.dtype), r)

    return _map("mod", [a, b], rem, name, attrs={"fmod": bool(fmod)})


def prelu(x: te.Tensor, slope: Operand, name: str = "prelu") -> te.Tensor:
    """x where non-negative, slope * x elsewhere, the slope broadcast against x (a learned leaky relu)."""
    return _map("prelu", [x, slope], lambda u, s: E.select(u < 0, u * s, u), name)


def softplus(x: te.Tensor, name: str = "softplus") -> te.Tensor:
    """log(1 + exp(x)), as max(x, 0) + log1p(exp(-|x|)) so that no exponential overflows."""
    return _map("softplus", [x], lambda v: E.maximum(v, 0.0) + _log1p(E.exp(-E.abs_(v))), name, floats=True)


def softsign(x: te.Tensor, name: str = "softsign") -> te.Tensor:
    return _map("softsign", [x], lambda v: v / (E.abs_(v) + 1.0), name, floats=True)


def mish(x: te.Tensor, name: str = "mish") -> te.Tensor:
    """x * tanh(softplus(x))."""
    return _map("mish", [x], lambda v: v * E.tanh(E.maximum(v, 0.0) + _log1p(E.exp(-E.abs_(v)))), name,
                floats=True)


def elu(x: te.Tensor, alpha: float = 1.0, name: str = "elu") -> te.Tensor:
    """x where positive, alpha * (exp(x) - 1) elsewhere."""
    return _map("elu", [x], lambda v: E.select(v > 0.0, v, (E.exp(v) - 1.0) * alpha), name, floats=True,
                attrs={"alpha": alpha})


def selu(x: te.Tensor, alpha: float, gamma: float, name: str = "selu") -> te.Tensor:
    """gamma * x where positive, gamma * alpha * (exp(x) - 1) elsewhere."""
    return _map("selu", [x], lambda v: E.select(v > 0.0, v * gamma, (E.exp(v) * alpha - alpha) * gamma), name,
                floats=True, attrs={"alpha": alpha, "gamma": gamma})


def celu(x: te.Tensor, alpha: float = 1.0, name: str = "celu") -> te.Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return _map("celu", [x], lambda v: E.maximum(v, 0.0) + E.minimum((E.exp(v / alpha) - 1.0) * alpha, 0.0), name,
                floats=True, attrs={"alpha": alpha})


def thresholded_relu(x: te.Tensor, alpha: float = 1.0, name: str = "thresholded_relu") -> te.Tensor:
    """x where greater than alpha, else 0."""
    return _map("thresholded_relu", [x], lambda v: E.select(v > alpha, v, E.const(0.0, v.dtype)), name, floats=True,
                attrs={"alpha": alpha})


def shrink(x: te.Tensor, bias: float = 0.0, lambd: float = 0.5, name: str = "shrink") -> te.Tensor:
    """x + bias below -lambd, x - bias above lambd, 0 between."""
    def body(v):
        return E.select(v < -lambd, v + bias, E.select(v > lambd, v - bias, E.const(0.0, v.dtype)))

    return _map("shrink", [x], body, name, floats=True, attrs={"bias": bias, "lambd": lambd})


def _log1p(v: E.Expr) -> E.Expr:
    """log(1 + v), accurate for small v: with u = 1 + v rounded, v where u is 1, else log(u) * v / (u - 1)
    (Goldberg's correction for the rounding of u)."""
    u = v + 1.0
    return E.select(u.eq(1.0), v, E.log(u) * v / (u - 1.0))


def clip(x: te.Tensor, min_value: float | None = None, max_value: float | None = None,
         name: str = "clip") -> te.Tensor:
    """`x` limited to [min_value, max_value]; a bound given as None is not applied."""
    if min_value is not None and max_value is not None and min_value > max_value:
        raise ShapeError(f"clip: min_value {min_value} is greater than max_value {max_value}")
    lo, hi = (None if v is None else _scalar("clip", v, x.dtype) for v in (min_value, max_value))

    def limit(v):
        v = v if lo is None else E.maximum(v, lo)
        return v if hi is None else E.minimum(v, hi)

    return _map("clip", [x], limit, name, attrs={"min_value": min_value, "max_value": max_value})


def cast(x: te.Tensor, dtype: str, name: str = "cast") -> te.Tensor:
    """`x` converted to `dtype` (float to int truncates, as in C)."""
    if dtype not in E.DTYPES:
        raise ShapeError(f"cast: unknown dtype {dtype!r}; expected one of {sorted(E.DTYPES)}")
    return _map("cast", [x], lambda v: E.cast(dtype, v), name, attrs={"dtype": dtype})


def _map(op: str, operands: list, fn: Callable, name: str, floats: bool = False, attrs: dict | None = None,
         skip: int = 0) -> te.Tensor:
    """The compute applying `fn` to the broadcast operands.

    The operands after the first `skip` (where's condition) share one dtype; numbers among them become constants
    of it.
    """
    tensors = [v for v in operands if isinstance(v, te.Tensor)]
    typed = [v for v in operands[skip:] if isinstance(v, te.Tensor)]
    if not typed:
        raise ShapeError(f"{op}: needs at least one tensor operand, got {operands!r}")
    dtype = check_same_dtype(typed, op)
    if floats:
        check_float(typed[0], op)
    shape = broadcast_shape(*(t.shape for t in tensors))
    exprs = operands[:skip] + [v if isinstance(v, te.Tensor) else _scalar(op, v, dtype) for v in operands[skip:]]

    def body(*i):
        return fn(*(v[broadcast_index(v.shape, i)] if isinstance(v, te.Tensor) else v for v in exprs))

    tag = "elemwise" if all(t.shape == shape for t in tensors) else "broadcast"
    return te.compute(shape, body, name=name, tag=tag, attrs=attrs)


def _scalar(op: str, value, dtype: str) -> E.Const:
    """A number as a constant of the tensors' dtype; a fraction does not silently become an integer."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ShapeError(f"{op}: operands must be tensors or numbers, got {value!r}")
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if isinstance(value, float) and not E.is_float(dtype) and not value.is_integer():
        raise ShapeError(f"{op}: the scalar {value} does not fit the {dtype} tensor it meets; cast the tensor")
    return E.const(value, dtype)
