"""The sliding-window rules of the graph layer: ONNX window attributes as te's `Window`, and the type rules, NumPy
references, computes and work of convolutions and pools.

The `conv`, `max_pool` and `avg_pool` ops (nn.py) are declared with them, and their variants in other layouts,
weight packings, integer types and algorithms (layout.py, packed.py, quant.py, conv_algorithms.py) apply them to
the equivalent NCHW shapes, so that every variant agrees with the plain op on every extent.
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from ...dtype import is_float
from ...errors import ShapeError
from ...te import nn
from ...te.nn._arguments import int_tuple
from ...te.nn._window import Window
from ..registry import TensorType
from .operands import float_dtype

_CONV = {1: nn.conv1d, 2: nn.conv2d, 3: nn.conv3d}


def spatial_rank(x: TensorType) -> int:
    """The number of spatial axes of a channels-first `x`: 1 to 3."""
    nd = len(x.shape) - 2
    if not 1 <= nd <= 3:
        raise ShapeError(f"x must be (N, C, W), (N, C, H, W) or (N, C, D, H, W), got shape {x.shape}")
    return nd


def onnx_ints(value, nd: int, what: str, op: str, default: int, minimum: int = 1) -> tuple[int, ...]:
    """An ONNX per-axis attribute: `nd` integers, or `default` on every axis when absent."""
    return (default,) * nd if value is None else int_tuple(value, nd, what, op, minimum, scalar=False)


def window_attrs(op: str, nd: int, strides, pads, dilations, crop: bool = False):
    """ONNX window attributes as te's stride, (begin, end) pads and dilation (`pads` lists all the begins, then
    all the ends; with `crop`, a negative one crops that side)."""
    flat = onnx_ints(pads, 2 * nd, "pads (all begins, then all ends)", op, 0, minimum=None if crop else 0)
    return (onnx_ints(strides, nd, "strides", op, 1), tuple(zip(flat[:nd], flat[nd:])),
            onnx_ints(dilations, nd, "dilations", op, 1))


def _window(op: str, sizes, kernel, strides, pads, dilations, ceil_mode: bool = False, crop: bool = False) -> Window:
    """The window of an op with ONNX attributes over spatial `sizes`."""
    return Window.of(op, sizes, kernel, *window_attrs(op, len(sizes), strides, pads, dilations, crop), ceil_mode,
                     crop)


def _padded(a: np.ndarray, win: Window, fill, overhang) -> np.ndarray:
    """`a` with its spatial (last) axes cropped per `win.pads`'s negative sides and padded by `fill` per its
    positive ones, then by `overhang` up to the reach of the last window (which ceil_mode can take past the
    padding)."""
    lead = [(0, 0)] * (a.ndim - len(win.kernel))
    a = a[(..., *(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in zip(win.pads, a.shape[len(lead):])))]
    a = np.pad(a, lead + list(win.stage_pads), constant_values=fill)
    reach = [(o - 1) * s + d * (k - 1) + 1 for o, s, d, k in zip(win.out_sizes, win.stride, win.dilation, win.kernel)]
    extra = [(0, max(0, r - n)) for r, n in zip(reach, a.shape[len(lead):])]
    return np.pad(a, lead + extra, constant_values=overhang)


def _tap_views(a: np.ndarray, win: Window):
    """For each kernel tap, the strided view of padded `a` that the tap reads at every output position."""
    for taps in np.ndindex(*win.kernel):
        yield taps, a[(..., *(slice(k * d, k * d + s * (o - 1) + 1, s)
                              for k, d, s, o in zip(taps, win.dilation, win.stride, win.out_sizes)))]


# ---- convolution ----

def check_conv_weight(x: TensorType, w: TensorType, group, layout: str) -> None:
    """A ShapeError unless `w` has the rank of `x` and `group` is a positive integer (conv and conv_transpose)."""
    if len(w.shape) != len(x.shape):
        raise ShapeError(f"the weight must have layout ({layout}) of rank {len(x.shape)} like x, got shape {w.shape}")
    if not isinstance(group, numbers.Integral) or group < 1:
        raise ShapeError(f"group must be a positive integer, got {group!r}")


def check_conv_channels(group: int, in_channels: int, out_channels: int, bias: TensorType | None) -> None:
    """A ShapeError unless `group` divides both channel counts and `bias` has one value per output channel."""
    if in_channels % group or out_channels % group:
        raise ShapeError(f"group={group} must divide both the {in_channels} input and the {out_channels} output "
                         f"channels")
    if bias is not None and bias.shape != (out_channels,):
        raise ShapeError(f"the bias must have shape ({out_channels},), one per output channel, got {bias.shape}")


def conv_type(x, w, bias=None, *, strides, pads, dilations, group, crop: bool = False):
    """The type rule of `conv`: w is (M, C / group, *kernel); with `crop` (the compiler's own convolutions over
    part of an input), negative pads crop."""
    spatial_rank(x)
    dtype = float_dtype(x, w, bias)
    check_conv_weight(x, w, group, "M, C / group, *kernel")
    channels, (out_channels, per_group) = x.shape[1], w.shape[:2]
    check_conv_channels(group, channels, out_channels, bias)
    if per_group * group != channels:
        raise ShapeError(f"the weight has {per_group} input channels per group, but x has {channels} channels in "
                         f"{group} group(s), which needs {channels // group}")
    out = _window("conv", x.shape[2:], w.shape[2:], strides, pads, dilations, crop=crop).out_sizes
    return [TensorType((x.shape[0], out_channels, *out), dtype)]


def conv_ref(x, w, bias=None, *, strides, pads, dilations, group, crop: bool = False):
    """The NumPy reference of `conv`, summed in float64 (`crop` as in `conv_type`)."""
    nd = x.ndim - 2
    win = _window("conv", x.shape[2:], w.shape[2:], strides, pads, dilations, crop=crop)
    out_sizes = win.out_sizes
    (n, c), m = x.shape[:2], w.shape[0]
    xp = _padded(x.astype(np.float64), win, 0, 0)
    xg = xp.reshape(n, group, c // group, *xp.shape[2:])
    wg = w.astype(np.float64).reshape(group, m // group, c // group, *w.shape[2:])
    y = np.zeros((n, group, m // group, *out_sizes))
    for taps, view in _tap_views(xg, win):
        y += np.einsum("ngc...,goc->ngo...", view, wg[(..., *taps)])
    y = y.reshape(n, m, *out_sizes)
    if bias is not None:
        y += bias.reshape(m, *[1] * nd)
    return y.astype(x.dtype)


def conv_compute(x, w, *, strides, pads, dilations, group):
    """te.nn's convolution for the spatial rank of `x` (1 to 3), with ONNX window attributes and no bias."""
    win = _window("conv", x.shape[2:], w.shape[2:], strides, pads, dilations)
    return _CONV[x.ndim - 2](x, w, win.stride, win.pads, win.dilation, int(group))


