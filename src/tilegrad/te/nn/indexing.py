"""Indexing by data: gathering by index tuples, scattering, one-hot encoding and the ranks of top-k.

Every compute reads its output element by element ("pull"), so a scatter becomes a reduction over the update
positions: each output element looks for the updates aimed at it (the last one wins when there is no reduction,
as when ONNX Runtime applies them in order). Indices count from the end when negative, like NumPy's; an index still
out of range is clamped into the tensor, so no read leaves it (gathers), or hits nothing (scatters, one-hot).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import normalize_axis

SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _position(indices: te.Tensor, index: Sequence, extent: int) -> E.Expr:
    """indices[index] as a position along an axis of `extent`: a negative one counted from the end."""
    pos = E.cast(E.INDEX, indices[tuple(index)])
    return E.select(pos < 0, pos + extent, pos)


def _clamped(pos: E.Expr, extent: int) -> E.Expr:
    return E.minimum(E.maximum(pos, 0), extent - 1)


def _check_indices(op: str, indices: te.Tensor) -> None:
    if not E.is_int(indices.dtype):
        raise ShapeError(f"{op}: indices {indices.name} must have an integer dtype, got {indices.dtype}")


def gather_nd(x: te.Tensor, indices: te.Tensor, batch_dims: int = 0, name: str = "gather_nd") -> te.Tensor:
    """x read at index tuples (ONNX GatherND): the last axis of `indices` holds m coordinates into the axes of x
    after its first `batch_dims`, which x and the indices share. The output is indices.shape[:-1] + the axes of x
    after those m."""
    _check_indices("gather_nd", indices)
    b, m = batch_dims, indices.shape[-1]
    if not 0 <= b < indices.ndim or b + m > x.ndim or indices.shape[:b] != x.shape[:b]:
        raise ShapeError(f"gather_nd: indices {indices.shape} do not index {x.name} {x.shape} with batch_dims {b}")
    lead = indices.ndim - 1

    def body(*o):
        j, rest = o[:lead], o[lead:]
        coords = [_clamped(_position(indices, (*j, d), x.shape[b + d]), x.shape[b + d]) for d in range(m)]
        return x[(*j[:b], *coords, *rest)]

    return te.compute(indices.shape[:-1] + x.shape[b + m:], body, name=name, tag="injective",
                      attrs={"batch_dims": b})


def _combine(x: te.Tensor, reduction: str, found: te.Tensor, read_update, name: str, attrs: dict) -> te.Tensor:
    """The scatter's output: x where no update is aimed, else the updates combined with x by `reduction`. For
    "none", `found` holds the last matching update position (-1: none) and `read_update(p, pos)` reads it."""
    def body(*p):
        if reduction == "none":
            last = found[p]
            return E.select(last >= 0, read_update(p, E.maximum(last, 0)), x[p])
        v = found[p]
        return {"add": lambda: x[p] + v, "mul": lambda: x[p] * v, "max": lambda: E.maximum(x[p], v),
                "min": lambda: E.minimum(x[p], v)}[reduction]()

    return te.compute(x.shape, body, name=name, tag="injective", attrs=attrs)


def _reduce_updates(reduction: str, match: E.Expr, value: E.Expr, position: E.Expr, axes: list, dtype: str):
    """The reduction over the update positions `axes` that `_combine` reads: the last matching position for "none",
    else the updates that match combined (the combiner's identity where none does)."""
    if reduction == "none":
        return te.max(E.select(match, position, E.const(-1, E.INDEX)), axis=axes)
    combiner = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}[reduction]
    reducer = {"sum": te.sum, "prod": te.prod, "max": te.max, "min": te.min}[combiner]
    return reducer(E.select(match, value, te.reduce_identity(combiner, dtype)), axis=axes)


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in SCATTER_REDUCTIONS:
        raise ShapeError(f"{op}: reduction {reduction!r} is not one of {SCATTER_REDUCTIONS}")


def scatter_elements(x: te.Tensor, indices: te.Tensor, updates: te.Tensor, axis: int = 0, reduction: str = "none",
                     name: str = "scatter_elements") -> te.Tensor:
    """x with updates[i] written at i with its `axis` coordinate replaced by indices[i] (ONNX ScatterElements),
    or combined with what is there by `reduction`."""
    _check_indices("scatter_elements", indices)
    _check_reduction("scatter_elements", reduction)
    a = normalize_axis(axis, x.ndim, "scatter_elements")
    if indices.shape != updates.shape or indices.ndim != x.ndim or updates.dtype != x.dtype or any(
            m > n for d, (m, n) in enumerate(zip(indices.shape, x.shape)) if d != a):
        raise ShapeError(f"scatter_elements: indices {indices.shape} and updates {updates.shape} ({updates.dtype}) "
                         f"do not fit {x.name} {x.shape} ({x.dtype}) along axis {a}")
    r = te.reduce_axis(indices.shape[a], "r")

    def at(p, pos):
        """The update position for output p: `pos` on the axis, p clamped into the indices elsewhere."""
        return tuple(pos if d == a else E.minimum(v, indices.shape[d] - 1) for d, v in enumerate(p))

    def aimed(*p):
        covered = E.all_of(v < indices.shape[d] for d, v in enumerate(p) if d != a and indices.shape[d] < x.shape[d])
        match = E.logical_and(covered, _position(indices, at(p, r), x.shape[a]).eq(p[a]))
        return _reduce_updates(reduction, match, updates[at(p, r)], r, [r], x.dtype)

    hits = te.compute(x.shape, aimed, name=f"{name}_{reduction}", tag="reduce")
    return _combine(x, reduction, hits, lambda p, pos: updates[at(p, pos)], name,
                    {"axis": a, "reduction": reduction})


