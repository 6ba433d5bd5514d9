"""A transposed convolution rewritten as a direct one, for the frontends that meet one with constant weights.

The direct convolution gets the fast kernels (the conv_algorithm pass picks Winograd or im2col for it), which the
transposed form has no schedules for. The ONNX and PyTorch frontends share the rewrite.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import GraphBuilder, Value


def transposed_as_conv(b: GraphBuilder, name: str, x: Value, w: Value, bias: Value | None, strides, pads, dilations,
                       output_padding, group: int) -> Value | None:
    """A 2-D transposed convolution (group 1, constant float32 weights) as a direct one: spread the input by the
    stride, pad it by dilation * (kernel - 1) - pad (plus output_padding after), and convolve with the weights
    flipped and their channel axes swapped (a constant, so computed here). `pads` are ONNX's (all begins, then all
    ends). None when the rewrite does not apply or a pad would be negative."""
    if len(x.shape) != 4 or group != 1 or not w.is_constant or x.dtype != "float32":
        return None
    kernel = w.shape[2:]
    strides = tuple(strides) if strides else (1, 1)
    dilations = tuple(dilations) if dilations else (1, 1)
    pads = tuple(pads) if pads else (0,) * 4
    extra = tuple(output_padding) if output_padding else (0, 0)
    begins = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, pads[:2])]
    ends = [d * (k - 1) - p + e for d, k, p, e in zip(dilations, kernel, pads[2:], extra)]
    if min(begins + ends) < 0:
        return None
    flipped = b.const(np.ascontiguousarray(w.data.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]), f"{name}_flipped")
    spread = b.op("dilate", x, name=f"{name}_spread", strides=strides) if max(strides) > 1 else x
    inputs = (spread, flipped) if bias is None else (spread, flipped, bias)
    return b.op("conv", *inputs, name=name, strides=(1, 1), pads=(*begins, *ends), dilations=dilations, group=1)
