"""Integer ops of quantized models (docs/quantization.md, "Integer kernels").

- `conv_integer`: the convolution of zero-point-centred int32 operands summed exactly in int32 (ONNX ConvInteger
  and QLinearConv before requantizing, where the weights are not constants). It is its own op, not an int32
  `conv`, so the float convolution's rewrites (blocked layouts, Winograd, batch-norm folding) never see it.
- `quantize_linear`, `dequantize_linear`: per tensor or per channel along `axis`, ONNX's convention.
- `quantized_matmul`, `quantized_conv2d`: u8/s8 activations by s8 weights summed in int32, plus an int32 bias,
  then the requantization epilogue (te/nn/quantized.py); made by ir/integer_products.py."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import nn
from ..registry import BROADCAST, INJECTIVE, OUT_FUSABLE, Sample, TensorType, declare
from .windows import conv_compute, conv_flops, conv_ref, conv_type, window_attrs

_ATTRS = {"strides": None, "pads": None, "dilations": None, "group": 1}


def _conv_integer_type(x, w, *, strides, pads, dilations, group):
    if x.dtype != "int32" or w.dtype != "int32":
        raise ShapeError(f"conv_integer takes int32 operands (zero points already subtracted), got {x.dtype} and "
                         f"{w.dtype}")
    (out,) = conv_type(TensorType(x.shape, "float32"), TensorType(w.shape, "float32"), strides=strides, pads=pads,
                       dilations=dilations, group=group)
    return [TensorType(out.shape, "int32")]


def _conv_integer_ref(x, w, *, strides, pads, dilations, group):
    """Summed in float64, exact while every sum stays below 2**53; wraps to int32 as the int32 sums do."""
    y = conv_ref(x.astype(np.float64), w.astype(np.float64), strides=strides, pads=pads, dilations=dilations,
                 group=group)
    return y.astype(np.int64).astype(np.int32)


def _conv_integer_te(x, w, *, strides, pads, dilations, group):
    _conv_integer_type(x, w, strides=strides, pads=pads, dilations=dilations, group=group)
    return conv_compute(x, w, strides=strides, pads=pads, dilations=dilations, group=group)


declare("conv_integer", kind=OUT_FUSABLE, attrs=_ATTRS, infer=_conv_integer_type, reference=_conv_integer_ref,
        compute=_conv_integer_te, flops=conv_flops, num_inputs=2, samples=(
            Sample((((1, 4, 9, 8), "int32"), ((6, 4, 3, 3), "int32")), {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((1, 4, 8, 7), "int32"), ((8, 1, 3, 3), "int32")), {"pads": [2, 1, 2, 1], "group": 4}),
            Sample((((2, 4, 11), "int32"), ((6, 2, 3), "int32")), {"strides": [2], "group": 2})))


# Quantized tensors (te/nn/quantized.py has the conventions): quantize_linear and dequantize_linear, per tensor or
# per channel along `axis`, and the integer products with their requantization epilogue, which
# passes/quantize.py makes from QDQ groups and the frontend from QLinearConv/QLinearMatMul.

def _scale_type(x: TensorType, scale: TensorType, zero_point: TensorType, axis: int, op: str) -> None:
    if scale.dtype != "float32":
        raise ShapeError(f"{op} takes a float32 scale, got {scale.dtype}")
    if scale.shape != zero_point.shape or len(scale.shape) > 1:
        raise ShapeError(f"{op}: scale and zero point must be one value or one vector of the same length, got "
                         f"shapes {list(scale.shape)} and {list(zero_point.shape)}")
    if scale.shape and (not 0 <= axis < len(x.shape) or x.shape[axis] != scale.shape[0]):
        raise ShapeError(f"{op}: a per-channel scale of {scale.shape[0]} values does not lie along axis {axis} of "
                         f"{list(x.shape)}")


def _along(v: np.ndarray, rank: int, axis: int) -> np.ndarray:
    return v if v.ndim == 0 else v.reshape([-1 if d == axis else 1 for d in range(rank)])


def _quantize_type(x, scale, zero_point, *, axis):
    if x.dtype != "float32" or zero_point.dtype not in nn.QUANTIZED_RANGES:
        raise ShapeError(f"quantize_linear maps float32 to uint8 or int8, got {x.dtype} to {zero_point.dtype}")
    _scale_type(x, scale, zero_point, axis, "quantize_linear")
    return [TensorType(x.shape, zero_point.dtype)]


def _quantize_ref(x, scale, zero_point, *, axis):
    lo, hi = nn.QUANTIZED_RANGES[str(zero_point.dtype)]
    scale, zero_point = _along(scale, x.ndim, axis), _along(zero_point, x.ndim, axis)
    q = np.rint(x / scale) + zero_point.astype(np.float32)
    return np.clip(q, lo, hi).astype(zero_point.dtype)


def _dequantize_type(q, scale, zero_point, *, axis):
    if q.dtype not in ("uint8", "int8", "int32") or zero_point.dtype != q.dtype:
        raise ShapeError(f"dequantize_linear maps uint8, int8 or int32 (zero point of the same type) to float32, "
                         f"got {q.dtype} with a {zero_point.dtype} zero point")
    _scale_type(q, scale, zero_point, axis, "dequantize_linear")
    return [TensorType(q.shape, "float32")]


def _dequantize_ref(q, scale, zero_point, *, axis):
    scale, zero_point = _along(scale, q.ndim, axis), _along(zero_point, q.ndim, axis)
    return (q.astype(np.float32) - zero_point.astype(np.float32)) * scale


declare("quantize_linear", kind=BROADCAST, attrs={"axis": 1}, infer=_quantize_type, reference=_quantize_ref,
        compute=lambda x, s, z, *, axis: nn.quantize(x, s, z, axis, name="quantize"), num_inputs=3, samples=(
            Sample((((3, 5, 7), "float32"), ((), "float32"), ((), "uint8"))),
            Sample((((2, 4, 3), "float32"), ((4,), "float32"), ((4,), "int8")), {"axis": 1})))
declare("dequantize_linear", kind=BROADCAST, attrs={"axis": 1}, infer=_dequantize_type, reference=_dequantize_ref,
        compute=lambda q, s, z, *, axis: nn.dequantize(q, s, z, axis, name="dequantize"), num_inputs=3, samples=(
            Sample((((3, 5, 7), "uint8"), ((), "float32"), ((), "uint8"))),
            Sample((((6, 4), "int8"), ((6,), "float32"), ((6,), "int8")), {"axis": 0})))

# weight_bits 7 promises weights in [-64, 64], which lets AVX2 kernels sum byte products in int16 pairs
# (te.nn.quantized._int8_gemm); the results are the same.
_EPILOGUE = {"zero_point": 0, "lo": 0, "hi": 255, "out_dtype": "uint8", "weight_bits": 8}


def _epilogue_type(acc_shape, a, w, bias, multiplier, n, out_dtype, op):
    if a.dtype not in nn.QUANTIZED_RANGES or w.dtype != "int8" or bias.dtype != "int32":
        raise ShapeError(f"{op} takes u8 or s8 activations, s8 weights and an int32 bias, got {a.dtype}, {w.dtype} "
                         f"and {bias.dtype}")
    if bias.shape != (n,):
        raise ShapeError(f"{op}: the bias must hold one int32 per output channel ({n}), got {list(bias.shape)}")
    if (multiplier is None) != (out_dtype == "int32"):
        raise ShapeError(f"{op}: a multiplier is given exactly when the output is requantized (out_dtype "
                         f"{out_dtype})")
    if multiplier is not None and (multiplier.dtype != "float32" or multiplier.shape not in ((), (n,))):
        raise ShapeError(f"{op}: the multiplier must be float32, one value or one per output channel ({n}), got "
                         f"{multiplier.dtype}{list(multiplier.shape)}")
    return [TensorType(acc_shape, out_dtype)]


def _requantize_ref(acc, multiplier, zero_point, lo, hi, out_dtype, channel_axis):
    if multiplier is None:
        return acc.astype(np.int32)
    scaled = acc.astype(np.int32).astype(np.float32) * _along(multiplier, acc.ndim, channel_axis)
    return np.clip(np.rint(scaled) + np.float32(zero_point), lo, hi).astype(out_dtype)


def unpack_matmul_weight(wpack: np.ndarray, n: int, k: int) -> np.ndarray:
    """The (N, K) weight of column panels (ceil(N / nr), ceil(K / 4), nr, 4)."""
    panels, groups, nr, group = wpack.shape
    return wpack.transpose(0, 2, 1, 3).reshape(panels * nr, groups * group)[:n, :k]


def _qmatmul_type(a, wpack, bias, multiplier=None, *, n, mr, zero_point, lo, hi, out_dtype, weight_bits):
    if len(a.shape) != 2 or wpack.shape[1:] != (-(-a.shape[1] // nn.DOT_GROUP), wpack.shape[2], nn.DOT_GROUP):
        raise ShapeError(f"quantized_matmul takes a (M, K) and packed weights (N / nr, K / {nn.DOT_GROUP}, nr, "
                         f"{nn.DOT_GROUP}), got {list(a.shape)} and {list(wpack.shape)}")
    return _epilogue_type((a.shape[0], n), a, wpack, bias, multiplier, n, out_dtype, "quantized_matmul")


def _qmatmul_ref(a, wpack, bias, multiplier=None, *, n, mr, zero_point, lo, hi, out_dtype, weight_bits):
    """s8 activations enter as a + 128 (te.nn.quantized_matmul), which the bias accounts for."""
    a = a.astype(np.int64) + (128 if a.dtype == np.int8 else 0)
    acc = a @ unpack_matmul_weight(wpack, n, a.shape[1]).astype(np.int64).T + bias
    return _requantize_ref(acc, multiplier, zero_point, lo, hi, out_dtype, 1)


def _qmatmul_flops(ins, outs, **_) -> int:
    """2 x the multiply-adds of a (M, K) by w (K, N), whatever the panels' padding (integer operations)."""
    return 2 * math.prod(outs[0].shape) * ins[0].shape[1]


