"""Element-wise ops: unary maps and binary (and ternary) ops with NumPy-style broadcasting."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ..registry import BROADCAST, ELEMWISE, Sample, TensorType, declare, same_as_input

_UNARY_SAMPLES = (Sample((((4, 33), "float32"),)), Sample((((1, 8, 5, 7), "float32"),)))
_BINARY_SAMPLES = (Sample((((4, 33), "float32"), ((33,), "float32"))),
                   Sample((((2, 1, 5), "float32"), ((3, 1), "float32"))))


def broadcast(*types: TensorType, **_) -> list[TensorType]:
    """The type rule of broadcasting ops: NumPy's shape rule, one dtype."""
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise ShapeError(f"operands have different dtypes {sorted(dtypes)}; insert a Cast")
    return [TensorType(nn.broadcast_shape(*(t.shape for t in types)), types[0].dtype)]


def _comparison(*types: TensorType, **_) -> list[TensorType]:
    return [TensorType(broadcast(*types)[0].shape, "bool")]


def _where(cond: TensorType, a: TensorType, b: TensorType, **_) -> list[TensorType]:
    if cond.dtype != "bool":
        raise ShapeError(f"the condition must be bool, got {cond.dtype}")
    out = broadcast(a, b)[0]
    return [TensorType(nn.broadcast_shape(cond.shape, out.shape), out.dtype)]


def _unary(name: str, compute, reference, finite: bool = False, expand=None) -> None:
    declare(name, kind=ELEMWISE, infer=same_as_input, reference=reference, compute=compute, samples=_UNARY_SAMPLES,
            finite=finite, expand=expand)


def _binary(name: str, compute, reference, infer=broadcast, samples=_BINARY_SAMPLES, finite: bool = False) -> None:
    declare(name, kind=BROADCAST, infer=infer, reference=reference, compute=compute, samples=samples, num_inputs=2,
            finite=finite)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _map(fn):
    """A unary op's compute from an expression builder."""
    return lambda x: te.compute(x.shape, lambda *i: fn(x[i]), name="map", tag="elemwise")


def _gelu_expand(x):
    """0.5 x (1 + erf(x / sqrt 2)), the exact GELU, in basic ops."""
    return 0.5 * x * (1 + (x * math.sqrt(0.5)).erf())


_unary("relu", lambda x: nn.relu(x), lambda x: np.maximum(x, 0), finite=True)
_unary("sigmoid", lambda x: nn.sigmoid(x), lambda x: 1 / (1 + np.exp(-x)), finite=True)
_unary("tanh", lambda x: nn.tanh(x), np.tanh, finite=True)
_unary("exp", lambda x: nn.exp(x), np.exp)
_unary("log", lambda x: nn.log(x), np.log)
_unary("sqrt", lambda x: nn.sqrt(x), np.sqrt)
_unary("erf", lambda x: nn.erf(x), lambda x: _erf(x).astype(x.dtype))
_unary("gelu", lambda x: nn.gelu(x), lambda x: (0.5 * x * (1 + _erf(x / math.sqrt(2)))).astype(x.dtype), finite=True,
       expand=_gelu_expand)
_unary("abs", _map(E.abs_), np.abs, finite=True)
_unary("neg", _map(lambda v: -v), np.negative, finite=True)
_unary("reciprocal", _map(lambda v: 1.0 / v), np.reciprocal)
# Trigonometric and hyperbolic functions and their inverses: one C math call each.
for _name, _call, _ref in (("sin", E.sin, np.sin), ("cos", E.cos, np.cos), ("tan", E.tan, np.tan),
                           ("asin", E.asin, np.arcsin), ("acos", E.acos, np.arccos), ("atan", E.atan, np.arctan),
                           ("sinh", E.sinh, np.sinh), ("cosh", E.cosh, np.cosh), ("asinh", E.asinh, np.arcsinh),
                           ("acosh", E.acosh, np.arccosh), ("atanh", E.atanh, np.arctanh)):
    _unary(_name, _map(_call), _ref, finite=_name in ("sin", "cos", "atan", "asinh"))
_unary("floor", _map(E.floor), np.floor, finite=True)
_unary("ceil", _map(E.ceil), np.ceil, finite=True)
_unary("round", _map(E.round_), np.round, finite=True)  # half to even, as C's nearbyint and ONNX


def _float_test(x: TensorType, **_) -> list[TensorType]:
    """The type rule of tests on floats (is_nan, is_inf): a bool per element."""
    if not E.is_float(x.dtype):
        raise ShapeError(f"the test needs a float input, got {x.dtype}")
    return [TensorType(x.shape, "bool")]


def _is_inf_te(x, *, detect_negative, detect_positive):
    inf = E.const(math.inf, x.dtype)
    no = E.const(False, "bool")
    return _map(lambda v: E.logical_or(v.eq(inf) if detect_positive else no, v.eq(-inf) if detect_negative else no))(x)