def conv_flops(ins, outs, **_) -> int:
    """2 x the multiply-adds: w is (M, C / group, *kernel), one dot product of prod(w[1:]) per output element."""
    return 2 * math.prod(outs[0].shape) * math.prod(ins[1].shape[1:])


# ---- pooling ----

def pool_window(op: str, x: TensorType, kernel_shape, strides, pads, dilations, ceil_mode) -> Window:
    """The window of a pool over `x`; every window must read some of the input."""
    nd = spatial_rank(x)
    if kernel_shape is None:
        raise ShapeError(f"kernel_shape is required: the window's extent along each of the {nd} spatial axes")
    kernel = int_tuple(kernel_shape, nd, "kernel_shape", op, scalar=False)
    win = _window(op, x.shape[2:], kernel, strides, pads, dilations, bool(ceil_mode))
    win.check_inside(op)
    return win


def _pool_type(op: str, x: TensorType, kernel_shape, strides, pads, dilations, ceil_mode) -> list[TensorType]:
    out = pool_window(op, x, kernel_shape, strides, pads, dilations, ceil_mode).out_sizes
    return [TensorType((*x.shape[:2], *out), x.dtype)]


def max_pool_type(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    """The type rule of `max_pool`."""
    return _pool_type("max_pool", x, kernel_shape, strides, pads, dilations, ceil_mode)


def avg_pool_type(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    """The type rule of `avg_pool` (a float input)."""
    float_dtype(x)
    return _pool_type("avg_pool", x, kernel_shape, strides, pads, dilations, ceil_mode)


def max_pool_ref(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    """The NumPy reference of `max_pool`: the padding never wins."""
    win = pool_window("max_pool", TensorType(x.shape, str(x.dtype)), kernel_shape, strides, pads, dilations,
                      ceil_mode)
    lowest = -np.inf if is_float(str(x.dtype)) else np.iinfo(x.dtype).min
    views = (v for _, v in _tap_views(_padded(x, win, lowest, lowest), win))
    return functools.reduce(np.maximum, views).astype(x.dtype)


def avg_pool_ref(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    """The NumPy reference of `avg_pool`, summed in float64."""
    win = pool_window("avg_pool", TensorType(x.shape, str(x.dtype)), kernel_shape, strides, pads, dilations,
                      ceil_mode)
    total = sum(v for _, v in _tap_views(_padded(x.astype(np.float64), win, 0, 0), win))
    # The divisor counts the taps inside the input, or with count_include_pad inside the padded input (never
    # those past it, which only ceil_mode reaches).
    inside = _padded(np.ones(x.shape[2:]), win, 1 if count_include_pad else 0, 0)
    count = sum(v for _, v in _tap_views(inside, win))
    return (total / count).astype(x.dtype)
