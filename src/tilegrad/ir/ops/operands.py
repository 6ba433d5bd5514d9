"""Checks on operand types shared by the type rules of the nn families (window ops, matrix products, norms), and
the float32 widening of their half-precision sums."""

from __future__ import annotations

import functools

from ...errors import ShapeError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ..registry import TensorType


def te_type(t: te.Tensor | None) -> TensorType | None:
    """The type of a te tensor, or None for an absent optional input."""
    return None if t is None else TensorType(t.shape, t.dtype)


def same_dtype(*types: TensorType | None) -> str:
    """The one dtype of the given operands (None marks an absent optional input)."""
    dtypes = {t.dtype for t in types if t is not None}
    if len(dtypes) != 1:
        raise ShapeError(f"operands have different dtypes {sorted(dtypes)}; insert a Cast")
    return dtypes.pop()


def float_dtype(*types: TensorType | None) -> str:
    """The one dtype of the operands, which must be a float."""
    dtype = same_dtype(*types)
    if not E.is_float(dtype):
        raise ShapeError(f"operands must have a float dtype, got {dtype}; insert a Cast")
    return dtype


def broadcasts_to(shape, target) -> bool:
    """Whether `shape` broadcasts to `target` without growing it."""
    try:
        return len(shape) <= len(target) and nn.broadcast_shape(shape, target) == tuple(target)
    except ShapeError:
        return False


def widened(compute):
    """`compute` run in float32 on float16 or bfloat16 operands, its result rounded back once: the sums of a
    half-precision product or reduction then accumulate in float32, as NumPy and ONNX Runtime do, instead of
    rounding each step."""
    @functools.wraps(compute)
    def run(*xs, **attrs):
        narrow = {x.dtype for x in xs if x is not None and x.dtype in _HALF}
        if not narrow:
            return compute(*xs, **attrs)
        casts: dict[int, te.Tensor] = {}
        for x in xs:
            if x is not None and x.dtype in _HALF and id(x) not in casts:
                casts[id(x)] = nn.cast(x, "float32", name=f"{x.name}_wide")
        return nn.cast(compute(*(casts.get(id(x), x) for x in xs), **attrs), narrow.pop(), name="narrow")
    return run


_HALF = ("float16", "bfloat16")