def scatter_nd(x: te.Tensor, indices: te.Tensor, updates: te.Tensor, reduction: str = "none",
               name: str = "scatter_nd") -> te.Tensor:
    """x with the slice updates[j] written at the index tuple indices[j] (ONNX ScatterND), or combined with what is
    there by `reduction`; a later j wins over an earlier one aimed at the same place."""
    _check_indices("scatter_nd", indices)
    _check_reduction("scatter_nd", reduction)
    m, lead = indices.shape[-1], indices.shape[:-1]
    if not lead or m > x.ndim or updates.shape != lead + x.shape[m:] or updates.dtype != x.dtype:
        raise ShapeError(f"scatter_nd: updates {updates.shape} ({updates.dtype}) must be {lead + x.shape[m:]} "
                         f"({x.dtype}) for indices {indices.shape} into {x.name} {x.shape}")
    js = [te.reduce_axis(n, f"r{d}") for d, n in enumerate(lead)]
    strides = [math.prod(lead[d + 1:]) for d in range(len(lead))]
    flat = sum((j * s for j, s in zip(js, strides)), E.const(0))

    def aimed(*p):
        match = E.all_of(_position(indices, (*js, d), x.shape[d]).eq(p[d]) for d in range(m))
        return _reduce_updates(reduction, match, updates[(*js, *p[m:])], flat, js, x.dtype)

    def read_update(p, pos):
        return updates[(*(pos // s % n for s, n in zip(strides, lead)), *p[m:])]

    hits = te.compute(x.shape, aimed, name=f"{name}_{reduction}", tag="reduce")
    return _combine(x, reduction, hits, read_update, name, {"reduction": reduction})


def one_hot(indices: te.Tensor, values: te.Tensor, depth: int, axis: int = -1, name: str = "one_hot") -> te.Tensor:
    """values[1] where the output's coordinate on the new axis `axis` equals the index there, values[0] elsewhere
    (ONNX OneHot); indices may be floats (truncated), and one out of [-depth, depth) selects nothing."""
    if values.shape != (2,):
        raise ShapeError(f"one_hot: values must be (off, on), of shape (2,), got {values.shape}")
    a = normalize_axis(axis, indices.ndim + 1, "one_hot")

    def body(*o):
        pos = E.cast(E.INDEX, indices[o[:a] + o[a + 1:]])
        hit = E.logical_and(E.select(pos < 0, pos + depth, pos).eq(o[a]), E.logical_and(pos >= -depth, pos < depth))
        return E.select(hit, values[1], values[0])

    shape = indices.shape[:a] + (int(depth),) + indices.shape[a:]
    return te.compute(shape, body, name=name, tag="injective", attrs={"axis": a, "depth": int(depth)})


def topk_indices(x: te.Tensor, k: int, axis: int = -1, largest: bool = True, name: str = "topk") -> te.Tensor:
    """The positions of the k largest (smallest) elements along `axis`, in order, ties going to the lower position
    (ONNX TopK's indices). NaN counts as larger than every number, as in ONNX Runtime: first when largest, last
    when smallest. Each element's rank counts the elements that come before it (`{name}_rank`); the output finds
    the element of each rank. Both take n steps per element: for the small axes of models' TopK."""
    a = normalize_axis(axis, x.ndim, "topk")
    n = x.shape[a]
    if not 1 <= k <= n:
        raise ShapeError(f"topk: k={k} must be between 1 and the extent {n} of axis {a}")
    m = te.reduce_axis(n, "m")

    def rank(*i):
        mine, other = x[i], x[(*i[:a], m, *i[a + 1:])]
        ahead = other > mine if largest else other < mine
        tie = other.eq(mine)
        if E.is_float(x.dtype):
            other_nan, mine_nan = other.ne(other), mine.ne(mine)
            nan_first = E.logical_and(other_nan, E.logical_not(mine_nan)) if largest else \
                E.logical_and(mine_nan, E.logical_not(other_nan))
            ahead = E.logical_or(ahead, nan_first)
            tie = E.logical_or(tie, E.logical_and(other_nan, mine_nan))
        before = E.logical_or(ahead, E.logical_and(tie, m < i[a]))
        return te.sum(E.select(before, E.const(1, E.INDEX), E.const(0, E.INDEX)), axis=m)

    ranks = te.compute(x.shape, rank, name=f"{name}_rank", tag="reduce")
    r = te.reduce_axis(n, "r")

    def position(*o):
        return te.sum(E.select(ranks[(*o[:a], r, *o[a + 1:])].eq(o[a]), r, E.const(0, E.INDEX)), axis=r)

    return te.compute(x.shape[:a] + (int(k),) + x.shape[a + 1:], position, name=name, tag="reduce",
                      attrs={"axis": a, "k": int(k), "largest": bool(largest)})
