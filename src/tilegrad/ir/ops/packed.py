"""Convolution with packed weights: `conv_weight_pack` lays a constant weight out in blocks of output channels
(folded ahead of time when the weight is a constant), and `blocked_conv` convolves with it, vectorised across each
block (te.nn.blocked_conv2d). The ONNX frontend lowers 2-D, ungrouped Conv with constant weights this way."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import nn
from ..registry import OUT_FUSABLE, INJECTIVE, Sample, TensorType, declare
from .windows import conv_ref, conv_type, window_attrs


def _pack_type(w: TensorType, *, block: int) -> list[TensorType]:
    if len(w.shape) != 4:
        raise ShapeError(f"expected a weight (O, C, KH, KW), got {w.shape}")
    if block < 1:
        raise ShapeError(f"block must be positive, got {block}")
    o, c, kh, kw = w.shape
    return [TensorType((-(-o // block), c, kh, kw, block), w.dtype)]


def _pack_ref(w, *, block):
    o = w.shape[0]
    padded = np.zeros((-(-o // block) * block, *w.shape[1:]), w.dtype)
    padded[:o] = w
    return np.ascontiguousarray(padded.reshape(-1, block, *w.shape[1:]).transpose(0, 2, 3, 4, 1))


def _unpack(wpack, out_channels):
    blocks, c, kh, kw, block = wpack.shape
    return wpack.transpose(0, 4, 1, 2, 3).reshape(blocks * block, c, kh, kw)[:out_channels]


def _blocked_type(x: TensorType, wpack: TensorType, bias: TensorType | None = None, *, out_channels, strides, pads,
                  dilations):
    if len(wpack.shape) != 5:
        raise ShapeError(f"expected packed weights (O / b, C, KH, KW, b), got {wpack.shape}")
    blocks, c, kh, kw, block = wpack.shape
    if not (blocks - 1) * block < out_channels <= blocks * block:
        raise ShapeError(f"{out_channels} output channels do not fit {blocks} blocks of {block}")
    weight = TensorType((out_channels, c, kh, kw), wpack.dtype)
    return conv_type(x, weight, bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _blocked_ref(x, wpack, bias=None, *, out_channels, strides, pads, dilations):
    return conv_ref(x, _unpack(wpack, out_channels), bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _blocked_te(x, wpack, bias=None, *, out_channels, strides, pads, dilations):
    stride, pad_pairs, dilation = window_attrs("blocked_conv", 2, strides, pads, dilations)
    return nn.blocked_conv2d(x, wpack, out_channels, stride, pad_pairs, dilation, bias=bias, name="conv")


def _blocked_flops(ins, outs, **_) -> int:
    """2 x the multiply-adds: a dot product of C * KH * KW per output element (packed w is (O / b, C, KH, KW, b);
    the compute also multiplies the zero weights of the padded channels)."""
    return 2 * math.prod(outs[0].shape) * math.prod(ins[1].shape[1:4])


declare("conv_weight_pack", kind=INJECTIVE, attrs={"block": 16}, infer=_pack_type, reference=_pack_ref,
        compute=lambda w, block: nn.pack_conv_weight(w, block, name="wpack"),
        samples=(Sample((((10, 3, 3, 3), "float32"),), {"block": 4}),))
declare("blocked_conv", kind=OUT_FUSABLE, num_inputs=(2, 3),
        attrs={"out_channels": None, "strides": None, "pads": None, "dilations": None},
        infer=_blocked_type, reference=_blocked_ref, compute=_blocked_te, flops=_blocked_flops, samples=(
            Sample((((1, 3, 9, 8), "float32"), ((3, 3, 3, 3, 4), "float32"), ((10,), "float32")),
                   {"out_channels": 10, "strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((2, 5, 7, 7), "float32"), ((2, 5, 1, 1, 8), "float32")), {"out_channels": 16}),
        ))


def _rhs_pack_type(b: TensorType, *, transpose: int, nr: int) -> list[TensorType]:
    if len(b.shape) != 2:
        raise ShapeError(f"expected a 2-D matrix, got {b.shape}")
    if nr < 1:
        raise ShapeError(f"nr must be positive, got {nr}")
    n, k = b.shape if transpose else b.shape[::-1]
    return [TensorType((-(-n // nr), k, nr), b.dtype)]


def _rhs_pack_ref(b, *, transpose, nr):
    cols = b if transpose else b.T  # (N, K)
    n = cols.shape[0]
    padded = np.zeros((-(-n // nr) * nr, cols.shape[1]), b.dtype)
    padded[:n] = cols
    return np.ascontiguousarray(padded.reshape(-1, nr, cols.shape[1]).transpose(0, 2, 1))


def _panel_type(a: TensorType, bpack: TensorType, bias: TensorType | None = None, *, n, mr, alpha, beta):
    if len(a.shape) != 2 or len(bpack.shape) != 3:
        raise ShapeError(f"expected A (M, K) and packed B (N / nr, K, nr), got {a.shape} and {bpack.shape}")
    if a.shape[1] != bpack.shape[1]:
        raise ShapeError(f"A has {a.shape[1]} columns but packed B has {bpack.shape[1]} rows")
    if a.dtype != bpack.dtype:
        raise ShapeError(f"operands have different dtypes {a.dtype} and {bpack.dtype}")
    if bias is not None and bias.shape not in ((n,), (1, n), (1,), ()):
        raise ShapeError(f"the bias must broadcast along the {n} columns, got shape {bias.shape}")
    return [TensorType((a.shape[0], n), a.dtype)]


def _panel_ref(a, bpack, bias=None, *, n, mr, alpha, beta):
    b = bpack.transpose(0, 2, 1).reshape(-1, bpack.shape[1])[:n]  # (N, K)
    out = alpha * (a.astype(np.float64) @ b.T.astype(np.float64))
    if bias is not None:
        out = out + beta * bias.astype(np.float64)
    return out.astype(a.dtype)


def _panel_flops(ins, outs, **_) -> int:
    """2 x the multiply-adds of A (M, K) times B (K, N), whatever the panels' padding."""
    return 2 * math.prod(outs[0].shape) * ins[0].shape[1]


declare("matmul_weight_pack", kind=INJECTIVE, attrs={"transpose": 0, "nr": 16}, infer=_rhs_pack_type,
        reference=_rhs_pack_ref, compute=lambda b, transpose, nr: nn.pack_matmul_rhs(b, bool(transpose), nr, "bpack"),
        samples=(Sample((((7, 10), "float32"),), {"nr": 4}), Sample((((10, 7), "float32"),), {"transpose": 1})))
declare("panel_matmul", kind=OUT_FUSABLE, num_inputs=(2, 3), attrs={"n": None, "mr": 6, "alpha": 1.0, "beta": 1.0},
        infer=_panel_type, reference=_panel_ref, flops=_panel_flops, rows=lambda a, **_: a[:1],
        compute=lambda a, bpack, bias=None, *, n, mr, alpha, beta: nn.panel_matmul(
            a, bpack, n, mr=mr, bias=bias, alpha=alpha, beta=beta, name="gemm"),
        samples=(Sample((((13, 7), "float32"), ((3, 7, 4), "float32"), ((10,), "float32")),
                        {"n": 10, "alpha": 0.5, "beta": 2.0}),
                 Sample((((5, 9), "float32"), ((1, 9, 16), "float32")), {"n": 16})))
