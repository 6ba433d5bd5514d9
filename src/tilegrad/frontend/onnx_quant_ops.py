"""ONNX's quantization ops composed from graph ops, computing what ONNX defines: quantizing rounds half to even
and saturates to the target's range, integer products accumulate exactly in int32 from zero-point-centred
operands, and requantizing multiplies the int32 sum by scale * scale / scale in float32, rounds half to even,
then adds the output zero point (ONNX Runtime's order). Scales and zero points may be computed at run time;
per-axis ones lie along their axis, blocked ones repeat over their blocks. float8, int4 and int2 tensors are
not buffer dtypes and are refused where they appear."""

from __future__ import annotations

import numpy as np

from ..dtype import is_float, itemsize
from ..errors import ShapeError, UnsupportedFeatureError
from ..ir.graph import Value
from .onnx import ONNX_OPS, onnx_op
from .onnx import OnnxBuilder as B
from .onnx_tensors import onnx_dtype

QUANTIZED = ("int8", "uint8", "int16", "uint16")  # what QuantizeLinear and the QLinear ops saturate to


def _range(dtype: str, where: str) -> tuple[int, int]:
    if dtype not in QUANTIZED:
        raise UnsupportedFeatureError(f"{where}: quantizing to {dtype} is not supported (tilegrad quantizes to "
                                      f"{', '.join(QUANTIZED)})")
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _common_float(*dtypes: str) -> str:
    """The float type that holds each of `dtypes`: integers (QuantizeLinear-10's int32 x) and two different half
    types meet in float32."""
    dtypes = tuple(d if is_float(d) else "float32" for d in dtypes)
    if len(set(dtypes)) == 1:
        return dtypes[0]
    widest = max(dtypes, key=itemsize)
    return widest if itemsize(widest) >= 4 else "float32"


def _cast(b: B, name: str, v: Value, dtype: str) -> Value:
    return v if v.dtype == dtype else b.op("cast", v, name=name, to=dtype)


def _along(b: B, name: str, v: Value | None, shape: tuple[int, ...], axis: int, block_size: int = 0):
    """`v` (a scale or zero point) broadcastable against a tensor of `shape`: one value as a scalar, a vector
    laid along `axis`, or (block_size > 0) each entry repeated over its block of `block_size` along `axis`."""
    if v is None or v.shape == ():
        return v
    if v.shape == (1,) * len(v.shape):
        return b.op("reshape", v, name=f"{name}_scalar", shape=())
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise ShapeError(f"node {name!r}: axis {axis} is out of range for an input of shape {list(shape)}")
    if block_size:
        return _blocked(b, name, v, shape, axis, block_size)
    if len(v.shape) != 1 or v.shape[0] != shape[axis]:
        raise ShapeError(f"node {name!r}: a per-axis scale or zero point must be a vector of {shape[axis]} "
                         f"(the size of axis {axis} of {list(shape)}), got shape {list(v.shape)}")
    return b.op("reshape", v, name=f"{name}_along", shape=tuple(-1 if d == axis else 1 for d in range(len(shape))))


