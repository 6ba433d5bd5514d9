"""Convolution with packed weights: `conv_weight_pack` lays a constant weight out in blocks of output channels
(folded ahead of time when the weight is a constant), and `blocked_conv` convolves with it, vectorised across each
block (te.nn.blocked_conv2d). The ONNX frontend lowers 2-D, ungrouped Conv with constant weights this way."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te import nn
from ..registry import OUT_FUSABLE, INJECTIVE, Sample, TensorType, declare
from .nn import _conv_ref, _conv_type, _window


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
    return _conv_type(x, weight, bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _blocked_ref(x, wpack, bias=None, *, out_channels, strides, pads, dilations):
    return _conv_ref(x, _unpack(wpack, out_channels), bias, strides=strides, pads=pads, dilations=dilations, group=1)


def _blocked_te(x, wpack, bias=None, *, out_channels, strides, pads, dilations):
    win = _window(2, strides, pads, dilations)
    return nn.blocked_conv2d(x, wpack, out_channels, win.strides, win.pads, win.dilations, bias=bias, name="conv")


declare("conv_weight_pack", kind=INJECTIVE, attrs={"block": 16}, infer=_pack_type, reference=_pack_ref,
        compute=lambda w, block: nn.pack_conv_weight(w, block, name="wpack"),
        samples=(Sample((((10, 3, 3, 3), "float32"),), {"block": 4}),))
declare("blocked_conv", kind=OUT_FUSABLE, num_inputs=(2, 3),
        attrs={"out_channels": None, "strides": None, "pads": None, "dilations": None},
        infer=_blocked_type, reference=_blocked_ref, compute=_blocked_te, samples=(
            Sample((((1, 3, 9, 8), "float32"), ((3, 3, 3, 3, 4), "float32"), ((10,), "float32")),
                   {"out_channels": 10, "strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((2, 5, 7, 7), "float32"), ((2, 5, 1, 1, 8), "float32")), {"out_channels": 16}),
        ))
