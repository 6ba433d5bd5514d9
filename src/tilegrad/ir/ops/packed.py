"""Convolution with packed weights: `conv_weight_pack` lays a constant weight out in blocks of output channels
(folded ahead of time when the weight is a constant), and `blocked_conv` convolves with it, vectorised across each
block (te.nn.blocked_conv2d). The ONNX frontend lowers 2-D, ungrouped Conv with constant weights this way."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import nn
from ...te.nn.conv_groups import BlockGroups
from ..registry import OUT_FUSABLE, INJECTIVE, Sample, TensorType, declare
from .windows import conv_ref, conv_type, window_attrs


def _block_groups(in_channels: int, out_channels: int, group: int, block: int) -> BlockGroups | None:
    """The blocking of a grouped convolution (None for group 1); a ShapeError where blocks and groups do not
    line up."""
    if group == 1:
        return None
    groups = BlockGroups.of(in_channels, out_channels, group, block)
    if groups is None:
        raise ShapeError(f"{out_channels} output channels in {group} groups do not line up with blocks of {block}")
    return groups


def _pack_type(w: TensorType, *, block: int, group: int) -> list[TensorType]:
    if len(w.shape) != 4:
        raise ShapeError(f"expected a weight (O, C, KH, KW), got {w.shape}")
    if block < 1:
        raise ShapeError(f"block must be positive, got {block}")
    o, c, kh, kw = w.shape
    groups = _block_groups(c * group, o, group, block)
    return [TensorType((-(-o // block), c if groups is None else groups.span, kh, kw, block), w.dtype)]


def _pack_ref(w, *, block, group):
    o = w.shape[0]
    groups = _block_groups(w.shape[1] * group, o, group, block)
    if groups is not None:
        return groups.pack(w)
    padded = np.zeros((-(-o // block) * block, *w.shape[1:]), w.dtype)
    padded[:o] = w
    return np.ascontiguousarray(padded.reshape(-1, block, *w.shape[1:]).transpose(0, 2, 3, 4, 1))


def _pack_te(w, *, block, group):
    groups = _block_groups(w.shape[1] * group, w.shape[0], group, block)
    return nn.pack_conv_weight(w, block, name="wpack", groups=groups)


def _unpack(wpack, out_channels):
    blocks, c, kh, kw, block = wpack.shape
    return wpack.transpose(0, 4, 1, 2, 3).reshape(blocks * block, c, kh, kw)[:out_channels]


def _blocked_groups(x, wpack, out_channels: int, group: int) -> BlockGroups | None:
    return _block_groups(x.shape[1], out_channels, group, wpack.shape[4])


def _blocked_type(x: TensorType, wpack: TensorType, bias: TensorType | None = None, *, out_channels, strides, pads,
                  dilations, group):
    if len(wpack.shape) != 5 or len(x.shape) != 4:
        raise ShapeError(f"expected x (N, C, H, W) and packed weights (O / b, C, KH, KW, b), got {x.shape} and "
                         f"{wpack.shape}")
    blocks, c, kh, kw, block = wpack.shape
    if not (blocks - 1) * block < out_channels <= blocks * block:
        raise ShapeError(f"{out_channels} output channels do not fit {blocks} blocks of {block}")
    groups = _blocked_groups(x, wpack, out_channels, group)
    if groups is not None and c != groups.span:
        raise ShapeError(f"packed grouped weights read {c} input channels per block, the grouping {groups.span}")
    weight = TensorType((out_channels, c if groups is None else groups.in_per_group, kh, kw), wpack.dtype)
    return conv_type(x, weight, bias, strides=strides, pads=pads, dilations=dilations, group=group)


def _blocked_ref(x, wpack, bias=None, *, out_channels, strides, pads, dilations, group):
    """The convolution by the weights the kernel multiplies: grouped, every weight of a block's span (a packed
    weight is zero outside the lane's group)."""
    groups = _blocked_groups(x, wpack, out_channels, group)
    weight = _unpack(wpack, out_channels) if groups is None else groups.dense(wpack, x.shape[1])[:out_channels]
    return conv_ref(x, weight, bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _blocked_te(x, wpack, bias=None, *, out_channels, strides, pads, dilations, group):
    stride, pad_pairs, dilation = window_attrs("blocked_conv", 2, strides, pads, dilations)
    return nn.blocked_conv2d(x, wpack, out_channels, stride, pad_pairs, dilation, bias=bias, name="conv",
                             groups=_blocked_groups(x, wpack, out_channels, group))


def _blocked_flops(ins, outs, **_) -> int:
    """2 x the multiply-adds: a dot product of C * KH * KW per output element (packed w is (O / b, C, KH, KW, b);
    the compute also multiplies the zero weights of the padded channels, and of a grouped block's other groups)."""
    return 2 * math.prod(outs[0].shape) * math.prod(ins[1].shape[1:4])


declare("conv_weight_pack", kind=INJECTIVE, attrs={"block": 16, "group": 1}, infer=_pack_type, reference=_pack_ref,
        compute=_pack_te, samples=(Sample((((10, 3, 3, 3), "float32"),), {"block": 4}),
                                   Sample((((16, 2, 3, 3), "float32"),), {"block": 8, "group": 8}),
                                   Sample((((16, 3, 1, 2), "float32"),), {"block": 4, "group": 2})))
declare("blocked_conv", kind=OUT_FUSABLE, num_inputs=(2, 3),
        attrs={"out_channels": None, "strides": None, "pads": None, "dilations": None, "group": 1},
        infer=_blocked_type, reference=_blocked_ref, compute=_blocked_te, flops=_blocked_flops, samples=(
            Sample((((1, 3, 9, 8), "float32"), ((3, 3, 3, 3, 4), "float32"), ((10,), "float32")),
                   {"out_channels": 10, "strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((2, 5, 7, 7), "float32"), ((2, 5, 1, 1, 8), "float32")), {"out_channels": 16}),
            Sample((((1, 16, 7, 6), "float32"), ((2, 8, 3, 3, 8), "float32"), ((16,), "float32")),
                   {"out_channels": 16, "pads": [1, 1, 1, 1], "group": 8}),
            Sample((((1, 12, 5, 5), "float32"), ((4, 6, 3, 3, 4), "float32")),
                   {"out_channels": 16, "strides": [2, 2], "group": 2}),
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