def _blocked(b: B, name: str, v: Value, shape: tuple[int, ...], axis: int, block_size: int) -> Value:
    blocks = -(-shape[axis] // block_size)
    want = shape[:axis] + (blocks,) + shape[axis + 1:]
    if v.shape != want:
        raise ShapeError(f"node {name!r}: blocks of {block_size} along axis {axis} of {list(shape)} need a scale "
                         f"or zero point of shape {list(want)}, got {list(v.shape)}")
    split = want[:axis + 1] + (1,) + want[axis + 1:]
    repeated = b.op("expand", b.op("reshape", v, name=f"{name}_split", shape=split), name=f"{name}_repeat",
                    shape=want[:axis + 1] + (block_size,) + want[axis + 1:])
    joined = b.op("reshape", repeated, name=f"{name}_join",
                  shape=want[:axis] + (blocks * block_size,) + want[axis + 1:])
    if blocks * block_size == shape[axis]:
        return joined
    return b.op("slice", joined, name=f"{name}_trim", starts=(0,), ends=(shape[axis],), axes=(axis,), steps=(1,))


def _saturate(b: B, name: str, q: Value, zero_point: Value | None, dtype: str) -> Value:
    """Rounded values `q` (floats), plus the zero point, clipped to `dtype`'s range and stored as `dtype`. Values
    are widened to float32 first, where every 16-bit integer and zero-point sum is exact."""
    lo, hi = _range(dtype, f"node {name!r}")
    q = _cast(b, f"{name}_wide", q, "float32") if itemsize(q.dtype) < 4 else q
    if zero_point is not None:
        q = b.op("add", q, _cast(b, f"{name}_zp", zero_point, q.dtype), name=f"{name}_shift")
    return _cast(b, name, b.op("clip", q, name=f"{name}_clip", min=float(lo), max=float(hi)), dtype)


@onnx_op("QuantizeLinear")
def _quantize_linear(b: B, name, x, scale, zero_point=None, *, axis=1, saturate=1, block_size=0, output_dtype=0,
                     precision=0):
    """saturate only concerns float8 targets, which are refused."""
    where = f"node {name!r}"
    dtype = zero_point.dtype if zero_point is not None else (
        onnx_dtype(output_dtype, f"{where}: output_dtype") if output_dtype else "uint8")
    _range(dtype, where)
    if output_dtype and onnx_dtype(output_dtype, f"{where}: output_dtype") != dtype:
        raise ShapeError(f"{where}: output_dtype {onnx_dtype(output_dtype, where)} differs from the zero point's "
                         f"type {dtype}")
    wide = onnx_dtype(precision, f"{where}: precision") if precision else _common_float(x.dtype, scale.dtype)
    x, scale = _cast(b, f"{name}_x", x, wide), _cast(b, f"{name}_scale", scale, wide)
    scaled = b.op("div", x, _along(b, f"{name}_scale", scale, x.shape, axis, block_size), name=f"{name}_scaled")
    rounded = b.op("round", scaled, name=f"{name}_round")
    return _saturate(b, name, rounded, _along(b, f"{name}_zp", zero_point, x.shape, axis, block_size), dtype)


@onnx_op("DequantizeLinear")
def _dequantize_linear(b: B, name, x, scale, zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    """(x - zero_point) * scale in float32 (float64 for a float64 scale), as ONNX's reference."""
    dtype = onnx_dtype(output_dtype, f"node {name!r}: output_dtype") if output_dtype else scale.dtype
    wide = _common_float("float32", scale.dtype)
    d = _cast(b, f"{name}_x", x, wide)
    if zero_point is not None:
        zp = _along(b, f"{name}_zp", zero_point, x.shape, axis, block_size)
        d = b.op("sub", d, _cast(b, f"{name}_zp_wide", zp, wide), name=f"{name}_centred")
    scale = _cast(b, f"{name}_scale_wide", _along(b, f"{name}_scale", scale, x.shape, axis, block_size), wide)
    return _cast(b, name, b.op("mul", d, scale, name=f"{name}_scaled"), dtype)


@onnx_op("DynamicQuantizeLinear")
def _dynamic_quantize_linear(b: B, name, x):
    """uint8 with scale = (max(0, max x) - min(0, min x)) / 255 and the zero point that maps 0 exactly: (y, scale,
    zero_point). An all-zero x gets scale 1, as ONNX Runtime gives (ONNX's reference gives 1 / 255)."""
    zero, one = b.const(np.zeros((), x.dtype), f"{name}_0"), b.const(np.ones((), x.dtype), f"{name}_1")
    top = b.op("maximum", b.op("reduce_max", x, name=f"{name}_max", keepdims=0), zero, name=f"{name}_top")
    bottom = b.op("minimum", b.op("reduce_min", x, name=f"{name}_min", keepdims=0), zero, name=f"{name}_bottom")
    span = b.op("sub", top, bottom, name=f"{name}_span")
    scale = b.op("div", span, b.const(np.array(255, x.dtype), f"{name}_255"), name=f"{name}_step")
    scale = b.op("where", b.op("equal", span, zero, name=f"{name}_flat"), one, scale, name=f"{name}_scale")
    shift = b.op("round", b.op("div", b.op("neg", bottom, name=f"{name}_neg"), scale, name=f"{name}_zp_f"),
                 name=f"{name}_zp_round")
    zero_point = b.op("clip", shift, name=f"{name}_zp_clip", min=0.0, max=255.0)
    rounded = b.op("round", b.op("div", x, scale, name=f"{name}_scaled"), name=f"{name}_round")
    y = _saturate(b, name, rounded, zero_point, "uint8")
    return y, scale, _cast(b, f"{name}_zero_point", zero_point, "uint8")


def _one_value(v: Value | None, what: str, name: str) -> Value | None:
    """`v` unchanged, checked to be a per-tensor scale or zero point (ConvInteger's and QLinearConv's x)."""
    if v is not None and v.shape not in ((), (1,)):
        raise ShapeError(f"node {name!r}: {what} must be one value (per tensor), got shape {list(v.shape)}")
    return v


def _centred(b: B, name: str, x: Value, zero_point: Value | None) -> Value:
    """x - zero_point in int32, exact for every 8- and 16-bit operand."""
    x32 = _cast(b, f"{name}_i32", x, "int32")
    if zero_point is None:
        return x32
    return b.op("sub", x32, _cast(b, f"{name}_zp_i32", zero_point, "int32"), name=f"{name}_centred")


def _rows(b: B, name: str, v: Value | None, a: Value) -> Value | None:
    """A per-row vector of a matrix operand `a` (M entries) as an (M, 1) column; other shapes as given."""
    if v is None or len(v.shape) != 1 or v.shape[0] == 1 or len(a.shape) < 2:
        return v
    return b.op("reshape", v, name=f"{name}_rows", shape=(-1, 1))


def _channels(b: B, name: str, v: Value | None, rank: int) -> Value | None:
    """A per-output-channel vector (M entries) laid along axis 0 of a rank-`rank` tensor (a weight, or the
    channels and spatial axes of a convolution's output); other shapes as given."""
    if v is None or len(v.shape) != 1 or v.shape[0] == 1:
        return v
    return b.op("reshape", v, name=f"{name}_channels", shape=(-1,) + (1,) * (rank - 1))


def _requantize(b: B, name: str, acc: Value, multiplier: Value, zero_point: Value) -> Value:
    """The int32 sums `acc` times `multiplier` (float32), rounded half to even, plus the zero point, saturated."""
    scaled = b.op("mul", _cast(b, f"{name}_acc_f", acc, "float32"), multiplier, name=f"{name}_requant")
    return _saturate(b, name, b.op("round", scaled, name=f"{name}_round"), zero_point, zero_point.dtype)


def _multiplier(b: B, name: str, in_scale: Value, w_scale: Value, out_scale: Value) -> Value:
    """in_scale * w_scale / out_scale in the scales' own type (as ONNX's reference), then as float32."""
    product = b.op("mul", in_scale, w_scale, name=f"{name}_scales")
    return _cast(b, f"{name}_mult_f", b.op("div", product, out_scale, name=f"{name}_mult"), "float32")


@onnx_op("MatMulInteger")
def _matmul_integer(b: B, name, a, w, a_zero_point=None, b_zero_point=None):
    """int32 (a - a_zero_point) @ (b - b_zero_point); a's zero point may be per row, b's per column."""
    return ONNX_OPS["MatMul"](b, name, _centred(b, f"{name}_a", a, _rows(b, f"{name}_a_zp", a_zero_point, a)),
                              _centred(b, f"{name}_b", w, b_zero_point))


@onnx_op("ConvInteger")
def _conv_integer(b: B, name, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad="NOTSET", dilations=None,
                  group=1, kernel_shape=None, pads=None, strides=None):
    """int32 convolution of (x - x_zero_point) by (w - w_zero_point); padding adds centred zeros, as ONNX's
    reference. w's zero point may be per output channel."""
    # imported here: onnx_ops imports this module to register its ops
    from .onnx_ops import _spatial_attrs

    kernel = tuple(kernel_shape) if kernel_shape else w.shape[2:]
    strides, dilations, pads = _spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
    return b.op("conv_integer", _centred(b, f"{name}_x", x, _one_value(x_zero_point, "x_zero_point", name)),
                _centred(b, f"{name}_w", w, _channels(b, f"{name}_w_zp", w_zero_point, len(w.shape))), name=name,
                strides=strides, pads=pads, dilations=dilations, group=group)


@onnx_op("QLinearMatMul")
def _qlinear_matmul(b: B, name, a, a_scale, a_zero_point, w, b_scale, b_zero_point, y_scale, y_zero_point):
    acc = _matmul_integer(b, f"{name}_acc", a, w, a_zero_point, b_zero_point)
    multiplier = _multiplier(b, name, _rows(b, f"{name}_a_scale", a_scale, a), b_scale, y_scale)
    return _requantize(b, name, acc, multiplier, y_zero_point)


@onnx_op("QLinearConv")
def _qlinear_conv(b: B, name, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, bias=None,
                  **attrs):
    """The int32 convolution plus the int32 bias, requantized; w's scale and zero point may be per channel."""
    acc = _conv_integer(b, f"{name}_acc", x, w, x_zero_point, w_zero_point, **attrs)
    out_rank = len(x.shape) - 1  # the output's channel and spatial axes
    if bias is not None:
        bias = _channels(b, f"{name}_bias", _cast(b, f"{name}_bias_i32", bias, "int32"), out_rank)
        acc = b.op("add", acc, bias, name=f"{name}_bias")
    x_scale = _one_value(x_scale, "x_scale", name)
    multiplier = _multiplier(b, name, x_scale, _channels(b, f"{name}_w_scale", w_scale, out_rank), y_scale)
    return _requantize(b, name, acc, multiplier, y_zero_point)
