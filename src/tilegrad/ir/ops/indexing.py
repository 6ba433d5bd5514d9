"""Indexing by data, with ONNX semantics: gather_nd, scatter_elements, scatter_nd, one_hot and the indices of
top-k (whose values the frontend gathers with gather_elements).

The computes are `te.nn.indexing`'s. The references apply a scatter's updates one at a time in row-major order, as
ONNX Runtime does, so that the last of several updates aimed at one place wins.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te import nn
from ...te.nn.indexing import SCATTER_REDUCTIONS
from ..registry import INJECTIVE, REDUCTION, Sample, TensorType, declare
from .shape import normalize_axis


def _indices(t: TensorType, op: str) -> None:
    if t.dtype not in ("int32", "int64"):
        raise ShapeError(f"{op} indices must be int32 or int64, got {t.dtype}")


# --- gather_nd ---

def _gather_nd_type(data: TensorType, indices: TensorType, *, batch_dims) -> list[TensorType]:
    _indices(indices, "gather_nd")
    b, m = int(batch_dims), indices.shape[-1] if indices.shape else 0
    if not 0 <= b < len(indices.shape) or not 1 <= m <= len(data.shape) - b or indices.shape[:b] != data.shape[:b]:
        raise ShapeError(f"gather_nd indices {indices.shape} do not index data {data.shape} with batch_dims {b}")
    return [TensorType(indices.shape[:-1] + data.shape[b + m:], data.dtype)]


def _gather_nd_ref(data, indices, *, batch_dims):
    b = int(batch_dims)
    out = np.empty(_gather_nd_type(TensorType(data.shape, str(data.dtype)), TensorType(indices.shape, "int64"),
                                   batch_dims=b)[0].shape, data.dtype)
    for j in np.ndindex(*indices.shape[:-1]):
        out[j] = data[j[:b] + tuple(int(v) for v in indices[j])]
    return out


declare("gather_nd", kind=INJECTIVE, attrs={"batch_dims": 0}, infer=_gather_nd_type, reference=_gather_nd_ref,
        compute=lambda data, indices, *, batch_dims: nn.gather_nd(data, indices, int(batch_dims)), num_inputs=2,
        samples=(Sample((((4, 5, 3), "float32"), ((2, 2), "int64"))),
                 Sample((((2, 4, 3), "float32"), ((2, 3, 1), "int32")), {"batch_dims": 1})))


# --- scatters ---

def _scatter_common(data: TensorType, indices: TensorType, updates: TensorType, reduction, op: str) -> None:
    _indices(indices, op)
    if reduction not in SCATTER_REDUCTIONS:
        raise ShapeError(f"{op} reduction {reduction!r} is not one of {SCATTER_REDUCTIONS}")
    if updates.dtype != data.dtype or data.dtype == "bool" and reduction != "none":
        raise ShapeError(f"{op} updates ({updates.dtype}) must have the data's dtype ({data.dtype}), a number "
                         f"unless the reduction is 'none'")


def _scatter_elements_type(data, indices, updates, *, axis, reduction) -> list[TensorType]:
    _scatter_common(data, indices, updates, reduction, "scatter_elements")
    a = normalize_axis(axis, len(data.shape), "scatter_elements axis")
    if indices.shape != updates.shape or len(indices.shape) != len(data.shape) or any(
            m > n for d, (m, n) in enumerate(zip(indices.shape, data.shape)) if d != a):
        raise ShapeError(f"scatter_elements indices {indices.shape} and updates {updates.shape} must have one shape, "
                         f"of the data's rank and no larger than the data {data.shape} outside axis {a}")
    return [data]


_COMBINE = {"none": lambda old, new: new, "add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_elements_ref(data, indices, updates, *, axis, reduction):
    out, a = data.copy(), axis % data.ndim
    for i in np.ndindex(*indices.shape):
        at = i[:a] + (int(indices[i]) % data.shape[a],) + i[a + 1:]
        out[at] = _COMBINE[reduction](out[at], updates[i])
    return out


def _scatter_nd_type(data, indices, updates, *, reduction) -> list[TensorType]:
    _scatter_common(data, indices, updates, reduction, "scatter_nd")
    m = indices.shape[-1] if indices.shape else 0
    if len(indices.shape) < 2 or not 1 <= m <= len(data.shape) or updates.shape != indices.shape[:-1] + data.shape[m:]:
        raise ShapeError(f"scatter_nd needs indices of rank 2 or more with at most {len(data.shape)} coordinates, "
                         f"and updates of shape indices.shape[:-1] + data.shape[m:]; got indices {indices.shape}, "
                         f"updates {updates.shape}, data {data.shape}")
    return [data]


def _scatter_nd_ref(data, indices, updates, *, reduction):
    out = data.copy()
    for j in np.ndindex(*indices.shape[:-1]):
        at = tuple(int(v) % n for v, n in zip(indices[j], data.shape))
        out[at] = _COMBINE[reduction](out[at], updates[j])
    return out


declare("scatter_elements", kind=REDUCTION, attrs={"axis": 0, "reduction": "none"}, infer=_scatter_elements_type,
        reference=_scatter_elements_ref, num_inputs=3,
        compute=lambda data, indices, updates, *, axis, reduction: nn.scatter_elements(data, indices, updates, axis,
                                                                                       reduction),
        samples=(Sample((((4, 5), "float32"), ((3, 5), "int64"), ((3, 5), "float32"))),
                 Sample((((3, 6), "float32"), ((2, 4), "int32"), ((2, 4), "float32")), {"axis": 1, "reduction": "add"}),
                 Sample((((4, 3), "int32"), ((5, 3), "int64"), ((5, 3), "int32")), {"reduction": "max"}),
                 Sample((((4, 3), "float32"), ((2, 2), "int64"), ((2, 2), "float32")), {"reduction": "mul"})))
declare("scatter_nd", kind=REDUCTION, attrs={"reduction": "none"}, infer=_scatter_nd_type,
        reference=_scatter_nd_ref, num_inputs=3,
        compute=lambda data, indices, updates, *, reduction: nn.scatter_nd(data, indices, updates, reduction),
        samples=(Sample((((4, 5, 2), "float32"), ((3, 2, 2), "int64"), ((3, 2, 2), "float32"))),
                 Sample((((4, 4), "float32"), ((5, 1), "int64"), ((5, 4), "float32")), {"reduction": "add"}),
                 Sample((((5,), "int32"), ((6, 1), "int32"), ((6,), "int32")), {"reduction": "min"})))


# --- one_hot, top-k ---

def _one_hot_type(indices: TensorType, values: TensorType, *, depth, axis) -> list[TensorType]:
    if values.shape != (2,) or indices.dtype == "bool" or depth is None or int(depth) < 1:
        raise ShapeError(f"one_hot needs numeric indices, values (off, on) of shape (2,) and a positive depth; got "
                         f"indices {indices.dtype}, values {values.shape}, depth {depth}")
    a = normalize_axis(axis, len(indices.shape) + 1, "one_hot axis")
    return [TensorType(indices.shape[:a] + (int(depth),) + indices.shape[a:], values.dtype)]


def _one_hot_ref(indices, values, *, depth, axis):
    a = axis % (indices.ndim + 1)
    pos = indices.astype(np.int64)
    valid = (pos >= -depth) & (pos < depth)
    pos = np.where(pos < 0, pos + depth, pos)
    hot = np.expand_dims(pos, a) == np.arange(depth).reshape([-1 if d == a else 1 for d in range(indices.ndim + 1)])
    return np.where(hot & np.expand_dims(valid, a), values[1], values[0]).astype(values.dtype)


def _topk_type(x: TensorType, *, k, axis, largest) -> list[TensorType]:
    if x.dtype == "bool":
        raise ShapeError("topk needs a numeric input, got bool; insert a Cast")
    a = normalize_axis(axis, len(x.shape), "topk axis")
    if not 1 <= int(k) <= x.shape[a]:
        raise ShapeError(f"topk k={k} must be between 1 and the extent {x.shape[a]} of axis {a}")
    return [TensorType(x.shape[:a] + (int(k),) + x.shape[a + 1:], "int64")]


def _topk_ref(x, *, k, axis, largest):
    """Stable order by value, NaN counting as the largest (ONNX Runtime's order)."""
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    order = np.lexsort((-x, ~nan) if largest else (x, nan), axis=axis)
    return np.take(order, range(int(k)), axis=axis).astype(np.int64)


declare("one_hot", kind=INJECTIVE, attrs={"depth": None, "axis": -1}, infer=_one_hot_type, reference=_one_hot_ref,
        compute=lambda indices, values, *, depth, axis: nn.one_hot(indices, values, int(depth), axis), num_inputs=2,
        samples=(Sample((((3, 4), "int64"), ((2,), "float32")), {"depth": 5}),
                 Sample((((2, 3), "float32"), ((2,), "int32")), {"depth": 3, "axis": 0})))
declare("topk_indices", kind=REDUCTION, attrs={"k": 1, "axis": -1, "largest": 1}, infer=_topk_type,
        reference=_topk_ref,
        compute=lambda x, *, k, axis, largest: nn.topk_indices(x, int(k), axis, bool(largest)),
        samples=(Sample((((3, 7), "float32"),), {"k": 3}),
                 Sample((((6, 4), "int32"),), {"k": 2, "axis": 0, "largest": 0})))
