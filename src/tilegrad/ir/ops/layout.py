"""The blocked channel layout NCHW[x]c (te/nn/nchwc.py): the transforms into and out of it and between two block
sizes, and the convolutions and pools that work in it. The `layout` pass rewrites chains of convolutions into these
ops; element-wise ops need no variant, since they work on the 5-D tensors as they are.

A blocked tensor is (N, ceil(C / x), H, W, x) with the channels past C zero (the transforms and convolutions
keep them zero; an element-wise op may not, so a convolution's packed weights are zero there). Weights and biases
come packed by the pass: a convolution's as (O / x, C', KH, KW, x) with C' the input channels as the input holds
them (whole blocks for a blocked input), a depthwise one's as (C / x, KH, KW, x), a bias as (O / x, x). The
references unblock, run the NCHW op's reference on every lane, padding included, and block the result again.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te.nn import nchwc
from ...te.nn.conv_groups import BlockGroups
from ...te.nn.lane_groups import unpack_lane_groups
from ..registry import INJECTIVE, OUT_FUSABLE, REDUCTION, Sample, TensorType, declare
from .operands import float_dtype
from .windows import (
    avg_pool_ref, avg_pool_type, conv_ref, conv_type, max_pool_ref, max_pool_type, pool_window, window_attrs,
)


def block_array(a: np.ndarray, block: int) -> np.ndarray:
    """NumPy (N, C, H, W) as (N, ceil(C / block), H, W, block), zero-padded."""
    n, c, *spatial = a.shape
    blocks = -(-c // block)
    padded = np.zeros((n, blocks * block, *spatial), a.dtype)
    padded[:, :c] = a
    return np.ascontiguousarray(padded.reshape(n, blocks, block, *spatial).transpose(0, 1, 3, 4, 2))


def unblock_array(a: np.ndarray, channels: int | None = None) -> np.ndarray:
    """NumPy (N, C / b, H, W, b) as (N, C, H, W), keeping the first `channels` (all lanes by default)."""
    n, blocks, h, w, block = a.shape
    return np.ascontiguousarray(a.transpose(0, 1, 4, 2, 3).reshape(n, blocks * block, h, w)[:, :channels])


def _check_blocked(x: TensorType, what: str = "x") -> None:
    if len(x.shape) != 5:
        raise ShapeError(f"{what} must be blocked, (N, C / b, H, W, b), got shape {x.shape}")


def _nchw(x: TensorType) -> TensorType:
    """The NCHW type holding every lane of blocked `x`."""
    n, blocks, h, w, block = x.shape
    return TensorType((n, blocks * block, h, w), x.dtype)


def _blocked(t: TensorType, block: int) -> TensorType:
    n, c, h, w = t.shape
    return TensorType((n, -(-c // block), h, w, block), t.dtype)


# ---- the transforms ----

def _to_blocked_type(x: TensorType, *, block: int) -> list[TensorType]:
    if len(x.shape) != 4:
        raise ShapeError(f"x must be (N, C, H, W), got shape {x.shape}")
    if block < 1:
        raise ShapeError(f"block must be positive, got {block}")
    return [_blocked(x, block)]


def _from_blocked_type(x: TensorType, *, channels: int) -> list[TensorType]:
    _check_blocked(x)
    n, blocks, h, w, block = x.shape
    if not (blocks - 1) * block < channels <= blocks * block:
        raise ShapeError(f"{channels} channels do not fill the last of {blocks} blocks of {block}")
    return [TensorType((n, channels, h, w), x.dtype)]


declare("layout_to_blocked", kind=INJECTIVE, attrs={"block": 8}, infer=_to_blocked_type,
        reference=lambda x, *, block: block_array(x, block),
        compute=lambda x, *, block: nchwc.to_blocked(x, block),
        samples=(Sample((((2, 11, 3, 5), "float32"),), {"block": 4}), Sample((((1, 16, 2, 3), "float32"),))))
declare("layout_from_blocked", kind=INJECTIVE, attrs={"channels": None}, infer=_from_blocked_type,
        reference=lambda x, *, channels: unblock_array(x, channels),
        compute=lambda x, *, channels: nchwc.from_blocked(x, channels),
        samples=(Sample((((2, 3, 3, 5, 4), "float32"),), {"channels": 11}),))



def _reblock_type(x: TensorType, *, block: int, channels: int) -> list[TensorType]:
    (nchw,) = _from_blocked_type(x, channels=channels)
    return _to_blocked_type(nchw, block=block)


declare("layout_reblock", kind=INJECTIVE, attrs={"block": 8, "channels": None}, infer=_reblock_type,
        reference=lambda x, *, block, channels: block_array(unblock_array(x, channels), block),
        compute=lambda x, *, block, channels: nchwc.reblock(x, block, channels),
        samples=(Sample((((2, 3, 3, 5, 4), "float32"),), {"block": 8, "channels": 11}),
                 Sample((((1, 1, 2, 3, 16), "float32"),), {"block": 8, "channels": 16}),
                 Sample((((1, 2, 4, 3, 8), "float32"),), {"block": 16, "channels": 12})))

# ---- convolutions ----

def _weights(wpack: np.ndarray) -> np.ndarray:
    """Packed (O / b, C, KH, KW, b) as OIHW over every output lane."""
    blocks, c, kh, kw, block = wpack.shape
    return wpack.transpose(0, 4, 1, 2, 3).reshape(blocks * block, c, kh, kw)


def _nchwc_groups(wpack, group_channels) -> BlockGroups | None:
    """A grouped `conv_nchwc`'s blocking: `group_channels` is (input, output) channels per group, or None."""
    if group_channels is None:
        return None
    in_per_group, out_per_group = group_channels
    return BlockGroups(in_per_group, out_per_group, wpack.shape[4])


