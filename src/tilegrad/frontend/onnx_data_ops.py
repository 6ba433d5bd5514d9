"""ONNX ops that move elements by data: CumProd, ReverseSequence (a gather of reversed positions), MaxUnpool (a
scatter into zeros), and the ops whose output shape depends on data (Compress, NonZero, Unique, NonMaxSuppression),
supported where that data is a constant: a constant Compress condition is a gather; the others fold during
import when their inputs are constants, and a run-time input is refused by name. Bernoulli, a random draw, is
refused. The reader (`onnx.py`) imports this module, which registers them."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op


@onnx_op("CumProd")
def _cumprod(b: B, name, x, axis, *, exclusive=0, reverse=0):
    a = int(np.asarray(constant_input(axis, "axis", name)).item())
    return b.op("cumprod", x, name=name, axis=a, exclusive=int(exclusive), reverse=int(reverse))


def _along(rank: int, axis: int, extent: int) -> tuple[int, ...]:
    """The shape that puts a 1-D tensor of `extent` along `axis` of a tensor of rank `rank`."""
    shape = [1] * rank
    shape[axis] = extent
    return tuple(shape)


@onnx_op("ReverseSequence")
def _reverse_sequence(b: B, name, x, sequence_lens, *, batch_axis=1, time_axis=0):
    """y[b, t] = x[b, len_b - 1 - t] for t < len_b, else x[b, t]: gather_elements along time with those
    positions."""
    rank = len(x.shape)
    steps = x.shape[time_axis]
    time = b.const(np.arange(steps, dtype="int64").reshape(_along(rank, time_axis, steps)), f"{name}_time")
    lengths = b.op("reshape", b.op("cast", sequence_lens, name=f"{name}_lengths64", to="int64"),
                   name=f"{name}_lengths", shape=_along(rank, batch_axis, x.shape[batch_axis]))
    last = b.op("sub", lengths, b.const(np.array(1, "int64"), f"{name}_one"), name=f"{name}_last")
    reversed_time = b.op("sub", last, time, name=f"{name}_reversed")
    inside = b.op("less", time, lengths, name=f"{name}_inside")
    position = b.op("where", inside, reversed_time, time, name=f"{name}_position")
    full = b.op("expand", position, name=f"{name}_positions", shape=x.shape)
    return b.op("gather_elements", x, full, name=name, axis=time_axis)


@onnx_op("MaxUnpool")
def _max_unpool(b: B, name, x, indices, output_shape=None, *, kernel_shape, pads=None, strides=None):
    """Zeros of the output's shape with each x at its index into the flattened output (MaxPool's Indices)."""
    nd = len(kernel_shape)
    strides = tuple(strides) if strides else (1,) * nd
    pads = tuple(pads) if pads else (0,) * (2 * nd)
    shape = constant_input(output_shape, "output_shape", name)
    if shape is None:
        shape = (*x.shape[:2], *((n - 1) * s - pads[d] - pads[nd + d] + k
                                 for d, (n, s, k) in enumerate(zip(x.shape[2:], strides, kernel_shape))))
    shape = tuple(int(n) for n in shape)
    if len(shape) != len(x.shape) or min(shape) < 1:
        raise ShapeError(f"node {name!r}: MaxUnpool output shape {list(shape)} does not fit an input of shape "
                         f"{list(x.shape)}")
    zeros = b.const(np.zeros(math.prod(shape), x.dtype), f"{name}_zeros")
    flat_x = b.op("reshape", x, name=f"{name}_values", shape=(-1,))
    flat_i = b.op("reshape", indices, name=f"{name}_indices", shape=(-1,))
    scattered = b.op("scatter_elements", zeros, flat_i, flat_x, name=f"{name}_scatter", axis=0)
    return b.op("reshape", scattered, name=name, shape=shape)


@onnx_op("Compress")
def _compress(b: B, name, x, condition, *, axis=None):
    """The slices of x (flattened without an axis) where a constant condition is true: a gather of their
    positions."""
    if not condition.is_constant:
        raise UnsupportedFeatureError(f"node {name!r}: Compress with a condition computed at run time has an output "
                                      f"shape that depends on data; tilegrad compiles static shapes")
    source = x if axis is not None else b.op("reshape", x, name=f"{name}_flat", shape=(-1,))
    a = 0 if axis is None else int(axis) % len(x.shape)
    kept = np.flatnonzero(np.asarray(condition.data).reshape(-1)[:source.shape[a]]).astype("int64")
    if kept.size == 0:
        raise UnsupportedFeatureError(f"node {name!r}: Compress selects nothing, which makes an empty tensor; empty "
                                      f"tensors are not supported")
    return b.op("gather", source, b.const(kept, f"{name}_kept"), name=name, axis=a)


def _data_shaped(op_type: str):
    def convert(b: B, name, *inputs, **attrs):
        """Only a constant input, which import folds before this is reached."""
        raise UnsupportedFeatureError(f"node {name!r}: {op_type} of an input computed at run time has an output "
                                      f"shape that depends on data; tilegrad compiles static shapes (a constant "
                                      f"input is folded during import)")
    return convert


for _op_type in ("NonZero", "Unique", "NonMaxSuppression"):
    onnx_op(_op_type)(_data_shaped(_op_type))


@onnx_op("Bernoulli")
def _bernoulli(b: B, name, x, *, dtype=None, seed=None):
    """Refused: a draw of random numbers is not a function of the model's inputs, so no compiled kernel can give
    the numbers another runtime (or ONNX's node tests, which record one draw) gives."""
    raise UnsupportedFeatureError(f"node {name!r}: Bernoulli draws random numbers, which tilegrad does not "
                                  f"generate (no compiled kernel reproduces another runtime's draws)")