def _is_inf_ref(x, *, detect_negative, detect_positive):
    return np.isinf(x) & (((x > 0) & bool(detect_positive)) | ((x < 0) & bool(detect_negative)))


def _sign(v):
    """1, -1 or 0, and NaN for NaN (as ONNX Runtime gives)."""
    one, zero = E.const(1, v.dtype), E.const(0, v.dtype)
    rest = E.select(v.eq(v), zero, v) if E.is_float(v.dtype) else zero
    return E.select(v > zero, one, E.select(v < zero, zero - one, rest))


declare("is_nan", kind=ELEMWISE, infer=_float_test, reference=np.isnan, compute=_map(lambda v: v.ne(v)),
        samples=_UNARY_SAMPLES[:1])
declare("is_inf", kind=ELEMWISE, attrs={"detect_negative": 1, "detect_positive": 1}, infer=_float_test,
        reference=_is_inf_ref, compute=_is_inf_te,
        samples=(Sample((((4, 33), "float32"),)), Sample((((4, 33), "float32"),), {"detect_negative": 0})))
declare("sign", kind=ELEMWISE, infer=same_as_input, reference=np.sign, compute=_map(_sign), finite=True,
        samples=_UNARY_SAMPLES[:1] + (Sample((((3, 7), "int32"),)),))
declare("leaky_relu", kind=ELEMWISE, attrs={"alpha": 0.01}, infer=same_as_input,
        reference=lambda x, alpha: np.where(x > 0, x, alpha * x),
        compute=lambda x, alpha: nn.leaky_relu(x, alpha), samples=_UNARY_SAMPLES, finite=True)
declare("clip", kind=ELEMWISE, attrs={"min": -math.inf, "max": math.inf}, infer=same_as_input,
        reference=lambda x, min, max: np.clip(x, min, max),
        compute=lambda x, min, max: nn.clip(x, None if math.isinf(min) else min, None if math.isinf(max) else max),
        samples=(Sample((((4, 33), "float32"),), {"min": 0.0, "max": 6.0}),), finite=True)
declare("hard_sigmoid", kind=ELEMWISE, attrs={"alpha": 0.2, "beta": 0.5}, infer=same_as_input,
        reference=lambda x, alpha, beta: np.clip(alpha * x + beta, 0, 1),
        compute=lambda x, alpha, beta: _map(lambda v: E.minimum(E.maximum(v * alpha + beta, 0.0), 1.0))(x),
        samples=_UNARY_SAMPLES, finite=True)
declare("hard_swish", kind=ELEMWISE, infer=same_as_input,
        reference=lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
        compute=_map(lambda v: v * E.minimum(E.maximum(v * (1.0 / 6.0) + 0.5, 0.0), 1.0)),
        samples=_UNARY_SAMPLES, finite=True)
declare("cast", kind=ELEMWISE, attrs={"to": "float32"},
        infer=lambda x, to: [TensorType(x.shape, to)],
        reference=lambda x, to: x.astype(to),
        compute=lambda x, to: nn.cast(x, to),
        samples=(Sample((((4, 33), "float32"),), {"to": "int32"}), Sample((((4, 33), "bool"),), {"to": "float32"})))


def _div_ref(a, b):
    """True division of floats; integers divide as ONNX Runtime (C) does, truncating toward zero, and a zero
    divisor gives 0 rather than a trap."""
    if E.is_float(str(a.dtype)):  # bfloat16 too, whose NumPy kind is "V"
        return np.divide(a, b)
    with np.errstate(all="ignore"):
        q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where(b == 0, 0, np.where((a < 0) != (b < 0), -q, q)).astype(a.dtype)


def _div_te(a, b):
    if E.is_float(a.dtype):
        return nn.div(a, b)

    def body(*i):
        u, v = a[nn.broadcast_index(a.shape, i)], b[nn.broadcast_index(b.shape, i)]
        safe = E.select(v.eq(0), E.const(1, v.dtype), v)
        q = E.floordiv(u, safe)
        inexact = E.logical_and((q * safe).ne(u), (u < 0).ne(v < 0))
        return E.select(v.eq(0), E.const(0, a.dtype), E.select(inexact, q + 1, q))

    return te.compute(nn.broadcast_shape(a.shape, b.shape), body, name="div", tag="broadcast")


_binary("add", nn.add, np.add, finite=True)
_binary("sub", nn.sub, np.subtract, finite=True)
_binary("mul", nn.mul, np.multiply, finite=True)
_binary("div", _div_te, _div_ref, samples=_BINARY_SAMPLES + (Sample((((4, 9), "int32"), ((9,), "int32"))),))
_binary("pow", nn.power, np.power, samples=(Sample((((4, 33), "float32"), ((1,), "float32"))),))