def _tap_spans(taps, kernel) -> tuple[tuple[int, int], tuple[int, int]]:
    """A `conv_nchwc`'s `taps` attribute (y0, x0, y1, x1: the weights' taps a region reads, ONNX's order of
    begins then ends) as te's ((y0, y1), (x0, x1)), checked against the weights' `kernel`; all taps when None."""
    if taps is not None and len(taps) != 4:
        raise ShapeError(f"taps must be (y0, x0, y1, x1) inside the kernel {tuple(kernel)}, got {taps!r}")
    return nchwc.tap_spans(None if taps is None else ((taps[0], taps[2]), (taps[1], taps[3])), tuple(kernel))


def _conv_nchwc_type(x, wpack, bias=None, *, strides, pads, dilations, group_channels, taps):
    float_dtype(x, wpack, bias)
    if len(wpack.shape) != 5:
        raise ShapeError(f"expected packed weights (O / b, C, KH, KW, b), got {wpack.shape}")
    blocks, channels, *kernel, block = wpack.shape
    (y0, y1), (x0, x1) = _tap_spans(taps, kernel)
    kh, kw = y1 - y0, x1 - x0
    if len(x.shape) not in (4, 5):
        raise ShapeError(f"x must be blocked (N, C / b, H, W, b) or (N, C, H, W), got shape {x.shape}")
    nchw = _nchw(x) if len(x.shape) == 5 else x
    _check_packed_bias(bias, blocks, block)
    groups = _nchwc_groups(wpack, group_channels)
    if groups is not None:
        if channels != groups.span or len(x.shape) == 5 and not groups.reads_whole_blocks(x.shape[4]):
            raise ShapeError(f"{group_channels} channels per group in blocks of {block} read spans of "
                             f"{groups.span} input channels, which do not fit weights {wpack.shape} and x {x.shape}")
        channels = nchw.shape[1]
    weight = TensorType((blocks * block, channels, kh, kw), wpack.dtype)
    (out,) = conv_type(nchw, weight, strides=strides, pads=pads, dilations=dilations, group=1, crop=True)
    return [_blocked(out, block)]


def _check_packed_bias(bias: TensorType | None, blocks: int, block: int) -> None:
    if bias is not None and bias.shape != (blocks, block):
        raise ShapeError(f"the bias must be packed as ({blocks}, {block}), got {bias.shape}")


def _conv_nchwc_ref(x, wpack, bias=None, *, strides, pads, dilations, group_channels, taps):
    nchw = unblock_array(x) if x.ndim == 5 else x
    flat = None if bias is None else bias.reshape(-1)
    groups = _nchwc_groups(wpack, group_channels)
    weight = _weights(wpack) if groups is None else groups.dense(wpack, nchw.shape[1])
    (y0, y1), (x0, x1) = _tap_spans(taps, wpack.shape[2:4])
    y = conv_ref(nchw, weight[:, :, y0:y1, x0:x1], flat, strides=strides, pads=pads, dilations=dilations, group=1,
                 crop=True)
    return block_array(y, wpack.shape[4])


def _conv_nchwc_te(x, wpack, bias=None, *, strides, pads, dilations, group_channels, taps):
    stride, pad_pairs, dilation = window_attrs("conv_nchwc", 2, strides, pads, dilations, crop=True)
    return nchwc.conv2d_nchwc(x, wpack, stride, pad_pairs, dilation, bias=bias, name="conv_nchwc",
                              groups=_nchwc_groups(wpack, group_channels),
                              taps=_tap_spans(taps, wpack.shape[2:4]))


