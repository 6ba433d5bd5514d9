"""Ops whose values are dynamic dimensions (te/dims.py): numbers the import folds where they are known, computed
at run time where a shape's expressions reach a tensor a kernel reads.

`dim_values` is a small constant whose entries may be expressions of dynamic dimensions (a Shape's result that
flows into arithmetic on tensors); `arange` is ONNX's Range over a length that is one (position ids `0..seq`).
Neither takes an input: the dimensions' values reach their kernels as every kernel's do.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import tensor as te
from ...te.dims import dim, upper
from ..registry import INJECTIVE, Sample, TensorType, declare


def _values_type(*, values, shape, dtype) -> list[TensorType]:
    if len(values) != math.prod(shape):
        raise ShapeError(f"dim_values holds {len(values)} values for shape {tuple(shape)}")
    return [TensorType(tuple(shape), dtype)]


def _values_te(*, values, shape, dtype):
    def body(*index):
        flat = E.const(0)
        for i, n in zip(index, shape):
            flat = flat * n + i
        out = E.cast(dtype, E.as_expr(dim(values[-1])))
        for k in range(len(values) - 2, -1, -1):
            out = E.select(flat.eq(k), E.cast(dtype, E.as_expr(dim(values[k]))), out)
        return out

    return te.compute(tuple(shape), body, name="dim_values", tag="injective")


def _values_ref(*, values, shape, dtype):
    return np.array([int(v) for v in values]).astype(dtype).reshape(shape)


declare("dim_values", kind=INJECTIVE, num_inputs=0, attrs={"values": None, "shape": (), "dtype": "int64"},
        infer=_values_type, reference=_values_ref, compute=_values_te,
        samples=(Sample((), {"values": (3, 1, 4), "shape": (3,), "dtype": "int64"}),
                 Sample((), {"values": (2, 5, 7, 1), "shape": (2, 2), "dtype": "float32"})))


def _arange_type(*, start, delta, length, dtype) -> list[TensorType]:
    length = dim(length)
    if not isinstance(length, E.Expr) and length < 0:
        raise ShapeError(f"arange: length {length} is negative")
    if upper(length) == 0:
        raise ShapeError("arange: an empty range is a constant, not a kernel")
    return [TensorType((length,), dtype)]


def _arange_te(*, start, delta, length, dtype):
    return te.compute((dim(length),), lambda i: E.cast(dtype, i) * E.const(delta, dtype) + E.const(start, dtype),
                      name="arange", tag="injective")


declare("arange", kind=INJECTIVE, num_inputs=0, attrs={"start": 0, "delta": 1, "length": None, "dtype": "int64"},
        infer=_arange_type, compute=_arange_te,
        reference=lambda *, start, delta, length, dtype: (start + np.arange(int(length)) * delta).astype(dtype),
        samples=(Sample((), {"start": 0, "delta": 1, "length": 7, "dtype": "int64"}),
                 Sample((), {"start": 2.5, "delta": -0.5, "length": 5, "dtype": "float32"})))
