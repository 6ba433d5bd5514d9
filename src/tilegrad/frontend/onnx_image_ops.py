"""ONNX's image ops mapped onto the registry: GridSample, RoiAlign and DeformConv (the `grid_sample`, `roi_align`
and `deform_conv` ops), LpPool (a depthwise convolution of |x|^p with a window of ones), and the ops whose shapes
come from inputs that must be constants: CenterCropPad (a slice and a pad), AffineGrid (a matmul of the base grid
with theta) and Col2Im (a transposed convolution with one-hot filters). The reader (`onnx.py`) imports this module,
which registers them."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op
from .onnx_spatial_attrs import spatial_attrs

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
    kernel = tuple(int(k) for k in kernel_shape)
    strides, dilations, pads = spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
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


def _ints(v, what: str, name) -> tuple[int, ...]:
    return tuple(int(d) for d in np.ravel(constant_input(v, what, name)))


@onnx_op("CenterCropPad")
def _center_crop_pad(b: B, name, x, shape, *, axes=None):
    """Each axis cropped or zero-padded to its target extent around its centre (the odd element goes to the
    end)."""
    rank = len(x.shape)
    target = _ints(shape, "shape", name)
    chosen = [a % rank for a in axes] if axes is not None else list(range(rank))
    if len(chosen) != len(target) or min(target, default=1) < 1:
        raise ShapeError(f"node {name!r}: CenterCropPad shape {list(target)} does not fit axes {chosen}")
    starts, ends, crop_axes, pads = [], [], [], [0] * (2 * rank)
    for a, t in zip(chosen, target):
        n = x.shape[a]
        if t < n:
            crop_axes.append(a)
            starts.append((n - t) // 2)
            ends.append((n - t) // 2 + t)
        elif t > n:
            pads[a], pads[rank + a] = (t - n) // 2, t - n - (t - n) // 2
    out = b.op("slice", x, name=f"{name}_crop", starts=tuple(starts), ends=tuple(ends),
               axes=tuple(crop_axes)) if crop_axes else x
    return b.op("pad", out, name=name, pads=tuple(pads), value=0.0, mode="constant") if any(pads) else out


def _base_coordinates(n: int, align_corners: int) -> np.ndarray:
    """The n positions of an axis in [-1, 1]: pixel centres, or from -1 to 1 with align_corners."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n)
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


@onnx_op("AffineGrid")
def _affine_grid(b: B, name, theta, size, *, align_corners=0):
    """theta applied to the base grid's homogeneous points (x, y[, z], 1): a matmul of the constant points by
    theta's transpose."""
    dims = _ints(size, "size", name)
    nd = len(dims) - 2
    if nd not in (2, 3) or theta.shape != (dims[0], nd, nd + 1):
        raise ShapeError(f"node {name!r}: AffineGrid needs a size (N, C, [D,] H, W) and theta (N, {nd}, {nd + 1}), "
                         f"got size {list(dims)} and theta {list(theta.shape)}")
    spatial = dims[2:]
    if align_corners and 1 in spatial:
        raise UnsupportedFeatureError(f"node {name!r}: AffineGrid with align_corners=1 over an axis of one pixel is "
                                      f"not supported: ONNX's reference puts that pixel at -1, ONNX Runtime at 1")
    axes = np.meshgrid(*(_base_coordinates(n, align_corners) for n in spatial), indexing="ij")
    points = np.stack([*axes[::-1], np.ones(spatial)], axis=-1).reshape(-1, nd + 1)
    base = b.const(points.astype(theta.dtype), f"{name}_base")
    turned = b.op("transpose", theta, name=f"{name}_theta_t", perm=(0, 2, 1))
    moved = b.op("matmul", base, turned, name=f"{name}_points")
    return b.op("reshape", moved, name=name, shape=(dims[0], *spatial, nd))


@onnx_op("Col2Im")
def _col2im(b: B, name, x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    """The sum of each column's block into the image: a transposed convolution over the grid of block
    positions whose filters, one group per channel, put column row k at block position k."""
    image, block = _ints(image_shape, "image_shape", name), _ints(block_shape, "block_shape", name)
    nd = len(image)
    dilations = tuple(dilations) if dilations else (1,) * nd
    pads = tuple(pads) if pads else (0,) * (2 * nd)
    strides = tuple(strides) if strides else (1,) * nd
    taps = int(np.prod(block))
    positions = [(n + pads[d] + pads[nd + d] - dilations[d] * (k - 1) - 1) // strides[d] + 1
                 for d, (n, k) in enumerate(zip(image, block))]
    if len(x.shape) != 3 or x.shape[1] % taps or min(positions) < 1 or x.shape[2] != int(np.prod(positions)):
        raise ShapeError(f"node {name!r}: Col2Im input of shape {list(x.shape)} does not hold blocks {list(block)} "
                         f"of an image {list(image)} (expected (N, C * {taps}, {int(np.prod(positions))}))")
    channels = x.shape[1] // taps
    one_hot = np.eye(taps, dtype=x.dtype).reshape(taps, 1, *block)
    filters = b.const(np.tile(one_hot, (channels, 1, *[1] * nd)), f"{name}_filters")
    grid = b.op("reshape", x, name=f"{name}_grid", shape=(x.shape[0], x.shape[1], *positions))
    reach = [(p - 1) * s - pads[d] - pads[nd + d] + dilations[d] * (k - 1) + 1
             for d, (p, s, k) in enumerate(zip(positions, strides, block))]
    return b.op("conv_transpose", grid, filters, name=name, strides=strides, pads=pads, dilations=dilations,
                group=channels, output_padding=tuple(n - r for n, r in zip(image, reach)))


@onnx_op("DeformConv")
def _deform_conv(b: B, name, x, w, offset, bias=None, mask=None, *, dilations=None, group=1, kernel_shape=None,
                 offset_group=1, pads=None, strides=None):
    """The `deform_conv` op (2-D), with a bias of zeros and a mask of ones when they are absent."""
    if len(x.shape) != 4 or (kernel_shape is not None and tuple(kernel_shape) != tuple(w.shape[2:])):
        raise UnsupportedFeatureError(f"node {name!r}: DeformConv over {len(x.shape) - 2} spatial axes or with a "
                                      f"kernel_shape other than the weight's is not supported (2-D only)")
    if bias is None:
        bias = b.const(np.zeros(w.shape[0], x.dtype), f"{name}_bias")
    if mask is None:
        shape = list(offset.shape)
        shape[1] //= 2
        mask = b.const(np.ones(shape, x.dtype), f"{name}_mask")
    return b.op("deform_conv", x, w, offset, bias, mask, name=name, strides=tuple(strides or (1, 1)),
                pads=tuple(pads or (0, 0, 0, 0)), dilations=tuple(dilations or (1, 1)), group=int(group),
                offset_group=int(offset_group))
