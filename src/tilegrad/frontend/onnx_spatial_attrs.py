"""The strides, dilations and pads of ONNX's windowed ops (Conv, the pools, LpPool, ConvInteger, QLinearConv):
ONNX's optional attributes with their defaults, checked against the window's spatial axes, and auto_pad resolved
into explicit pads."""

from __future__ import annotations

from .onnx_file import ModelFormatError


def spatial_attrs(x, kernel, strides, dilations, pads, auto_pad):
    """(strides, dilations, pads) of a window of extents `kernel` over the spatial axes of `x` (NCHW...); an
    attribute given (None: absent) must hold one value per spatial axis (pads two), as ONNX Runtime requires:
    `strides=[]` is not the default."""
    nd = len(kernel)
    if nd != len(x.shape) - 2:
        raise ModelFormatError(f"kernel_shape {list(kernel)} has {nd} axes, but the input of rank {len(x.shape)} "
                               f"has {len(x.shape) - 2} spatial axes")
    strides = _given("strides", strides, nd, 1, (1,) * nd)
    dilations = _given("dilations", dilations, nd, 1, (1,) * nd)
    auto = _pads_for_auto(auto_pad, x.shape[2:], kernel, strides, dilations)
    pads = auto if auto is not None else _given("pads", pads, 2 * nd, 0, (0,) * (2 * nd))
    return strides, dilations, pads


def _given(name: str, values, count: int, least: int, default: tuple) -> tuple:
    if values is None:
        return default
    values = tuple(int(v) for v in values)
    if len(values) != count:
        axes = count // 2 if name == "pads" else count
        raise ModelFormatError(f"{name} {list(values)} has {len(values)} values; a window over {axes} spatial "
                               f"axes takes {count}")
    if any(v < least for v in values):
        raise ModelFormatError(f"{name} {list(values)} holds a value below {least}")
    return values


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
