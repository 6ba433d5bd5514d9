"""Convolution as one matrix product: im2col + GEMM (groups = 1, any kernel, stride, padding and dilation).

For each image, Y (O x OH*OW) = W (O x C*KH*KW) @ cols (C*KH*KW x OH*OW), where column (h, w) of `cols` holds the
input window of output position (h, w). Both operands are laid out for the GEMM's register tile of mr output
channels x nr positions of one output row (nr one or two vectors):

- the weight matrix as (O / mr, K, mr) row panels (a constant laid out once, ahead of time), so the mr values
  broadcast at each step of k are adjacent;
- `{name}_cols` as (N, OH, OW / nr, K, nr) column panels, so the nr positions loaded at each step are one
  contiguous run, and written as vectors along the input row (positions past the row's end are computed and
  dropped);
- `{name}_gemm` (N, O', OH, OW') is the padded product, and `{name}` (tag "im2col_conv2d") crops it to NCHW, adding
  the bias, vectorised along the row.

It trades memory (cols is KH*KW times the input) for a GEMM that runs near the machine's peak whatever the kernel,
stride or dilation, where the direct convolution's register tile fits some shapes badly.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from .. import expr as E
from ..dims import ceildiv, representative
from .. import tensor as te
from ._arguments import check_same_dtype, int_tuple
from ._window import Window, guarded_load


def position_tile(out_width) -> int:
    """nr, the output positions per register tile: two AVX2 vectors, or one where that wastes less of the row (a
    dynamic width's at its representative value, where schedules are chosen)."""
    out_width = representative(out_width)
    return 8 if -(-out_width // 8) * 8 < -(-out_width // 16) * 16 else 16


def channel_tile(out_channels: int, out_width: int) -> int:
    """mr, the output channels per register tile: the most useful rows per tile, counting ten vectors of
    accumulators as enough to hide the FMA latency and every padding channel as wasted; at most 12 vectors of
    accumulators, so they and the operands fit AVX2's 16 registers."""
    vectors = position_tile(out_width) // 8

    def waste(mr: int) -> float:
        return -(-out_channels // mr) * mr / min(1.0, mr * vectors / 10)

    return min(out_channels, min(range(1, 12 // vectors + 1), key=lambda mr: (waste(mr), -mr)))


def weight_matrix_shape(out_channels: int, depth: int, mr: int) -> tuple[int, int, int]:
    return (-(-out_channels // mr), depth, mr)


def weight_matrix_numpy(w: np.ndarray, mr: int) -> np.ndarray:
    """w (O, C, KH, KW) as the GEMM's row panels (O / mr, C*KH*KW, mr), output channels zero-padded."""
    o = w.shape[0]
    rows = np.zeros((-(-o // mr) * mr, int(np.prod(w.shape[1:]))), w.dtype)
    rows[:o] = w.reshape(o, -1)
    return np.ascontiguousarray(rows.reshape(-1, mr, rows.shape[1]).transpose(0, 2, 1))


def weight_matrix(w: te.Tensor, mr: int, name: str = "im2col_weight") -> te.Tensor:
    """`weight_matrix_numpy` as a compute, for a weight known only at run time."""
    if w.ndim != 4:
        raise ShapeError(f"im2col_conv2d: expected a weight (O, C, KH, KW), got {w.shape}")
    out_channels, channels, kh, kw = w.shape
    zero = E.const(0, w.dtype)

    def panel(ob, k, oi):
        o = ob * mr + oi
        c, tap = k // (kh * kw), k % (kh * kw)
        return E.select(o < out_channels, w[E.minimum(o, out_channels - 1), c, tap // kw, tap % kw], zero)

    return te.compute(weight_matrix_shape(out_channels, channels * kh * kw, mr), panel, name=name, tag="pack")


def im2col_conv2d(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, dilation=1, bias: te.Tensor | None = None,
                  name: str = "conv2d") -> te.Tensor:
    """conv2d (groups = 1) of x (N, C, H, W) with weight (O, C, KH, KW) by im2col + GEMM."""
    if weight.ndim != 4:
        raise ShapeError(f"im2col_conv2d: expected weight (O, C, KH, KW), got {weight.shape}")
    ow = Window.of("im2col_conv2d", x.shape[2:], weight.shape[2:], stride, padding, dilation).out_sizes[1]
    wm = weight_matrix(weight, channel_tile(weight.shape[0], ow), name=f"{name}_wmat")
    return im2col_conv2d_packed(x, wm, weight.shape[0], weight.shape[2:], stride, padding, dilation, bias=bias,
                                name=name)


def im2col_conv2d_packed(x: te.Tensor, wm: te.Tensor, out_channels: int, kernel, stride=1, padding=0, dilation=1,
                         bias: te.Tensor | None = None, name: str = "conv2d") -> te.Tensor:
    """The convolution with the weight already laid out by `weight_matrix` (or its NumPy twin)."""
    if x.ndim != 4 or wm.ndim != 3:
        raise ShapeError(f"im2col_conv2d: expected x (N, C, H, W) and a weight matrix (O / mr, C*KH*KW, mr), got "
                         f"{x.shape} and {wm.shape}")
    dtype = check_same_dtype([x, wm], "im2col_conv2d")
    n, channels, height, width = x.shape
    kh, kw = int_tuple(kernel, 2, "kernel", "im2col_conv2d")
    panels, depth, mr = wm.shape
    if depth != channels * kh * kw:
        raise ShapeError(f"im2col_conv2d: a {kh} x {kw} kernel over {channels} channels needs a weight matrix of "
                         f"depth {channels * kh * kw}, got {wm.shape}")
    if not (panels - 1) * mr < out_channels <= panels * mr:
        raise ShapeError(f"im2col_conv2d: {out_channels} output channels do not fit {panels} panels of {mr}")
    win = Window.of("im2col_conv2d", (height, width), (kh, kw), stride, padding, dilation)
    stride, dilation, pads, (oh, ow) = win.stride, win.dilation, win.pads, win.out_sizes
    nr = position_tile(ow)
    row_panels = ceildiv(ow, nr)
    attrs = {"mr": mr, "nr": nr, "kernel": (kh, kw), "stride": stride, "padding": pads, "dilation": dilation}
    (sh, sw), (dh, dw), ((pt, _), (pl, _)) = stride, dilation, pads

    def column(b, h, wo, k, wi):  # positions past the row's end read in-bounds input or zeros, and are dropped
        c, tap = k // (kh * kw), k % (kh * kw)
        return guarded_load(x, (b, c), (h * sh - pt + (tap // kw) * dh, (wo * nr + wi) * sw - pl + (tap % kw) * dw),
                            E.const(0, dtype))

    cols = te.compute((n, oh, row_panels, depth, nr), column, name=f"{name}_cols", tag="im2col", attrs=attrs)
    k = te.reduce_axis(depth, "k")
    gemm = te.compute((n, panels * mr, oh, row_panels * nr),
                      lambda b, o, h, w: te.sum(wm[o // mr, k, o % mr] * cols[b, h, w // nr, k, w % nr], axis=k),
                      name=f"{name}_gemm", tag="im2col_gemm", attrs=attrs)

    def output(b, o, h, w):
        value = gemm[b, o, h, w]
        return value if bias is None else value + bias[o]

    return te.compute((n, out_channels, oh, ow), output, name=name, tag="im2col_conv2d", attrs=attrs)
