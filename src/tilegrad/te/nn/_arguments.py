"""Normalising and validating op arguments, so that every op accepts the same spellings and words errors alike.

Each function takes the op's name and puts it first in its message: a user who wrote a whole model needs to know
which call was wrong.
"""

from __future__ import annotations

import numbers
from typing import Sequence

from ...errors import ShapeError
from .. import expr as E
from ..tensor import Tensor


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    """`axis` in [0, ndim), counting negative axes from the end as NumPy does."""
    if not _is_int(axis) or not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis!r} is out of range for a tensor of rank {ndim}")
    return int(axis) % ndim


def normalize_axes(axis: int | Sequence[int] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Sorted distinct axes; None means all of them."""
    if axis is None:
        return tuple(range(ndim))
    axes = [axis] if _is_int(axis) else list(axis)
    if not axes:
        raise ShapeError(f"{op}: an empty axis list reduces nothing; pass axis=None to reduce every axis")
    out = [normalize_axis(a, ndim, op) for a in axes]
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: axis {tuple(axes)} names an axis twice")
    return tuple(sorted(out))


def int_tuple(value: int | Sequence[int], n: int, what: str, op: str, minimum: int | None = 1,
              scalar: bool = True) -> tuple[int, ...]:
    """`value` as `n` integers, each at least `minimum` (None: any); one integer stands for all `n` if `scalar`
    allows it (ONNX attributes are always lists)."""
    values = [value] * n if _is_int(value) else list(value)
    if (_is_int(value) and not scalar) or len(values) != n or not all(_is_int(v) for v in values):
        spelling = f"an integer or {n} integers" if scalar else f"{n} integers"
        raise ShapeError(f"{op}: {what} must be {spelling}, got {value!r}")
    if minimum is not None and any(v < minimum for v in values):
        raise ShapeError(f"{op}: every {what} must be at least {minimum}, got {value!r}")
    return tuple(int(v) for v in values)


def side_pads(padding, n: int, op: str, crop: bool = False) -> tuple[tuple[int, int], ...]:
    """Padding as a (before, after) pair per spatial dimension; with `crop`, a negative side crops the input (the
    compiler's own windows over part of a tensor, as ONNX's Pad takes negative pads).

    Accepted: one integer for every side; `n` integers, one per dimension for both its sides; `n` pairs; or `2n`
    integers in ONNX order (all the befores, then all the afters).
    """
    if _is_int(padding):
        pairs = [(padding, padding)] * n
    else:
        items = list(padding)
        if len(items) == n and all(_is_int(p) for p in items):
            pairs = [(p, p) for p in items]
        elif len(items) == n and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in items):
            pairs = [tuple(p) for p in items]
        elif len(items) == 2 * n and all(_is_int(p) for p in items):
            pairs = list(zip(items[:n], items[n:]))
        else:
            raise ShapeError(f"{op}: padding must be an integer, {n} integers, {n} (before, after) pairs or {2 * n} "
                             f"integers (befores then afters), got {padding!r}")
    if any(not _is_int(p) or (p < 0 and not crop) for pair in pairs for p in pair):
        raise ShapeError(f"{op}: padding must be non-negative integers, got {padding!r}")
    return tuple((int(lo), int(hi)) for lo, hi in pairs)


def check_rank(t: Tensor, rank: int, op: str, layout: str = "") -> None:
    if t.ndim != rank:
        layout = f" ({layout})" if layout else ""
        raise ShapeError(f"{op}: {t.name} must have rank {rank}{layout}, got shape {t.shape}")


def check_float(t: Tensor, op: str) -> None:
    if not E.is_float(t.dtype):
        raise ShapeError(f"{op}: {t.name} must have a float dtype, got {t.dtype}; cast it first")


def check_same_dtype(tensors: Sequence[Tensor], op: str) -> str:
    """The one dtype all `tensors` share."""
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        listing = ", ".join(f"{t.name}: {t.dtype}" for t in tensors)
        raise ShapeError(f"{op}: operands must share a dtype, got {listing}; cast one of them")
    return dtypes.pop()
