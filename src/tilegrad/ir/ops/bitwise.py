"""Bitwise ops and shifts of integers (ONNX's BitwiseAnd/Or/Xor/Not and BitShift)."""

from __future__ import annotations

import numpy as np

from ...dtype import is_unsigned
from ...errors import ShapeError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ..registry import BROADCAST, ELEMWISE, Sample, TensorType, declare
from .elementwise import broadcast


def _integer(*types: TensorType, **_) -> list[TensorType]:
    """The type rule of bitwise ops: broadcasting integers of one dtype."""
    out = broadcast(*types)
    if not E.is_int(out[0].dtype):
        raise ShapeError(f"bitwise ops need integer operands, got {out[0].dtype}; insert a Cast")
    return out


def _elementwise(fn, name: str):
    """The broadcasting compute of the binary expression builder `fn`."""
    def compute(a, b, **attrs):
        shape = nn.broadcast_shape(a.shape, b.shape)
        tag = "elemwise" if a.shape == b.shape == shape else "broadcast"
        return te.compute(shape, lambda *i: fn(a[nn.broadcast_index(a.shape, i)], b[nn.broadcast_index(b.shape, i)],
                                               **attrs), name=name, tag=tag)
    return compute


def _shift(u, v, *, left):
    """`u` shifted by `v` bits, as ONNX defines it: a left shift wraps around (done on the unsigned bits, since C
    leaves overflowing signed shifts undefined), a right shift of a signed integer keeps its sign, and a shift by
    a negative amount or by the width or more gives 0 (-1 shifting a negative integer right)."""
    width = E.const(np.dtype(u.dtype).itemsize * 8, u.dtype)
    outside = E.logical_or(v < E.const(0, u.dtype), v >= width)
    zero = E.const(0, u.dtype)
    if left:
        bits = u.dtype if is_unsigned(u.dtype) else "u" + u.dtype
        return E.select(outside, zero, E.cast(u.dtype, E.shift_left(E.cast(bits, u), E.cast(bits, v))))
    return E.select(outside, E.select(u < zero, E.const(-1, u.dtype), zero), E.shift_right(u, v))


def _shift_ref(a, b, *, left):
    width = a.dtype.itemsize * 8
    outside = (b < 0) | (b >= width)
    amount = np.where(outside, 0, b).astype(a.dtype)
    if left:
        unsigned = np.dtype(f"u{a.dtype.itemsize}")
        return np.where(outside, 0, np.left_shift(a.view(unsigned), amount.astype(unsigned)).view(a.dtype))
    return np.where(outside, np.where(a < 0, -1, 0), np.right_shift(a, amount)).astype(a.dtype)


_SAMPLES = (Sample((((4, 33), "int32"), ((33,), "int32"))), Sample((((2, 1, 5), "uint8"), ((3, 1), "uint8"))),
            Sample((((3, 5), "uint64"), ((3, 5), "uint64"))))
for _name, _fn, _ref in (("bitwise_and", E.bit_and, np.bitwise_and), ("bitwise_or", E.bit_or, np.bitwise_or),
                         ("bitwise_xor", E.bit_xor, np.bitwise_xor)):
    declare(_name, kind=BROADCAST, infer=_integer, reference=_ref, compute=_elementwise(_fn, _name),
            samples=_SAMPLES, num_inputs=2)
declare("bitwise_not", kind=ELEMWISE, infer=_integer, reference=np.invert,
        compute=lambda x: te.compute(x.shape, lambda *i: E.bit_not(x[i]), name="bitwise_not", tag="elemwise"),
        samples=(Sample((((4, 33), "int8"),)), Sample((((3, 5), "uint16"),))))
declare("bit_shift", kind=BROADCAST, attrs={"left": True}, infer=_integer, reference=_shift_ref,
        compute=_elementwise(_shift, "bit_shift"), num_inputs=2,
        samples=(Sample((((4, 9), "uint8"), ((9,), "uint8"))), Sample((((3, 5), "uint64"), ((5,), "uint64"))),
                 Sample((((3, 5), "uint32"), ((3, 5), "uint32")), {"left": False}),
                 Sample((((4, 9), "int8"), ((9,), "int8"))),
                 Sample((((4, 9), "int32"), ((4, 9), "int32")), {"left": False})))