def _depthwise_type(x, wpack, bias=None, *, strides, pads, dilations):
    float_dtype(x, wpack, bias)
    _check_blocked(x)
    if len(wpack.shape) != 4 or wpack.shape[0] != x.shape[1] or wpack.shape[3] != x.shape[4]:
        raise ShapeError(f"expected weights packed as (C / b, KH, KW, b) = ({x.shape[1]}, KH, KW, {x.shape[4]}), "
                         f"got {wpack.shape}")
    _check_packed_bias(bias, x.shape[1], x.shape[4])
    nchw = _nchw(x)
    weight = TensorType((nchw.shape[1], 1, *wpack.shape[1:3]), wpack.dtype)
    (out,) = conv_type(nchw, weight, strides=strides, pads=pads, dilations=dilations, group=nchw.shape[1])
    return [_blocked(out, x.shape[4])]


def _depthwise_ref(x, wpack, bias=None, *, strides, pads, dilations):
    nchw = unblock_array(x)
    weight = wpack.transpose(0, 3, 1, 2).reshape(-1, 1, *wpack.shape[1:3])
    flat = None if bias is None else bias.reshape(-1)
    y = conv_ref(nchw, weight, flat, strides=strides, pads=pads, dilations=dilations, group=nchw.shape[1])
    return block_array(y, x.shape[4])


def _depthwise_te(x, wpack, bias=None, *, strides, pads, dilations):
    stride, pad_pairs, dilation = window_attrs("depthwise_conv_nchwc", 2, strides, pads, dilations)
    return nchwc.depthwise_conv2d_nchwc(x, wpack, stride, pad_pairs, dilation, bias=bias,
                                           name="depthwise_conv_nchwc")


