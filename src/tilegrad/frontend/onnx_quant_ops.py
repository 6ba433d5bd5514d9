"""ONNX's quantization ops composed from graph ops, computing what ONNX defines: quantizing rounds half to even
and saturates to the target's range, integer products accumulate exactly in int32 from zero-point-centred
operands, and requantizing multiplies the int32 sum by scale * scale / scale in float32, rounds half to even,
then adds the output zero point (ONNX Runtime's order). Scales and zero points may be computed at run time;
per-axis ones lie along their axis, blocked ones repeat over their blocks. float8, int4 and int2 tensors are
not buffer dtypes and are refused where they appear.

The common case -- float32 values, a float32 scale per tensor or per axis, 8-bit (or, dequantized, int32)
integers -- imports as the ops `quantize_linear` and `dequantize_linear`, which the QDQ fold
(passes/quantize.py) reads; a DequantizeLinear of constants stays a node for it, where constant folding would
lose the integers (fold_constants folds it later if nothing else did). QLinearConv, QLinearMatMul, ConvInteger
and MatMulInteger with constant weights and quantization parameters import as the integer products
(ir/integer_products.py); the rest as compositions of graph ops."""

from __future__ import annotations

import math

import numpy as np

from ..dtype import is_float, itemsize
from ..errors import ShapeError, UnsupportedFeatureError
from ..ir.graph import GraphBuilder, Value
from ..ir.integer_products import INT32_OUT, integer_conv2d, integer_matmul, requantized
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import ONNX_OPS, onnx_op
from .onnx_spatial_attrs import spatial_attrs
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
    if not (block_size or precision) and dtype in ("uint8", "int8") and x.dtype == scale.dtype == "float32":
        common = _as_op_operands(b, name, x, scale, zero_point, dtype, axis)
        if common is not None:
            return b.op("quantize_linear", x, *common[:2], name=name, axis=common[2])
    wide = onnx_dtype(precision, f"{where}: precision") if precision else _common_float(x.dtype, scale.dtype)
    x, scale = _cast(b, f"{name}_x", x, wide), _cast(b, f"{name}_scale", scale, wide)
    scaled = b.op("div", x, _along(b, f"{name}_scale", scale, x.shape, axis, block_size), name=f"{name}_scaled")
    rounded = b.op("round", scaled, name=f"{name}_round")
    return _saturate(b, name, rounded, _along(b, f"{name}_zp", zero_point, x.shape, axis, block_size), dtype)


