"""The strides, dilations and pads of ONNX's windowed ops (Conv, the pools, LpPool, ConvInteger, QLinearConv):
ONNX's optional attributes with their defaults, and auto_pad resolved into explicit pads."""

from __future__ import annotations


def spatial_attrs(x, kernel, strides, dilations, pads, auto_pad):
    """(strides, dilations, pads) of a window of extents `kernel` over the spatial axes of `x` (NCHW...)."""
    nd = len(kernel)
    strides = tuple(strides) if strides else (1,) * nd
    dilations = tuple(dilations) if dilations else (1,) * nd
    auto = _pads_for_auto(auto_pad, x.shape[2:], kernel, strides, dilations)
    pads = auto if auto is not None else (tuple(pads) if pads else (0,) * (2 * nd))
    return strides, dilations, pads


def _pads_for_auto(auto_pad, sizes, kernel, strides, dilations):
    """Explicit ONNX pads (begins then ends) for auto_pad SAME_UPPER / SAME_LOWER / VALID."""
    if auto_pad in ("NOTSET", "VALID"):
        return None if auto_pad == "NOTSET" else (0,) * (2 * len(sizes))
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-n // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return tuple(begins + ends)
