"""Data movement: transpose, reshape, flatten, pad, concat, slice, gather (whole slices or element by
element) and broadcasting to a shape.

Each output element is one read of an input at an index computed from the output index, so these computes are
tagged "injective" (the broadcasts "broadcast") and inline into their consumers. Reads that may fall outside an input
(padding, the other pieces of a concat) sit in the untaken branch of a select; gathered indices are clamped into
range, so even a bad index never reads outside the tensor.
"""

from __future__ import annotations

import math
from typing import Sequence

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ..dims import clamp, dim, divides, equal, is_negative, is_static, product, provably_le, quotient
from ._arguments import check_same_dtype, normalize_axis, side_pads
from ._window import guarded_load
from .elementwise import broadcast_index, broadcast_shape


def transpose(x: te.Tensor, perm: Sequence[int] | None = None, name: str = "transpose") -> te.Tensor:
    """Axis `d` of the output is axis `perm[d]` of x; no `perm` reverses the axes."""
    perm = tuple(reversed(range(x.ndim))) if perm is None else tuple(perm)
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: perm {perm} is not a permutation of the {x.ndim} axes of {x.name}")

    def body(*i):
        index = [None] * x.ndim
        for d, p in enumerate(perm):
            index[p] = i[d]
        return x[tuple(index)]

    return te.compute(tuple(x.shape[p] for p in perm), body, name=name, tag="injective", attrs={"perm": perm})