def _mod_type(a: TensorType, b: TensorType, *, fmod) -> list[TensorType]:
    out = broadcast(a, b)[0]
    if out.dtype == "bool":
        raise ShapeError("mod needs numbers, got bool; insert a Cast")
    return [out]


def _mod_ref(a, b, *, fmod):
    """np.fmod (the dividend's sign) or np.mod (the divisor's); an integer divisor of 0 gives 0."""
    if E.is_float(str(a.dtype)):
        return (np.fmod if fmod else np.mod)(a, b)
    safe = np.where(b == 0, 1, b).astype(b.dtype)
    return np.where(b == 0, 0, (np.fmod if fmod else np.mod)(a, safe)).astype(a.dtype)


declare("mod", kind=BROADCAST, attrs={"fmod": 0}, infer=_mod_type, reference=_mod_ref,
        compute=lambda a, b, fmod: nn.mod(a, b, bool(fmod)), num_inputs=2,
        samples=(Sample((((4, 33), "float32"), ((33,), "float32")), {"fmod": 1}),
                 Sample((((4, 33), "float32"), ((33,), "float32"))), Sample((((4, 9), "int32"), ((9,), "int32"))),
                 Sample((((2, 1, 5), "int64"), ((3, 1), "int64")), {"fmod": 1})))
_binary("maximum", nn.maximum, np.maximum, finite=True)
_binary("minimum", nn.minimum, np.minimum, finite=True)
_binary("prelu", nn.prelu, lambda x, slope: np.where(x < 0, x * slope, x), finite=True)
_binary("equal", nn.equal, np.equal, infer=_comparison)
_binary("less", nn.less, np.less, infer=_comparison)
_binary("greater", nn.greater, np.greater, infer=_comparison)
_binary("less_equal", nn.less_equal, np.less_equal, infer=_comparison)
_binary("greater_equal", nn.greater_equal, np.greater_equal, infer=_comparison)
declare("not", kind=ELEMWISE, infer=same_as_input, reference=np.logical_not, compute=_map(E.logical_not),
        samples=(Sample((((4, 33), "bool"),)),))
declare("where", kind=BROADCAST, infer=_where, reference=np.where, compute=nn.where, num_inputs=3,
        samples=(Sample((((4, 1), "bool"), ((4, 5), "float32"), ((5,), "float32"))),))


# --- logical ops on bool tensors, and triangular masking ---

def _logical(fn):
    def compute(a, b):
        shape = nn.broadcast_shape(a.shape, b.shape)
        return te.compute(shape, lambda *i: fn(a[nn.broadcast_index(a.shape, i)], b[nn.broadcast_index(b.shape, i)]),
                          name="logical", tag="broadcast")
    return compute


def _logical_type(a: TensorType, b: TensorType, **_) -> list[TensorType]:
    if a.dtype != "bool" or b.dtype != "bool":
        raise ShapeError(f"logical ops need bool operands, got {a.dtype} and {b.dtype}; insert a Cast")
    return broadcast(a, b)


_LOGICAL_SAMPLES = (Sample((((4, 33), "bool"), ((33,), "bool"))), Sample((((2, 1, 5), "bool"), ((3, 1), "bool"))))
_binary("logical_and", _logical(E.logical_and), np.logical_and, infer=_logical_type, samples=_LOGICAL_SAMPLES)
_binary("logical_or", _logical(E.logical_or), np.logical_or, infer=_logical_type, samples=_LOGICAL_SAMPLES)
_binary("logical_xor", _logical(lambda u, v: E.logical_and(E.logical_or(u, v), E.logical_not(E.logical_and(u, v)))),
        np.logical_xor, infer=_logical_type, samples=_LOGICAL_SAMPLES)


def _trilu_type(x: TensorType, *, upper, k) -> list[TensorType]:
    if len(x.shape) < 2:
        raise ShapeError(f"trilu needs a matrix or a batch of matrices, got shape {x.shape}")
    return [x]


def _trilu_ref(x, *, upper, k):
    return np.triu(x, k) if upper else np.tril(x, k)


def _trilu_te(x, *, upper, k):
    """ONNX Trilu: the upper (j >= i + k) or lower (j <= i + k) triangle of the last two axes; zeros elsewhere."""
    zero = E.const(False, "bool") if x.dtype == "bool" else E.const(0, x.dtype)

    def body(*i):
        row, col = i[-2], i[-1]
        keep = col >= row + k if upper else col <= row + k
        return E.select(keep, x[i], zero)

    return te.compute(x.shape, body, name="trilu", tag="elemwise", attrs={"upper": bool(upper), "k": int(k)})


declare("trilu", kind=ELEMWISE, attrs={"upper": 1, "k": 0}, infer=_trilu_type, reference=_trilu_ref,
        compute=_trilu_te, samples=(Sample((((5, 7), "float32"),)),
                                    Sample((((2, 6, 4), "float32"),), {"upper": 0, "k": -1}),
                                    Sample((((4, 4), "bool"),), {"k": 1})))
