"""Reductions over a set of axes: sum, mean, max and min, with or without keeping the reduced axes.

The reduced axes become reduce axes named after the input axis they cover (`r1` reduces axis 1), and the output
keeps the input's order of the remaining axes. A mean is a sum followed by an element-wise division by the count,
because a reduction must be the root of its compute.
"""

from __future__ import annotations

from typing import Sequence

from ...errors import ShapeError
from .. import dims
from .. import expr as E
from .. import tensor as te
from ._arguments import normalize_axes

Axes = int | Sequence[int] | None


def reduce_sum(x: te.Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_sum") -> te.Tensor:
    """The sum of x over `axis` (an int, a sequence, or None for all axes)."""
    return _reduce("reduce_sum", "sum", x, axis, keepdims, name)


def reduce_max(x: te.Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_max") -> te.Tensor:
    """The maximum of x over `axis`."""
    return _reduce("reduce_max", "max", x, axis, keepdims, name)


def reduce_prod(x: te.Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_prod") -> te.Tensor:
    """The product of x over `axis`."""
    return _reduce("reduce_prod", "prod", x, axis, keepdims, name)


def reduce_min(x: te.Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_min") -> te.Tensor:
    """The minimum of x over `axis`."""
    return _reduce("reduce_min", "min", x, axis, keepdims, name)


def reduce_mean(x: te.Tensor, axis: Axes = None, keepdims: bool = False, name: str = "reduce_mean") -> te.Tensor:
    """The mean of float x over `axis`: a sum stage `{name}_sum`, then a division."""
    if not E.is_float(x.dtype):
        raise ShapeError(f"reduce_mean: {x.name} must have a float dtype to be averaged, got {x.dtype}")
    axes = normalize_axes(axis, x.ndim, "reduce_mean")
    total = _reduce("reduce_mean", "sum", x, axes, keepdims, f"{name}_sum")
    count = dims.count(dims.product(x.shape[d] for d in axes), x.dtype)
    return te.compute(total.shape, lambda *i: total[i] / count, name=name, tag="elemwise",
                      attrs={"axis": axes, "keepdims": keepdims})


def _reduce(op: str, combiner: str, x: te.Tensor, axis: Axes, keepdims: bool, name: str) -> te.Tensor:
    axes = normalize_axes(axis, x.ndim, op)
    reduce_axes = {d: te.reduce_axis(x.shape[d], f"r{d}") for d in axes}
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes)
    reducer = {"sum": te.sum, "max": te.max, "min": te.min, "prod": te.prod}[combiner]

    def body(*i):
        kept = iter(i)
        index = []
        for d in range(x.ndim):
            if d in axes:
                index.append(reduce_axes[d])
                if keepdims:
                    next(kept)
            else:
                index.append(next(kept))
        return reducer(x[tuple(index)], axis=list(reduce_axes.values()))

    return te.compute(shape, body, name=name, tag="reduce", attrs={"axis": axes, "keepdims": keepdims})