@onnx_op("DequantizeLinear")
def _dequantize_linear(b: B, name, x, scale, zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    """(x - zero_point) * scale in float32 (float64 for a float64 scale), as ONNX's reference."""
    dtype = onnx_dtype(output_dtype, f"node {name!r}: output_dtype") if output_dtype else scale.dtype
    if not block_size and dtype == scale.dtype == "float32" and x.dtype in ("uint8", "int8", "int32"):
        common = _as_op_operands(b, name, x, scale, zero_point, x.dtype, axis)
        if common is not None:
            inputs = (x, *common[:2])
            # a constant one stays a node, for the QDQ fold to find the integers (passes/quantize.py)
            op = GraphBuilder.op if all(v.is_constant for v in inputs) else B.op
            return op(b, "dequantize_linear", *inputs, name=name, axis=common[2])
    wide = _common_float("float32", scale.dtype)
    d = _cast(b, f"{name}_x", x, wide)
    if zero_point is not None:
        zp = _along(b, f"{name}_zp", zero_point, x.shape, axis, block_size)
        d = b.op("sub", d, _cast(b, f"{name}_zp_wide", zp, wide), name=f"{name}_centred")
    scale = _cast(b, f"{name}_scale_wide", _along(b, f"{name}_scale", scale, x.shape, axis, block_size), wide)
    return _cast(b, name, b.op("mul", d, scale, name=f"{name}_scaled"), dtype)


def _as_op_operands(b: B, name: str, x: Value, scale: Value, zero_point: Value | None, dtype: str, axis: int):
    """(scale, zero_point, axis) as quantize_linear and dequantize_linear take them -- one value as a scalar, or a
    vector along a non-negative axis -- or None for what they do not take (a vector of one, or a mismatch, which
    the composition reports)."""
    if zero_point is None:
        zero_point = b.const(np.zeros(scale.shape, dtype), f"{name}_zero_point")
    if zero_point.shape != scale.shape or zero_point.dtype != dtype:
        return None
    if math.prod(scale.shape) == 1 and len(scale.shape) <= 1:
        flat = [b.op("reshape", v, name=f"{name}_{what}_scalar", shape=()) if v.shape else v
                for v, what in ((scale, "scale"), (zero_point, "zp"))]
        return flat[0], flat[1], 1
    axis = axis + len(x.shape) if axis < 0 else axis
    if len(scale.shape) != 1 or not 0 <= axis < len(x.shape) or x.shape[axis] != scale.shape[0]:
        return None
    return scale, zero_point, axis


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


def _known(*values: Value | None) -> list[np.ndarray] | None:
    """The data of `values` (an absent one as a zero), or None unless each is a constant."""
    if not all(v is None or v.is_constant for v in values):
        return None
    return [np.zeros((), np.int32) if v is None else v.data for v in values]


def _one(v: np.ndarray) -> int | None:
    return int(v.reshape(())) if v.size == 1 else None


def _integer_matmul(b: B, name, a, w, a_zero_point, b_zero_point, scales, y_zero_point):
    """The product as one quantized_matmul (scales: (a, b, y) or None for MatMulInteger's int32 output), or
    None where that does not apply."""
    known = _known(w, a_zero_point, b_zero_point, y_zero_point, *(scales or ()))
    if known is None or _one(known[1]) is None or len(w.shape) != 2:
        return None
    wq, za, zw, zy, *s = known
    if zw.size not in (1, w.shape[1]):
        return None
    epilogue = INT32_OUT if scales is None else requantized(s[0], s[1], s[2], zy)
    if epilogue is None or np.size(s[0] if s else 1) != 1 or np.size(s[1] if s else 1) not in (1, w.shape[1]):
        return None
    return integer_matmul(b, a, _one(za), wq, zw, None, epilogue, name)


def _integer_conv(b: B, name, x, w, x_zero_point, w_zero_point, scales, y_zero_point, bias, attrs):
    """The convolution as one integer product (scales: (x, w, y) or None for ConvInteger's int32 output), or
    None where that does not apply."""
    known = _known(w, x_zero_point, w_zero_point, y_zero_point, bias, *(scales or ()))
    if known is None or len(x.shape) != 4 or _one(known[1]) is None:
        return None
    wq, zx, zw, zy, bq, *s = known
    epilogue = INT32_OUT if scales is None else requantized(s[0], s[1], s[2], zy)
    if epilogue is None or zw.size not in (1, w.shape[0]) or (s and np.size(s[1]) not in (1, w.shape[0])):
        return None
    kernel = tuple(attrs.get("kernel_shape") or w.shape[2:])
    strides, dilations, pads = spatial_attrs(x, kernel, attrs.get("strides"), attrs.get("dilations"),
                                             attrs.get("pads"), attrs.get("auto_pad", "NOTSET"))
    return integer_conv2d(b, x, _one(zx), wq, zw, bq if bias is not None else None, epilogue, name,
                          strides=strides, pads=pads, dilations=dilations, group=attrs.get("group", 1))


@onnx_op("MatMulInteger")
def _matmul_integer(b: B, name, a, w, a_zero_point=None, b_zero_point=None):
    """int32 (a - a_zero_point) @ (b - b_zero_point); a's zero point may be per row, b's per column."""
    fast = _integer_matmul(b, name, a, w, a_zero_point, b_zero_point, None, None)
    if fast is not None:
        return fast
    return ONNX_OPS["MatMul"](b, name, _centred(b, f"{name}_a", a, _rows(b, f"{name}_a_zp", a_zero_point, a)),
                              _centred(b, f"{name}_b", w, b_zero_point))


@onnx_op("ConvInteger")
def _conv_integer(b: B, name, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad="NOTSET", dilations=None,
                  group=1, kernel_shape=None, pads=None, strides=None):
    """int32 convolution of (x - x_zero_point) by (w - w_zero_point); padding adds centred zeros, as ONNX's
    reference. w's zero point may be per output channel."""
    fast = _integer_conv(b, name, x, w, x_zero_point, w_zero_point, None, None, None,
                         {"auto_pad": auto_pad, "dilations": dilations, "group": group,
                          "kernel_shape": kernel_shape, "pads": pads, "strides": strides})
    if fast is not None:
        return fast
    kernel = tuple(kernel_shape) if kernel_shape else w.shape[2:]
    strides, dilations, pads = spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
    return b.op("conv_integer", _centred(b, f"{name}_x", x, _one_value(x_zero_point, "x_zero_point", name)),
                _centred(b, f"{name}_w", w, _channels(b, f"{name}_w_zp", w_zero_point, len(w.shape))), name=name,
                strides=strides, pads=pads, dilations=dilations, group=group)


@onnx_op("QLinearMatMul")
def _qlinear_matmul(b: B, name, a, a_scale, a_zero_point, w, b_scale, b_zero_point, y_scale, y_zero_point):
    fast = _integer_matmul(b, name, a, w, a_zero_point, b_zero_point, (a_scale, b_scale, y_scale), y_zero_point)
    if fast is not None:
        return fast
    acc = _matmul_integer(b, f"{name}_acc", a, w, a_zero_point, b_zero_point)
    multiplier = _multiplier(b, name, _rows(b, f"{name}_a_scale", a_scale, a), b_scale, y_scale)
    return _requantize(b, name, acc, multiplier, y_zero_point)


@onnx_op("QLinearConv")
def _qlinear_conv(b: B, name, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, bias=None,
                  **attrs):
    """The int32 convolution plus the int32 bias, requantized; w's scale and zero point may be per channel."""
    fast = _integer_conv(b, name, x, w, x_zero_point, w_zero_point, (x_scale, w_scale, y_scale), y_zero_point,
                         bias, attrs)
    if fast is not None:
        return fast
    acc = _conv_integer(b, f"{name}_acc", x, w, x_zero_point, w_zero_point, **attrs)
    out_rank = len(x.shape) - 1  # the output's channel and spatial axes
    if bias is not None:
        bias = _channels(b, f"{name}_bias", _cast(b, f"{name}_bias_i32", bias, "int32"), out_rank)
        acc = b.op("add", acc, bias, name=f"{name}_bias")
    x_scale = _one_value(x_scale, "x_scale", name)
    multiplier = _multiplier(b, name, x_scale, _channels(b, f"{name}_w_scale", w_scale, out_rank), y_scale)
    return _requantize(b, name, acc, multiplier, y_zero_point)
