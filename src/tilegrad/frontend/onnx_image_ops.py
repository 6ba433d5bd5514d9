"""ONNX's image ops mapped onto the registry: GridSample (the `grid_sample` op), LpPool (a depthwise convolution
of |x|^p with a window of ones), and the ops whose shapes come from constant inputs. Importing `onnx_ops`
registers them."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedFeatureError
from .onnx import OnnxBuilder as B
from .onnx import onnx_op

_GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}  # GridSample-16's names for linear and cubic


@onnx_op("GridSample")
def _grid_sample(b: B, name, x, grid, *, align_corners=0, mode="linear", padding_mode="zeros"):
    return b.op("grid_sample", x, grid, name=name, mode=_GRID_MODES.get(mode, mode), padding_mode=padding_mode,
                align_corners=int(align_corners))


def _power(b: B, name, x, p: float):
    """x^p for p = 1, 2 or a general p (through pow), in x's dtype."""
    if p == 1:
        return x
    if p == 2:
        return b.op("mul", x, x, name=name)
    if p == 0.5:
        return b.op("sqrt", x, name=name)
    return b.op("pow", x, b.const(np.asarray(p, x.dtype), f"{name}_p"), name=name)


@onnx_op("LpPool")
def _lp_pool(b: B, name, x, *, kernel_shape, p=2, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
             strides=None):
    """(sum over the window of |x|^p)^(1/p): a depthwise convolution of |x|^p with a window of ones, whose zero
    padding adds nothing to the sum."""
    from .onnx_ops import _spatial_attrs

    kernel = tuple(int(k) for k in kernel_shape)
    strides, dilations, pads = _spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
    if ceil_mode:
        nd = len(kernel)
        reach = [x.shape[2 + d] + pads[d] + pads[nd + d] - (kernel[d] - 1) * dilations[d] - 1 for d in range(nd)]
        if any(r % s for r, s in zip(reach, strides)):
            raise UnsupportedFeatureError(f"node {name!r}: LpPool with ceil_mode=1 where it adds a partial window "
                                          f"is not supported")
    channels = x.shape[1]
    ones = b.const(np.ones((channels, 1, *kernel), x.dtype), f"{name}_window")
    powered = _power(b, f"{name}_power", b.op("abs", x, name=f"{name}_abs"), float(p))
    total = b.op("conv", powered, ones, name=f"{name}_sum", strides=strides, pads=pads, dilations=dilations,
                 group=channels)
    return total if float(p) == 1 else _power(b, name, total, 1 / float(p))


@onnx_op("RoiAlign")
def _roi_align(b: B, name, x, rois, batch_indices, *, coordinate_transformation_mode="half_pixel", mode="avg",
               output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0):
    """RoiAlign-10 has no coordinate_transformation_mode: its coordinates are output_half_pixel's."""
    if b.opset < 16:
        coordinate_transformation_mode = "output_half_pixel"
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise UnsupportedFeatureError(f"node {name!r}: RoiAlign coordinate_transformation_mode "
                                      f"{coordinate_transformation_mode!r} is not supported")
    if sampling_ratio < 1:
        raise UnsupportedFeatureError(f"node {name!r}: RoiAlign with sampling_ratio={sampling_ratio} (adaptive: the "
                                      f"sample count depends on each region's size, a run-time value) is not "
                                      f"supported; give a positive sampling_ratio")
    return b.op("roi_align", x, rois, batch_indices, name=name, mode=mode, output_height=int(output_height),
                output_width=int(output_width), sampling_ratio=int(sampling_ratio),
                spatial_scale=float(spatial_scale), half_pixel=int(coordinate_transformation_mode == "half_pixel"))
