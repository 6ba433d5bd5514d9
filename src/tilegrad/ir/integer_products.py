"""Quantized products onto the integer ops, with everything about the weights done at compile time.

Both the QDQ fold (passes/quantize.py) and the import of ONNX's QLinearConv, QLinearMatMul, ConvInteger and
MatMulInteger (frontend/onnx_quant_ops.py) come here with constant weights and quantization parameters. The
weights are centred on their zero point (they must then fit s8, which symmetric weights always do), packed in the
layout the kernel reads, and each output channel's weight sum times the activation's zero point is folded into
the int32 bias (te/nn/quantized.py says why that is exact). A product these ops cannot hold exactly gives None,
and the caller keeps its float or int32 composition.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ..te.nn.quantized import DOT_GROUP, QUANTIZED_RANGES
from .graph import Derivation, Value
from .ops.quant import pack_conv_weight_numpy

INT32 = np.iinfo(np.int32)
PANEL = 16  # output columns per packed panel of a quantized_matmul's weights (two AVX2 int32 vectors)


class Epilogue(NamedTuple):
    """What follows the int32 sum: the float32 multiplier (None: the int32 sum is the output), the output's zero
    point and type, and the integer range it saturates to (narrowed by a fused ReLU or Clip)."""

    multiplier: np.ndarray | None
    zero_point: int
    out_dtype: str
    lo: int
    hi: int


def requantized(in_scale, w_scale, out_scale, out_zero_point: np.ndarray, clip: tuple[float, float] | None = None
                ) -> Epilogue | None:
    """The epilogue of a product requantized to `out_zero_point`'s type: multiplier in_scale * w_scale /
    out_scale in float32 (ONNX Runtime's order), and the range narrowed to quantize(clip) where a ReLU or Clip of
    bounds `clip` (floats) precedes the quantization. None for an output type other than u8/s8."""
    dtype = str(out_zero_point.dtype)
    if dtype not in QUANTIZED_RANGES or out_zero_point.size != 1 or np.size(out_scale) != 1:
        return None
    zero_point = int(out_zero_point.reshape(()))
    lo, hi = QUANTIZED_RANGES[dtype]
    multiplier = (np.float32(np.reshape(in_scale, ())) * np.asarray(w_scale, np.float32)) / np.float32(
        np.reshape(out_scale, ()))
    if clip is not None:
        scale = np.float32(np.reshape(out_scale, ()))
        bounds = [np.clip(np.rint(np.float32(c) / scale) + zero_point, lo, hi) for c in clip]
        lo, hi = max(lo, int(bounds[0])), min(hi, int(bounds[1]))
    return Epilogue(multiplier.astype(np.float32), zero_point, dtype, lo, hi)


INT32_OUT = Epilogue(None, 0, "int32", int(INT32.min), int(INT32.max))


def _centred_weight(w: np.ndarray, zero_point: np.ndarray, axis: int) -> np.ndarray | None:
    """w - zero_point (per tensor, or per slice along `axis`) as s8, or None when it does not fit."""
    zp = np.asarray(zero_point).astype(np.int64)
    zp = zp.reshape(()) if zp.size == 1 else zp.reshape([-1 if d == axis else 1 for d in range(w.ndim)])
    centred = w.astype(np.int64) - zp
    if centred.min(initial=0) < -128 or centred.max(initial=0) > 127:
        return None
    return centred.astype(np.int8)


def _weight_bits(centred: np.ndarray) -> int:
    """7 when every weight lies in [-64, 64] (ONNX Runtime's reduce_range range), which lets AVX2 kernels
    sum in int16 pairs (te.nn.quantized._int8_gemm); else 8."""
    return 7 if centred.min(initial=0) >= -64 and centred.max(initial=0) <= 64 else 8


def _bias(bias: np.ndarray | None, weight_sums: np.ndarray, in_zero_point: int) -> np.ndarray | None:
    """bias - in_zero_point * weight_sums as int32, or None if it leaves int32."""
    total = (np.zeros(weight_sums.shape, np.int64) if bias is None else bias.astype(np.int64).reshape(-1)) \
        - in_zero_point * weight_sums
    if total.min(initial=0) < INT32.min or total.max(initial=0) > INT32.max:
        return None
    return total.astype(np.int32)


def _multiplier_input(b, epilogue: Epilogue, name: str) -> tuple[Value, ...]:
    if epilogue.multiplier is None:
        return ()
    m = epilogue.multiplier
    return (b.const(m.reshape(()) if m.size == 1 else m.reshape(-1), f"{name}_multiplier"),)


def integer_matmul(b, a: Value, in_zero_point: int, w: np.ndarray, w_zero_point: np.ndarray,
                   bias: np.ndarray | None, epilogue: Epilogue, name: str) -> Value | None:
    """a (..., K) u8/s8 times the constant w (K, N) (zero point per tensor or per column), plus an int32 bias
    (N,), through `epilogue`, as one quantized_matmul; None where that is not exact."""
    if a.dtype not in QUANTIZED_RANGES or w.ndim != 2 or len(a.shape) < 2 or a.shape[-1] != w.shape[0]:
        return None
    centred = _centred_weight(w, w_zero_point, 1)
    # an s8 activation enters the kernel as a + 128 (te.nn.quantized_matmul), so its zero point moves with it
    shifted = in_zero_point + (128 if a.dtype == "int8" else 0)
    total = None if centred is None else _bias(bias, centred.astype(np.int64).sum(axis=0), shifted)
    if total is None:
        return None
    k, n = centred.shape
    panels, groups = -(-n // PANEL), -(-k // DOT_GROUP)
    padded = np.zeros((groups * DOT_GROUP, panels * PANEL), np.int8)
    padded[:k, :n] = centred
    packed = np.ascontiguousarray(padded.reshape(groups, DOT_GROUP, panels, PANEL).transpose(2, 0, 3, 1))
    bits = _weight_bits(centred)
    rows = a if len(a.shape) == 2 else b.op("reshape", a, name=f"{name}_rows", shape=(-1, k))
    out = b.op("quantized_matmul", rows, b.const(packed, f"{name}_wpack"), b.const(total, f"{name}_bias"),
               *_multiplier_input(b, epilogue, name), name=name, n=n, zero_point=epilogue.zero_point,
               lo=epilogue.lo, hi=epilogue.hi, out_dtype=epilogue.out_dtype, weight_bits=bits)
    return out if len(a.shape) == 2 else b.op("reshape", out, name=f"{name}_unrows", shape=(*a.shape[:-1], n))


def integer_conv2d(b, x: Value, in_zero_point: int, w: np.ndarray, w_zero_point: np.ndarray,
                   bias: np.ndarray | None, epilogue: Epilogue, name: str, *, strides, pads, dilations,
                   group) -> Value | None:
    """The convolution of x (N, C, H, W) u8/s8 by the constant w (O, C / group, KH, KW) (zero point per tensor
    or per output channel), plus an int32 bias (O,), through `epilogue`, as one quantized_im2col_conv (a u8 x
    and one group: the weights are packed here, with their derivation noted so that a saved module can store the
    smaller source) or quantized_conv2d; None where that is not exact."""
    if x.dtype not in QUANTIZED_RANGES or w.ndim != 4 or len(x.shape) != 4:
        return None
    centred = _centred_weight(w, w_zero_point, 0)
    total = None if centred is None else _bias(bias, centred.astype(np.int64).sum(axis=(1, 2, 3)), in_zero_point)
    if total is None:
        return None
    weight, requantization = b.const(centred, f"{name}_w"), {
        "x_zero_point": in_zero_point, "strides": strides, "pads": pads, "dilations": dilations,
        "zero_point": epilogue.zero_point, "lo": epilogue.lo, "hi": epilogue.hi, "out_dtype": epilogue.out_dtype,
        "weight_bits": _weight_bits(centred)}
    operands = (b.const(total, f"{name}_bias"), *_multiplier_input(b, epilogue, name))
    if x.dtype == "uint8" and group == 1:  # the implicit-im2col GEMM, its weights packed once, here
        wpack = dataclasses.replace(b.const(pack_conv_weight_numpy(centred), f"{name}_wpack"),
                                    origin=Derivation("quantized_im2col_weight", weight, {}))
        return b.op("quantized_im2col_conv", x, wpack, *operands, name=name, out_channels=w.shape[0],
                    kernel_shape=tuple(w.shape[2:]), **requantization)
    return b.op("quantized_conv2d", x, weight, *operands, name=name, group=group, **requantization)