def _lane_group_type(x, upack, bias=None, *, strides, pads, dilations):
    float_dtype(x, upack, bias)
    _check_blocked(x)
    if len(upack.shape) != 5 or upack.shape[0] != x.shape[1] or upack.shape[4] != x.shape[4]:
        raise ShapeError(f"expected weights packed as (C / b, k, KH, KW, b) = ({x.shape[1]}, k, KH, KW, "
                         f"{x.shape[4]}), got {upack.shape}")
    blocks, k, kh, kw, block = upack.shape
    if block % k or k >= block:
        raise ShapeError(f"groups of {k} channels must divide a block of {block} lanes")
    _check_packed_bias(bias, blocks, block)
    nchw = _nchw(x)
    weight = TensorType((nchw.shape[1], k, kh, kw), upack.dtype)
    (out,) = conv_type(nchw, weight, strides=strides, pads=pads, dilations=dilations, group=nchw.shape[1] // k)
    return [_blocked(out, block)]


def _lane_group_ref(x, upack, bias=None, *, strides, pads, dilations):
    nchw = unblock_array(x)
    flat = None if bias is None else bias.reshape(-1)
    y = conv_ref(nchw, unpack_lane_groups(upack), flat, strides=strides, pads=pads, dilations=dilations,
                 group=nchw.shape[1] // upack.shape[1])
    return block_array(y, x.shape[4])


def _lane_group_te(x, upack, bias=None, *, strides, pads, dilations):
    stride, pad_pairs, dilation = window_attrs("lane_group_conv_nchwc", 2, strides, pads, dilations)
    return nchwc.lane_group_conv2d_nchwc(x, upack, stride, pad_pairs, dilation, bias=bias,
                                         name="lane_group_conv_nchwc")


_CONV_ATTRS = {"strides": None, "pads": None, "dilations": None}
declare("conv_nchwc", kind=OUT_FUSABLE, num_inputs=(2, 3),
        attrs={**_CONV_ATTRS, "group_channels": None, "taps": None},
        infer=_conv_nchwc_type, reference=_conv_nchwc_ref, compute=_conv_nchwc_te, samples=(
            Sample((((1, 2, 9, 8, 4), "float32"), ((3, 8, 3, 3, 4), "float32"), ((3, 4), "float32")),
                   {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((2, 3, 7, 7), "float32"), ((2, 3, 3, 3, 8), "float32")), {"pads": [1, 1, 1, 1]}),
            Sample((((1, 2, 5, 6, 8), "float32"), ((1, 16, 1, 1, 8), "float32"))),
            Sample((((1, 4, 7, 6, 4), "float32"), ((4, 4, 3, 3, 4), "float32"), ((4, 4), "float32")),
                   {"pads": [1, 1, 1, 1], "group_channels": [2, 2]}),
            Sample((((1, 4, 6, 6, 4), "float32"), ((4, 8, 3, 3, 4), "float32")),
                   {"strides": [2, 2], "group_channels": [8, 8]}),
            Sample((((1, 16, 5, 5), "float32"), ((2, 8, 1, 1, 8), "float32")), {"group_channels": [4, 4]}),
            Sample((((1, 2, 9, 9, 4), "float32"), ((2, 8, 3, 3, 4), "float32"), ((2, 4), "float32")),
                   {"dilations": [3, 3], "pads": [0, -3, -3, 0], "taps": [1, 0, 3, 2]}),
            Sample((((1, 2, 8, 9, 4), "float32"), ((1, 8, 3, 3, 4), "float32")),
                   {"strides": [2, 1], "dilations": [2, 4], "pads": [-1, 2, 1, -4], "taps": [0, 1, 2, 3]}),
        ))
declare("depthwise_conv_nchwc", kind=OUT_FUSABLE, num_inputs=(2, 3), attrs=_CONV_ATTRS, infer=_depthwise_type,
        reference=_depthwise_ref, compute=_depthwise_te, samples=(
            Sample((((1, 2, 9, 8, 4), "float32"), ((2, 3, 3, 4), "float32"), ((2, 4), "float32")),
                   {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
            Sample((((2, 1, 7, 6, 8), "float32"), ((1, 3, 3, 8), "float32")),
                   {"dilations": [2, 1], "pads": [2, 1, 2, 1]}),
        ))

declare("lane_group_conv_nchwc", kind=OUT_FUSABLE, num_inputs=(2, 3), attrs=_CONV_ATTRS, infer=_lane_group_type,
        reference=_lane_group_ref, compute=_lane_group_te, samples=(
            Sample((((1, 2, 9, 8, 8), "float32"), ((2, 4, 3, 3, 8), "float32"), ((2, 8), "float32")),
                   {"strides": [2, 1], "pads": [1, 1, 1, 1]}),
            Sample((((1, 1, 7, 6, 8), "float32"), ((1, 2, 3, 3, 8), "float32")),
                   {"dilations": [2, 1], "pads": [2, 1, 2, 1]}),
        ))

# ---- pools ----

def _max_pool_nchwc_type(x, **attrs):
    _check_blocked(x)
    (out,) = max_pool_type(_nchw(x), **attrs)
    return [_blocked(out, x.shape[4])]


def _avg_pool_nchwc_type(x, **attrs):
    _check_blocked(x)
    (out,) = avg_pool_type(_nchw(x), **attrs)
    return [_blocked(out, x.shape[4])]


def _max_pool_nchwc_te(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    win = pool_window("max_pool_nchwc", _nchw(TensorType(x.shape, x.dtype)), kernel_shape, strides, pads,
                      dilations, ceil_mode)
    return nchwc.max_pool2d_nchwc(x, win.kernel, win.stride, win.pads, win.dilation, bool(ceil_mode),
                                     name="max_pool_nchwc")


def _avg_pool_nchwc_te(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    win = pool_window("avg_pool_nchwc", _nchw(TensorType(x.shape, x.dtype)), kernel_shape, strides, pads,
                      dilations, ceil_mode)
    return nchwc.avg_pool2d_nchwc(x, win.kernel, win.stride, win.pads, win.dilation, bool(ceil_mode),
                                     bool(count_include_pad), name="avg_pool_nchwc")


def _lanewise(reference):
    """A blocked op's reference from its NCHW one, applied to every lane."""
    return lambda x, **attrs: block_array(reference(unblock_array(x), **attrs), x.shape[4])


def _global_avg_pool_nchwc_type(x):
    _check_blocked(x)
    float_dtype(x)
    n, blocks, _, _, block = x.shape
    return [TensorType((n, blocks, 1, 1, block), x.dtype)]


def _global_avg_pool_nchwc_ref(x):
    return x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(x.dtype)


_POOL_ATTRS = {"kernel_shape": None, "strides": None, "pads": None, "dilations": None, "ceil_mode": 0}
_POOL_SAMPLE = Sample((((1, 2, 7, 6, 4), "float32"),), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                         "pads": [1, 1, 1, 1]})
declare("max_pool_nchwc", kind=REDUCTION, attrs=_POOL_ATTRS, infer=_max_pool_nchwc_type,
        reference=_lanewise(max_pool_ref), compute=_max_pool_nchwc_te, samples=(
            _POOL_SAMPLE,
            Sample((((2, 1, 7, 9, 8), "float32"),),
                   {"kernel_shape": [2, 3], "strides": [2, 2], "dilations": [1, 2], "ceil_mode": 1}),
        ))
declare("avg_pool_nchwc", kind=REDUCTION, attrs={**_POOL_ATTRS, "count_include_pad": 0}, infer=_avg_pool_nchwc_type,
        reference=_lanewise(avg_pool_ref), compute=_avg_pool_nchwc_te, samples=(
            _POOL_SAMPLE,
            Sample((((1, 2, 8, 7, 4), "float32"),), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                     "ceil_mode": 1, "count_include_pad": 1}),
        ))
declare("global_avg_pool_nchwc", kind=REDUCTION, infer=_global_avg_pool_nchwc_type,
        reference=_global_avg_pool_nchwc_ref, compute=lambda x: nchwc.global_avg_pool_nchwc(x),
        samples=(Sample((((2, 3, 5, 4, 4), "float32"),)),))
