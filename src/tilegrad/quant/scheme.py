"""Linear quantization in ONNX's convention: q = clip(round_half_even(x / s) + z, q_min, q_max), x = s (q - z).

The seed's formulas 3.14-3.17 with one sign for the offset (the seed's text uses both): the zero point is added
when quantizing. Ranges are widened to hold 0, so that zero (padding, ReLU's floor) is exact."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import ShapeError

INT8 = (-128, 127)
UINT8 = (0, 255)
WEIGHT_RANGE = (-127, 127)  # symmetric weights leave -128 out, so that -w is representable too
REDUCED_WEIGHT_MAX = 64  # ONNX Runtime's reduce_range weights, [-64, 64]: AVX2's vpmaddubsw pairs cannot saturate


class QParams(NamedTuple):
    """Scale and zero point (scalars, or vectors along `axis`) and the integer type they quantize to."""

    scale: np.ndarray  # float32
    zero_point: np.ndarray  # dtype `dtype`
    dtype: str  # "int8" or "uint8"
    axis: int | None = None  # the channel axis of per-channel parameters

    def quantize(self, x: np.ndarray) -> np.ndarray:
        return quantize(x, self)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return dequantize(q, self)


def _along(v: np.ndarray, ndim: int, axis: int | None) -> np.ndarray:
    if axis is None or v.ndim == 0:
        return v
    return v.reshape([-1 if d == axis else 1 for d in range(ndim)])


def quantize(x: np.ndarray, p: QParams) -> np.ndarray:
    """(3.14): round half to even, add the zero point, saturate to the type's range."""
    info = np.iinfo(p.dtype)
    scale = _along(p.scale, x.ndim, p.axis)
    zero = _along(p.zero_point.astype(np.float32), x.ndim, p.axis)
    q = np.rint(np.asarray(x, np.float32) / scale) + zero
    return np.clip(q, info.min, info.max).astype(p.dtype)


def dequantize(q: np.ndarray, p: QParams) -> np.ndarray:
    """(3.15): x = s (q - z), in float32."""
    scale = _along(p.scale, q.ndim, p.axis)
    zero = _along(p.zero_point.astype(np.int32), q.ndim, p.axis)
    return ((q.astype(np.int32) - zero) * scale).astype(np.float32)


def fake_quantize(x: np.ndarray, p: QParams) -> np.ndarray:
    """`x` quantized and dequantized: what a QuantizeLinear -> DequantizeLinear pair computes."""
    return dequantize(quantize(x, p), p)


def asymmetric(lo: float, hi: float, dtype: str = "uint8") -> QParams:
    """(3.16, 3.17) for the range [lo, hi] widened to hold 0: s = (hi - lo) / (q_max - q_min) and the zero point
    that maps lo to q_min, rounded to an integer."""
    q_min, q_max = UINT8 if dtype == "uint8" else INT8
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not np.isfinite(lo) or not np.isfinite(hi):
        raise ShapeError(f"cannot quantize the range [{lo}, {hi}]: it is not finite")
    scale = (hi - lo) / (q_max - q_min) if hi > lo else 1.0
    zero = int(np.clip(np.rint(q_min - lo / scale), q_min, q_max))
    return QParams(np.float32(scale), np.array(zero, dtype=dtype), dtype)


def symmetric(bound: float | np.ndarray, axis: int | None = None, q_max: int = 127) -> QParams:
    """int8 with zero point 0 and s = |bound| / q_max: the seed's 2 max|x| / (Q_max - Q_min) on the range that
    leaves -128 out. `bound` is a scalar, or one bound per channel along `axis`."""
    bound = np.abs(np.asarray(bound, np.float64))
    scale = np.where(bound > 0, bound / q_max, 1.0).astype(np.float32)
    return QParams(scale, np.zeros(scale.shape, np.int8), "int8", axis if scale.ndim else None)


def weight_params(w: np.ndarray, axis: int | None, q_max: int = 127) -> QParams:
    """Symmetric int8 parameters for a weight on [-q_max, q_max]: one scale per channel along `axis` (None: one
    for the tensor)."""
    if axis is None:
        return symmetric(np.max(np.abs(w)) if w.size else 0.0, q_max=q_max)
    reduce = tuple(d for d in range(w.ndim) if d != axis)
    return symmetric(np.max(np.abs(w), axis=reduce), axis=axis, q_max=q_max)
