"""Convolution algorithms other than the direct one, each with its weight layout (te.nn.winograd, te.nn.im2col).

- `winograd_weight` transforms a (O, C, 3, 3) weight into Winograd's U = G g G^T, laid out for the GEMM, and
  `winograd_conv` convolves with it (3 x 3, stride 1, groups 1; attribute `m` the output tile, 2 or 4).
- `winograd_conv_nchwc` is `winograd_conv` in the blocked channel layout (ir/ops/layout.py): it reads x blocked
  or not and writes (N, O / block, OH, OW, block), so that the layout pass keeps a chain blocked through it.
- `im2col_weight` lays a (O, C, KH, KW) weight out as the GEMM's row panels, and `im2col_conv` convolves with it
  (groups 1, any kernel, stride, padding and dilation).

The conv_algorithm pass rewrites constant-weight `conv` nodes into these, running the weight ops' references
ahead of time. The reference of `winograd_conv` computes by the transforms themselves, in float64, tile by tile:
an oracle for the compiled kernel that is independent of it, and itself checked against the direct convolution.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te.nn import im2col, winograd
from ..registry import INJECTIVE, OUT_FUSABLE, Sample, TensorType, declare
from .layout import block_array, unblock_array
from .windows import conv_ref, conv_type, window_attrs


def _conv2d_weight(w: TensorType) -> tuple[int, int, int, int]:
    if len(w.shape) != 4:
        raise ShapeError(f"expected a weight (O, C, KH, KW), got {w.shape}")
    return w.shape


# ---- Winograd ----

def _winograd_weight_type(w: TensorType, *, m, block) -> list[TensorType]:
    o, c, kh, kw = _conv2d_weight(w)
    winograd.check_applicable((kh, kw), (1, 1), (1, 1))
    winograd.matrices(m)
    return [TensorType(winograd.transformed_weight_shape(o, c, m, block), w.dtype)]


def _transformed_channels(u: TensorType, m: int, out_channels: int) -> int:
    """The input channels of F(m, 3) weights `u` for `out_channels`; ShapeError where u is not such weights."""
    alpha = m + 2
    winograd.matrices(m)
    if len(u.shape) != 4 or u.shape[0] != alpha * alpha:
        raise ShapeError(f"expected F({m}, 3) weights (alpha^2 = {alpha * alpha}, O / b, C, b), got {u.shape}")
    _, blocks, channels, block = u.shape
    if not (blocks - 1) * block < out_channels <= blocks * block:
        raise ShapeError(f"{out_channels} output channels do not fit {blocks} blocks of {block}")
    return channels


def _winograd_type(x: TensorType, u: TensorType, bias: TensorType | None = None, *, m, pads, out_channels):
    weight = TensorType((out_channels, _transformed_channels(u, m, out_channels), 3, 3), u.dtype)
    return conv_type(x, weight, bias, strides=None, pads=pads, dilations=None, group=1)


def _winograd_ref(x, u, bias=None, *, m, pads, out_channels):
    """Y = A^T [sum over c of U * (B^T d B)] A per tile, in float64; tiles past the output are cropped."""
    mats = winograd.matrices(m)
    at, bt = (np.array(mats[k], dtype=np.float64) for k in ("AT", "BT"))
    alpha = m + 2
    _, ((pt, pb), (pl, pr)), _ = window_attrs("winograd_conv", 2, None, pads, None)
    n, c, h, w = x.shape
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, c, th * m + 2, tw * m + 2))
    xp[:, :, pt:pt + h, pl:pl + w] = x
    d = np.lib.stride_tricks.sliding_window_view(xp, (alpha, alpha), axis=(2, 3))[:, :, ::m, ::m]
    v = np.einsum("ei,nctwij,fj->nctwef", bt, d, bt)
    _, blocks, _, block = u.shape
    uu = u.astype(np.float64).transpose(0, 1, 3, 2).reshape(alpha, alpha, blocks * block, c)[:, :, :out_channels]
    mm = np.einsum("efoc,nctwef->notwef", uu, v)
    y = np.einsum("re,notwef,sf->notrws", at, mm, at).reshape(n, out_channels, th * m, tw * m)[:, :, :oh, :ow]
    if bias is not None:
        y = y + bias.astype(np.float64)[:, None, None]
    return y.astype(x.dtype)


def _winograd_te(x, u, bias=None, *, m, pads, out_channels):
    _, pad_pairs, _ = window_attrs("winograd_conv", 2, None, pads, None)
    return winograd.winograd_conv2d_transformed(x, u, out_channels, m, pad_pairs, bias=bias, name="conv")


declare("winograd_weight", kind=INJECTIVE, attrs={"m": 4, "block": 16}, infer=_winograd_weight_type,
        reference=lambda w, *, m, block: winograd.transform_weight_numpy(w, m, block),
        compute=lambda w, *, m, block: winograd.transform_weight(w, m, block, name="wino_u"),
        samples=(Sample((((5, 3, 3, 3), "float32"),), {"m": 2, "block": 4}),
                 Sample((((3, 2, 3, 3), "float32"),), {"m": 4, "block": 2})))
declare("winograd_conv", kind=OUT_FUSABLE, num_inputs=(2, 3), attrs={"m": 4, "pads": None, "out_channels": None},
        infer=_winograd_type, reference=_winograd_ref, compute=_winograd_te, samples=(
            Sample((((1, 3, 7, 6), "float32"), ((16, 2, 3, 4), "float32"), ((7,), "float32")),
                   {"m": 2, "pads": [1, 0, 1, 2], "out_channels": 7}),
            Sample((((2, 2, 9, 5), "float32"), ((36, 1, 2, 8), "float32")),
                   {"m": 4, "pads": [1, 1, 0, 1], "out_channels": 5}),
        ))


def _unblocked(x: TensorType, channels: int) -> TensorType:
    """The NCHW type of an input a Winograd convolution reads, blocked (N, C / b, H, W, b) or not."""
    if len(x.shape) == 4:
        return x
    if len(x.shape) != 5 or not (x.shape[1] - 1) * x.shape[4] < channels <= x.shape[1] * x.shape[4]:
        raise ShapeError(f"x must be (N, C, H, W) or blocked (N, C / b, H, W, b) with C = {channels}, got {x.shape}")
    return TensorType((x.shape[0], channels, *x.shape[2:4]), x.dtype)


def _winograd_nchwc_type(x, u, bias=None, *, m, pads, out_channels, block):
    if block < 1:
        raise ShapeError(f"the output block must be positive, got {block}")
    blocks = -(-out_channels // block)
    if bias is not None and bias.shape != (blocks, block):
        raise ShapeError(f"the bias must be packed as ({blocks}, {block}), got {bias.shape}")
    flat = None if bias is None else TensorType((out_channels,), bias.dtype)
    channels = _transformed_channels(u, m, out_channels)
    (out,) = _winograd_type(_unblocked(x, channels), u, flat, m=m, pads=pads, out_channels=out_channels)
    return [TensorType((out.shape[0], blocks, *out.shape[2:], block), out.dtype)]


def _winograd_nchwc_ref(x, u, bias=None, *, m, pads, out_channels, block):
    """Every lane of the blocked output, as the compute has it: the GEMM's columns past the output channels
    (zero where the weights are zero-padded, as transform_weight_numpy pads them), lanes past those repeating
    the last, plus the packed bias."""
    nchw = unblock_array(x)[:, :u.shape[2]] if x.ndim == 5 else x
    lanes, columns = -(-out_channels // block) * block, u.shape[1] * u.shape[3]
    y = _winograd_ref(nchw, u, m=m, pads=pads, out_channels=min(lanes, columns))
    y = np.concatenate([y] + [y[:, -1:]] * (lanes - y.shape[1]), axis=1)
    if bias is not None:
        y = (y + bias.reshape(-1)[:, None, None]).astype(y.dtype)
    return block_array(y, block)


def _winograd_nchwc_te(x, u, bias=None, *, m, pads, out_channels, block):
    _, pad_pairs, _ = window_attrs("winograd_conv_nchwc", 2, None, pads, None)
    return winograd.winograd_conv2d_transformed(x, u, out_channels, m, pad_pairs, bias=bias, name="conv",
                                                out_block=block)


declare("winograd_conv_nchwc", kind=OUT_FUSABLE, num_inputs=(2, 3),
        attrs={"m": 4, "pads": None, "out_channels": None, "block": None}, infer=_winograd_nchwc_type,
        reference=_winograd_nchwc_ref, compute=_winograd_nchwc_te, samples=(
            Sample((((1, 1, 7, 6, 4), "float32"), ((16, 2, 3, 4), "float32"), ((2, 4), "float32")),
                   {"m": 2, "pads": [1, 0, 1, 2], "out_channels": 7, "block": 4}),
            Sample((((2, 2, 9, 5), "float32"), ((36, 1, 2, 8), "float32")),
                   {"m": 4, "pads": [1, 1, 0, 1], "out_channels": 5, "block": 4}),
            Sample((((1, 2, 6, 7, 4), "float32"), ((36, 1, 8, 16), "float32"), ((3, 4), "float32")),
                   {"m": 4, "pads": [1, 1, 1, 1], "out_channels": 10, "block": 4}),
            Sample((((1, 3, 5, 5, 2), "float32"), ((16, 3, 5, 2), "float32")),
                   {"m": 2, "pads": [1, 1, 1, 1], "out_channels": 5, "block": 8}),
        ))


# ---- im2col ----

def _im2col_weight_type(w: TensorType, *, mr) -> list[TensorType]:
    o, c, kh, kw = _conv2d_weight(w)
    if mr < 1:
        raise ShapeError(f"mr must be positive, got {mr}")
    return [TensorType(im2col.weight_matrix_shape(o, c * kh * kw, mr), w.dtype)]


def _weight_of(wmat: TensorType, x: TensorType, out_channels, kernel_shape) -> TensorType:
    if len(wmat.shape) != 3 or len(x.shape) != 4:
        raise ShapeError(f"expected x (N, C, H, W) and a weight matrix (O / mr, C*KH*KW, mr), got {x.shape} and "
                         f"{wmat.shape}")
    panels, depth, mr = wmat.shape
    kh, kw = kernel_shape
    if depth != x.shape[1] * kh * kw:
        raise ShapeError(f"a {kh} x {kw} kernel over {x.shape[1]} channels needs a weight matrix of depth "
                         f"{x.shape[1] * kh * kw}, got {wmat.shape}")
    if not (panels - 1) * mr < out_channels <= panels * mr:
        raise ShapeError(f"{out_channels} output channels do not fit {panels} panels of {mr}")
    return TensorType((out_channels, x.shape[1], kh, kw), wmat.dtype)


def _im2col_type(x, wmat, bias=None, *, out_channels, kernel_shape, strides, pads, dilations):
    weight = _weight_of(wmat, x, out_channels, kernel_shape)
    return conv_type(x, weight, bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _im2col_ref(x, wmat, bias=None, *, out_channels, kernel_shape, strides, pads, dilations):
    panels, depth, mr = wmat.shape
    w = wmat.transpose(0, 2, 1).reshape(panels * mr, depth)[:out_channels]
    w = w.reshape(out_channels, x.shape[1], *kernel_shape)
    return conv_ref(x, w, bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _im2col_te(x, wmat, bias=None, *, out_channels, kernel_shape, strides, pads, dilations):
    stride, pad_pairs, dilation = window_attrs("im2col_conv", 2, strides, pads, dilations)
    return im2col.im2col_conv2d_packed(x, wmat, out_channels, kernel_shape, stride, pad_pairs, dilation, bias=bias,
                                       name="conv")


declare("im2col_weight", kind=INJECTIVE, attrs={"mr": 6}, infer=_im2col_weight_type,
        reference=lambda w, *, mr: im2col.weight_matrix_numpy(w, mr),
        compute=lambda w, *, mr: im2col.weight_matrix(w, mr, name="wmat"),
        samples=(Sample((((7, 2, 3, 2), "float32"),), {"mr": 3}),))
declare("im2col_conv", kind=OUT_FUSABLE, num_inputs=(2, 3),
        attrs={"out_channels": None, "kernel_shape": None, "strides": None, "pads": None, "dilations": None},
        infer=_im2col_type, reference=_im2col_ref, compute=_im2col_te, samples=(
            Sample((((1, 3, 9, 8), "float32"), ((2, 27, 4), "float32"), ((7,), "float32")),
                   {"out_channels": 7, "kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((2, 4, 11, 7), "float32"), ((1, 40, 5), "float32")),
                   {"out_channels": 5, "kernel_shape": [5, 2], "pads": [2, 1, 2, 0], "dilations": [1, 2]}),
        ))