def reshape(x: te.Tensor, shape: Sequence[int], name: str = "reshape") -> te.Tensor:
    """The elements of x in row-major order, laid out in `shape`; one extent may be -1, inferred from the rest."""
    shape = _infer_shape(x, tuple(shape))
    out_strides = _strides(shape)
    in_strides = _strides(x.shape)
    groups = None if is_static((*x.shape, *shape)) else _axis_groups(x.shape, shape)
    if groups is not None:
        return te.compute(shape, lambda *i: x[_grouped_index(x.shape, shape, groups, i)], name=name,
                          tag="injective", attrs={"shape": shape})

    def body(*i):
        flat = sum((v * s for v, s in zip(i, out_strides)), E.const(0))
        index = [flat // s if d == 0 else flat // s % n for d, (s, n) in enumerate(zip(in_strides, x.shape))]
        return x[tuple(index)]

    return te.compute(shape, body, name=name, tag="injective", attrs={"shape": shape})


def _axis_groups(ins: Sequence, outs: Sequence) -> list[tuple[list[int], list[int]]] | None:
    """The input and output axes of a reshape in runs of equal element counts, axes of extent 1 left out
    (`[1, seq, 128] -> [seq, 4, 32]`: ([1], [0]) and ([2], [1, 2])), or None where the counts do not line up for
    every value of the dynamic dimensions. Each output index then comes from the input axes of its own run only,
    so a dynamic dimension in a run of its own is read as it is instead of through divisions by it, which no
    simplifier can cancel."""
    a = [k for k, n in enumerate(ins) if not equal(n, 1)]
    b = [k for k, n in enumerate(outs) if not equal(n, 1)]
    groups, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        gi, gj, pi, pj = [a[i]], [b[j]], ins[a[i]], outs[b[j]]
        i, j = i + 1, j + 1
        while not equal(pi, pj):
            if j < len(b) and divides(pj, pi):
                gj.append(b[j])
                pj, j = dim(pj * outs[b[j]]), j + 1
            elif i < len(a) and divides(pi, pj):
                gi.append(a[i])
                pi, i = dim(pi * ins[a[i]]), i + 1
            else:
                return None
        groups.append((gi, gj))
    return groups if i == len(a) and j == len(b) else None


def _grouped_index(ins: Sequence, outs: Sequence, groups, i) -> tuple:
    index = [E.const(0)] * len(ins)  # the axes of extent 1
    for gi, gj in groups:
        if len(gi) == 1 and len(gj) == 1:
            index[gi[0]] = i[gj[0]]
            continue
        out_strides, in_strides = _strides([outs[k] for k in gj]), _strides([ins[k] for k in gi])
        flat = sum((i[k] * s for k, s in zip(gj, out_strides)), E.const(0))
        for n, (k, s) in enumerate(zip(gi, in_strides)):
            index[k] = flat // s if n == 0 else flat // s % ins[k]
    return tuple(index)


def flatten(x: te.Tensor, axis: int = 1, name: str = "flatten") -> te.Tensor:
    """x as a matrix: the axes before `axis` become the rows, the rest the columns (ONNX Flatten)."""
    if not isinstance(axis, int) or not -x.ndim <= axis <= x.ndim:
        raise ShapeError(f"flatten: axis {axis!r} is out of range for {x.name} of rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    return reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])), name=name)


def pad(x: te.Tensor, pads, value: float = 0.0, name: str = "pad") -> te.Tensor:
    """x surrounded by `value`: `pads` gives (before, after) per axis, in any spelling conv padding accepts."""
    pads = side_pads(pads, x.ndim, "pad")
    if not E.is_float(x.dtype) and not float(value).is_integer():
        raise ShapeError(f"pad: the value {value} does not fit {x.name} of dtype {x.dtype}")
    fill = E.const(value, x.dtype)
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    return te.compute(shape, lambda *i: guarded_load(x, (), [v - lo for v, (lo, _) in zip(i, pads)], fill),
                      name=name, tag="injective", attrs={"pads": pads, "value": value})


def concat(tensors: Sequence[te.Tensor], axis: int = 0, name: str = "concat") -> te.Tensor:
    """The tensors joined along `axis`; they agree in every other extent and in dtype."""
    tensors = list(tensors)
    if not tensors:
        raise ShapeError("concat: needs at least one tensor")
    first = tensors[0]
    a = normalize_axis(axis, first.ndim, "concat")
    check_same_dtype(tensors, "concat")
    for t in tensors[1:]:
        if t.ndim != first.ndim or t.shape[:a] + t.shape[a + 1:] != first.shape[:a] + first.shape[a + 1:]:
            raise ShapeError(f"concat: {t.name} {t.shape} and {first.name} {first.shape} differ outside axis {a}")
    offsets = [0]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[a])

    def body(*i):
        def piece(k):
            return tensors[k][(*i[:a], i[a] - offsets[k], *i[a + 1:])]

        out = piece(len(tensors) - 1)
        for k in reversed(range(len(tensors) - 1)):
            out = E.select(i[a] < offsets[k + 1], piece(k), out)
        return out

    shape = first.shape[:a] + (offsets[-1],) + first.shape[a + 1:]
    return te.compute(shape, body, name=name, tag="injective", attrs={"axis": a})


def slice_(x: te.Tensor, starts: Sequence[int], stops: Sequence[int], axes: Sequence[int] | None = None,
           steps: Sequence[int] | None = None, name: str = "slice") -> te.Tensor:
    """x[start:stop:step] along each of `axes` (all axes in order by default), as ONNX Slice with positive steps.

    Negative starts and stops count from the end; both are then clamped into [0, extent], so a large stop means
    "to the end".
    """
    axes = tuple(range(len(starts))) if axes is None else tuple(axes)
    steps = (1,) * len(axes) if steps is None else tuple(steps)
    if not len(starts) == len(stops) == len(axes) == len(steps):
        raise ShapeError(f"slice: starts {tuple(starts)}, stops {tuple(stops)}, axes {axes} and steps {steps} "
                         f"must have one entry per sliced axis")
    axes = tuple(normalize_axis(a, x.ndim, "slice") for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"slice: axes {axes} name an axis twice")
    begin, step, shape = [0] * x.ndim, [1] * x.ndim, list(x.shape)
    for a, start, stop, s in zip(axes, starts, stops, steps):
        if s <= 0:
            raise ShapeError(f"slice: steps must be positive, got {s} for axis {a}")
        n = x.shape[a]
        lo, hi = (clamp(dim(v + n) if is_negative(v) else v, 0, n) for v in (start, stop))
        if provably_le(hi, lo):
            raise ShapeError(f"slice: axis {a} of {x.name} (extent {n}) sliced to nothing by [{start}:{stop}]")
        begin[a], step[a], shape[a] = lo, s, dim(E.ceildiv(E.as_expr(hi) - lo, s))
    return te.compute(shape, lambda *i: x[tuple(b + v * s for v, b, s in zip(i, begin, step))], name=name,
                      tag="injective", attrs={"begin": tuple(begin), "step": tuple(step)})


def gather(x: te.Tensor, indices: te.Tensor, axis: int = 0, name: str = "gather") -> te.Tensor:
    """x indexed along `axis` by the integer tensor `indices` (ONNX Gather).

    The output shape is x.shape[:axis] + indices.shape + x.shape[axis + 1:]. A negative index counts from the
    end; an index still out of range is clamped to the nearest end rather than read out of bounds.
    """
    if not E.is_int(indices.dtype):
        raise ShapeError(f"gather: indices {indices.name} must have an integer dtype, got {indices.dtype}")
    a = normalize_axis(axis, x.ndim, "gather")
    n, r = x.shape[a], indices.ndim

    def body(*i):
        pos = E.cast(E.INDEX, indices[i[a:a + r]])
        pos = E.minimum(E.maximum(E.select(pos < 0, pos + n, pos), 0), n - 1)
        return x[(*i[:a], pos, *i[a + r:])]

    shape = x.shape[:a] + indices.shape + x.shape[a + 1:]
    return te.compute(shape, body, name=name, tag="injective", attrs={"axis": a})


def gather_elements(x: te.Tensor, indices: te.Tensor, axis: int = 0, name: str = "gather_elements") -> te.Tensor:
    """x read at `indices` along `axis`, position by position (ONNX GatherElements): the output has the indices'
    shape, and out[i] = x[i with its `axis` coordinate replaced by indices[i]]. Indices wrap and clamp as in
    `gather`."""
    if not E.is_int(indices.dtype):
        raise ShapeError(f"gather_elements: indices {indices.name} must have an integer dtype, got {indices.dtype}")
    a = normalize_axis(axis, x.ndim, "gather_elements")
    if indices.ndim != x.ndim or any(m > n for d, (m, n) in enumerate(zip(indices.shape, x.shape)) if d != a):
        raise ShapeError(f"gather_elements: indices of shape {indices.shape} must have the rank of {x.name} "
                         f"{x.shape} and no larger extent outside axis {a}")
    n = x.shape[a]

    def body(*i):
        pos = E.cast(E.INDEX, indices[i])
        pos = E.minimum(E.maximum(E.select(pos < 0, pos + n, pos), 0), n - 1)
        return x[(*i[:a], pos, *i[a + 1:])]

    return te.compute(indices.shape, body, name=name, tag="injective", attrs={"axis": a})


def broadcast_to(x: te.Tensor, shape: Sequence[int], name: str = "broadcast_to") -> te.Tensor:
    """x stretched to exactly `shape`, which x must broadcast to (NumPy broadcast_to)."""
    shape = tuple(shape)
    if broadcast_shape(x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: {x.name} of shape {x.shape} does not broadcast to {shape}")
    return _stretch(x, shape, name)


def expand(x: te.Tensor, shape: Sequence[int], name: str = "expand") -> te.Tensor:
    """x broadcast together with `shape` (ONNX Expand: extents of 1 in `shape` keep x's extent)."""
    return _stretch(x, broadcast_shape(x.shape, tuple(shape)), name)


def _stretch(x: te.Tensor, shape: tuple[int, ...], name: str) -> te.Tensor:
    return te.compute(shape, lambda *i: x[broadcast_index(x.shape, i)], name=name, tag="broadcast",
                      attrs={"shape": shape})


def _infer_shape(x: te.Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with its -1 filled in, checked to hold as many elements as x."""
    size = product(x.shape)
    if shape.count(-1) > 1 or any(not isinstance(n, E.Expr) and n < 1 and n != -1 for n in shape):
        raise ShapeError(f"reshape: shape {shape} must have positive extents and at most one -1")
    known = product(n for n in shape if not equal(n, -1))
    if -1 in shape and divides(known, size):
        shape = tuple(quotient(size, known) if equal(n, -1) else n for n in shape)
    if not equal(product(shape), size):
        raise ShapeError(f"reshape: {x.name} of shape {x.shape} has {size} elements, which do not fit {shape}")
    return shape


def _strides(shape: Sequence[int]) -> list[int]:
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]