declare("quantized_matmul", kind=OUT_FUSABLE, num_inputs=(3, 4), attrs={"n": None, "mr": 6, **_EPILOGUE},
        infer=_qmatmul_type, reference=_qmatmul_ref, flops=_qmatmul_flops,
        compute=lambda a, wpack, bias, multiplier=None, *, n, mr, zero_point, lo, hi, out_dtype, weight_bits: (
            nn.quantized_matmul(a, wpack, bias, multiplier, n, zero_point, lo, hi, out_dtype, mr, weight_bits,
                                name="qgemm")),
        samples=(Sample((((13, 7), "uint8"), ((3, 2, 4, 4), "int8"), ((10,), "int32"), ((10,), "float32")),
                        {"n": 10, "zero_point": 3, "lo": 3, "weight_bits": 7}),
                 Sample((((5, 9), "int8"), ((1, 3, 16, 4), "int8"), ((16,), "int32"), ((), "float32")),
                        {"n": 16, "zero_point": -2, "lo": -128, "hi": 127, "out_dtype": "int8"}),
                 Sample((((4, 6), "uint8"), ((1, 2, 8, 4), "int8"), ((7,), "int32")), {"n": 7, "out_dtype": "int32"})))


LAYOUTS = ("NCHW", "NHWC")  # of a quantized convolution's activations; NHWC: passes/int8_layout.py


def _channels_last(layout: str, op: str) -> bool:
    """Whether the activations are channels-last; a ShapeError for a layout the op does not know."""
    if layout not in LAYOUTS:
        raise ShapeError(f"{op}: layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout == "NHWC"


def _as_nchw(t: TensorType, channels_last: bool) -> TensorType:
    return TensorType(tuple(t.shape[i] for i in (0, 3, 1, 2)), t.dtype) if channels_last else t


def _as_nhwc(t: TensorType, channels_last: bool) -> TensorType:
    return TensorType(tuple(t.shape[i] for i in (0, 2, 3, 1)), t.dtype) if channels_last else t


def _channels_last_ref(ref, x: np.ndarray, *args, layout: str, **attrs) -> np.ndarray:
    """The NCHW reference `ref` of a convolution, on and to channels-last activations where `layout` says so."""
    if layout != "NHWC":
        return ref(x, *args, **attrs)
    return ref(x.transpose(0, 3, 1, 2), *args, **attrs).transpose(0, 2, 3, 1)


def _qconv_type(x, w, bias, multiplier=None, *, x_zero_point, strides, pads, dilations, group, zero_point, lo, hi,
                out_dtype, weight_bits, layout="NCHW", taps_grouped=False):
    if len(x.shape) != 4:
        raise ShapeError(f"quantized_conv2d takes x (N, C, H, W) or (N, H, W, C), got {list(x.shape)}")
    channels_last = _channels_last(layout, "quantized_conv2d")
    x = _as_nchw(x, channels_last)
    if channels_last and not (group == x.shape[1] == w.shape[0] and w.shape[1] == 1):
        raise ShapeError(f"quantized_conv2d runs channels-last only as a depthwise convolution (group = C = O), got "
                         f"group {group}, {x.shape[1]} channels and weights {list(w.shape)}")
    (out,) = conv_type(TensorType(x.shape, "float32"), TensorType(w.shape, "float32"), strides=strides, pads=pads,
                       dilations=dilations, group=group)
    (typed,) = _epilogue_type(out.shape, x, w, bias, multiplier, w.shape[0], out_dtype, "quantized_conv2d")
    return [_as_nhwc(typed, channels_last)]


def _qconv_ref(x, w, bias, multiplier=None, *, layout="NCHW", **attrs):
    return _channels_last_ref(_qconv_nchw_ref, x, w, bias, multiplier, layout=layout, **attrs)


def _qconv_nchw_ref(x, w, bias, multiplier=None, *, x_zero_point, strides, pads, dilations, group, zero_point, lo,
                    hi, out_dtype, weight_bits, taps_grouped=False):
    flat = list(pads or [0] * 4)
    xp = np.pad(x, ((0, 0), (0, 0), (flat[0], flat[2]), (flat[1], flat[3])), constant_values=x_zero_point)
    acc = conv_ref(xp.astype(np.float64), w.astype(np.float64), strides=strides, pads=None, dilations=dilations,
                   group=group)
    acc = acc.astype(np.int64) + bias.reshape(-1, 1, 1)
    return _requantize_ref(acc, multiplier, zero_point, lo, hi, out_dtype, 1)


def _qconv_te(x, w, bias, multiplier=None, *, x_zero_point, strides, pads, dilations, group, zero_point, lo, hi,
              out_dtype, weight_bits, layout="NCHW", taps_grouped=False):
    stride, pad_pairs, dilation = window_attrs("quantized_conv2d", 2, strides, pads, dilations)
    if layout == "NHWC":
        return nn.quantized_depthwise_nhwc(x, w, bias, multiplier, x_zero_point, stride, pad_pairs, dilation,
                                           zero_point, lo, hi, out_dtype, name="qconv", taps_grouped=taps_grouped)
    return nn.quantized_conv2d(x, w, bias, multiplier, x_zero_point, stride, pad_pairs, dilation, int(group),
                               zero_point, lo, hi, out_dtype, weight_bits, name="qconv")


declare("quantized_conv2d", kind=OUT_FUSABLE, num_inputs=(3, 4), infer=_qconv_type, reference=_qconv_ref,
        compute=_qconv_te, flops=conv_flops,
        attrs={"x_zero_point": 0, **_ATTRS, **_EPILOGUE, "layout": "NCHW", "taps_grouped": False}, samples=(
            Sample((((1, 9, 8, 20), "uint8"), ((20, 1, 3, 3), "int8"), ((20,), "int32"), ((20,), "float32")),
                   {"strides": [2, 1], "pads": [1, 0, 1, 2], "group": 20, "x_zero_point": 7, "zero_point": 5,
                    "layout": "NHWC"}),
            Sample((((1, 9, 8, 20), "uint8"), ((20, 1, 3, 3), "int8"), ((20,), "int32"), ((20,), "float32")),
                   {"strides": [2, 1], "pads": [1, 0, 1, 2], "group": 20, "x_zero_point": 7, "zero_point": 5,
                    "layout": "NHWC", "taps_grouped": True}),
            Sample((((1, 7, 11, 48), "uint8"), ((48, 1, 5, 5), "int8"), ((48,), "int32"), ((48,), "float32")),
                   {"pads": [2, 2, 2, 2], "group": 48, "x_zero_point": 9, "zero_point": 3, "layout": "NHWC",
                    "taps_grouped": True}),
            Sample((((2, 6, 5, 3), "int8"), ((3, 1, 2, 3), "int8"), ((3,), "int32"), ((), "float32")),
                   {"dilations": [2, 1], "group": 3, "x_zero_point": -3, "lo": -128, "hi": 127,
                    "out_dtype": "int8", "layout": "NHWC"}),
            Sample((((1, 4, 9, 8), "uint8"), ((6, 4, 3, 3), "int8"), ((6,), "int32"), ((6,), "float32")),
                   {"strides": [2, 1], "pads": [1, 0, 1, 2], "x_zero_point": 7, "zero_point": 5, "weight_bits": 7}),
            Sample((((1, 3, 6, 5), "uint8"), ((5, 3, 2, 2), "int8"), ((5,), "int32")),
                   {"dilations": [2, 1], "x_zero_point": 200, "out_dtype": "int32"}),
            Sample((((1, 4, 8, 7), "int8"), ((8, 1, 3, 3), "int8"), ((8,), "int32"), ((), "float32")),
                   {"pads": [1, 1, 1, 1], "group": 4, "x_zero_point": -3, "lo": -128, "hi": 127,
                    "out_dtype": "int8"})))


# The u8 convolution with one group as the int8 GEMM of the implicit im2col, over weights packed at compile time
# (ir/integer_products.py derives them with `quantized_im2col_weight`).

def pack_conv_weight_numpy(w: np.ndarray) -> np.ndarray:
    """w (O, C, KH, KW) as column panels (ceil(O / 16), ceil(K / 4), 16, 4), K in (tap row, tap column,
    channel) order, zeros past O and K: te.nn.pack_int8_conv_weight's layout."""
    o = w.shape[0]
    panels, groups, nr, group = nn.int8_conv_weight_shape(o, math.prod(w.shape[1:]))
    columns = w.transpose(0, 2, 3, 1).reshape(o, -1)
    padded = np.zeros((panels * nr, groups * group), w.dtype)
    padded[:o, :columns.shape[1]] = columns
    return np.ascontiguousarray(padded.reshape(panels, nr, groups, group).transpose(0, 2, 1, 3))


def unpack_conv_weight(wpack: np.ndarray, out_channels: int, channels: int, kernel_shape) -> np.ndarray:
    """The (O, C, KH, KW) weight of `pack_conv_weight_numpy`'s panels."""
    kh, kw = kernel_shape
    columns = unpack_matmul_weight(wpack, out_channels, channels * kh * kw)
    return columns.reshape(out_channels, kh, kw, channels).transpose(0, 3, 1, 2)


def _im2col_weight_type(w):
    if len(w.shape) != 4 or w.dtype != "int8":
        raise ShapeError(f"quantized_im2col_weight takes an s8 weight (O, C, KH, KW), got {w.dtype}{list(w.shape)}")
    return [TensorType(nn.int8_conv_weight_shape(w.shape[0], math.prod(w.shape[1:])), "int8")]


def _im2col_conv_weight(x, wpack, out_channels, kernel_shape, padded: bool) -> TensorType:
    if len(x.shape) != 4 or len(kernel_shape) != 2:
        raise ShapeError(f"quantized_im2col_conv takes x (N, C, H, W) and a 2-D kernel, got {list(x.shape)} and "
                         f"{list(kernel_shape)}")
    channels = nn.group_channels(x.shape[1]) if padded else x.shape[1]
    want = nn.int8_conv_weight_shape(out_channels, channels * math.prod(kernel_shape))
    if tuple(wpack.shape) != want:
        raise ShapeError(f"quantized_im2col_conv: {out_channels} output channels of a {list(kernel_shape)} kernel "
                         f"over {channels} channels need packed weights {list(want)}, got {list(wpack.shape)}")
    return TensorType((out_channels, x.shape[1], *kernel_shape), wpack.dtype)


def _im2col_conv_type(x, wpack, bias, multiplier=None, *, out_channels, kernel_shape, layout="NCHW",
                      whole_groups=False, **attrs):
    if x.dtype != "uint8":
        raise ShapeError(f"quantized_im2col_conv takes a uint8 x, got {x.dtype}")
    channels_last = _channels_last(layout, "quantized_im2col_conv")
    if whole_groups and not channels_last:
        raise ShapeError("quantized_im2col_conv: whole_groups packings are read channels-last (layout NHWC) only")
    x = _as_nchw(x, channels_last) if len(x.shape) == 4 else x
    (out,) = _qconv_type(x, _im2col_conv_weight(x, wpack, out_channels, kernel_shape, whole_groups), bias,
                         multiplier, group=1, **attrs)
    return [_as_nhwc(out, channels_last)]


def _im2col_conv_ref(x, wpack, bias, multiplier=None, *, out_channels, kernel_shape, layout="NCHW",
                     whole_groups=False, **attrs):
    def nchw(x, wpack, bias, multiplier):
        """A `whole_groups` packing's channels past C read x's zero point (their weights are zero in practice)."""
        extra = nn.group_channels(x.shape[1]) - x.shape[1] if whole_groups else 0
        x = np.pad(x, ((0, 0), (0, extra), (0, 0), (0, 0)), constant_values=attrs["x_zero_point"])
        w = unpack_conv_weight(wpack, out_channels, x.shape[1], kernel_shape)
        return _qconv_nchw_ref(x, w, bias, multiplier, group=1, **attrs)
    return _channels_last_ref(nchw, x, wpack, bias, multiplier, layout=layout)


def _im2col_conv_te(x, wpack, bias, multiplier=None, *, out_channels, kernel_shape, x_zero_point, strides, pads,
                    dilations, zero_point, lo, hi, out_dtype, weight_bits, layout="NCHW", whole_groups=False):
    stride, pad_pairs, dilation = window_attrs("quantized_im2col_conv", 2, strides, pads, dilations)
    return nn.quantized_im2col_conv(x, wpack, bias, multiplier, out_channels, kernel_shape, x_zero_point, stride,
                                    pad_pairs, dilation, zero_point, lo, hi, out_dtype, weight_bits, name="qconv",
                                    channels_last=layout == "NHWC", whole_groups=whole_groups)


def _im2col_conv_flops(ins, outs, *, kernel_shape, layout="NCHW", **_) -> int:
    channels = ins[0].shape[3 if layout == "NHWC" else 1]
    return 2 * math.prod(outs[0].shape) * channels * math.prod(kernel_shape)


declare("quantized_im2col_weight", kind=INJECTIVE, infer=_im2col_weight_type,
        reference=pack_conv_weight_numpy, compute=lambda w: nn.pack_int8_conv_weight(w, name="qconv_wpack"),
        samples=(Sample((((7, 3, 3, 2), "int8"),)), Sample((((17, 4, 1, 1), "int8"),))))
declare("quantized_im2col_conv", kind=OUT_FUSABLE, num_inputs=(3, 4), infer=_im2col_conv_type,
        reference=_im2col_conv_ref, compute=_im2col_conv_te, flops=_im2col_conv_flops,
        attrs={"out_channels": None, "kernel_shape": None, "x_zero_point": 0, "strides": None, "pads": None,
               "dilations": None, **_EPILOGUE, "layout": "NCHW", "whole_groups": False}, samples=(
            Sample((((1, 9, 8, 3), "uint8"), ((1, 9, 16, 4), "int8"), ((6,), "int32"), ((6,), "float32")),
                   {"out_channels": 6, "kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                    "x_zero_point": 7, "zero_point": 5, "layout": "NHWC", "whole_groups": True}),
            Sample((((1, 5, 6, 6), "uint8"), ((2, 8, 16, 4), "int8"), ((17,), "int32"), ((), "float32")),
                   {"out_channels": 17, "kernel_shape": [2, 2], "x_zero_point": 3, "zero_point": 9,
                    "layout": "NHWC", "whole_groups": True}),
            Sample((((1, 9, 8, 8), "uint8"), ((1, 18, 16, 4), "int8"), ((6,), "int32"), ((6,), "float32")),
                   {"out_channels": 6, "kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 0, 1, 2],
                    "x_zero_point": 7, "zero_point": 5, "layout": "NHWC"}),
            Sample((((2, 5, 4, 12), "uint8"), ((2, 3, 16, 4), "int8"), ((20,), "int32"), ((), "float32")),
                   {"out_channels": 20, "kernel_shape": [1, 1], "x_zero_point": 3, "zero_point": 9,
                    "layout": "NHWC"}),
            Sample((((1, 4, 9, 8), "uint8"), ((1, 9, 16, 4), "int8"), ((6,), "int32"), ((6,), "float32")),
                   {"out_channels": 6, "kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 0, 1, 2],
                    "x_zero_point": 7, "zero_point": 5, "weight_bits": 7}),
            Sample((((1, 3, 6, 5), "uint8"), ((2, 3, 16, 4), "int8"), ((17,), "int32")),
                   {"out_channels": 17, "kernel_shape": [2, 2], "dilations": [2, 1], "x_zero_point": 200,
                    "out_dtype": "int32"})))
