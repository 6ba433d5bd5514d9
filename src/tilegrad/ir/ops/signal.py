"""The discrete Fourier transform along the second-to-last axis of a signal whose last axis holds its components
(1: real, 2: real and imaginary), as ONNX's DFT has it once the signal axis is moved there.

Each output is a sum of the samples times cosines and sines. The compute evaluates them and sums in float64,
as numpy's FFT does: in float32 the rounding of a long sum leaves ~1e-7 where the exact transform is zero (the
imaginary part of a symmetric spectrum's inverse), and ONNX's node tests compare those with atol 1e-7.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import tensor as te
from ..registry import REDUCTION, Sample, TensorType, declare


def _sizes(length: int, n: int, inverse: int, onesided: int) -> tuple[int, int, int]:
    """(samples used, output points, output components): an irfft (inverse and onesided) reads n // 2 + 1
    frequencies and gives n real samples; a onesided forward transform keeps n // 2 + 1 frequencies."""
    if inverse and onesided:
        return min(length, n // 2 + 1), n, 1
    return min(length, n), n // 2 + 1 if onesided else n, 2


def dft_matrix(length: int, parts: int, n: int, inverse: int, onesided: int) -> np.ndarray:
    """The real matrix (length * parts, points * components) that maps `length` samples of `parts` interleaved
    components to the n-point transform, interleaved the same way. Samples past n are dropped and missing ones
    count as zeros, as numpy.fft's `n` does."""
    used, points, components = _sizes(length, n, inverse, onesided)
    m = np.zeros((length, parts, points, components))
    k = np.arange(points)
    for t in range(used):
        if inverse and onesided:  # t is a frequency of a Hermitian spectrum, k a time step
            weight = (1.0 if t == 0 or 2 * t == n else 2.0) / n
            m[t, 0, :, 0] = weight * np.cos(2 * np.pi * t * k / n)
            if parts == 2:
                m[t, 1, :, 0] = -weight * np.sin(2 * np.pi * t * k / n)
            continue
        angle = (1.0 if inverse else -1.0) * 2 * np.pi * (t * k % n) / n
        scale = 1.0 / n if inverse else 1.0
        re, im = np.cos(angle) * scale, np.sin(angle) * scale
        m[t, 0, :, 0], m[t, 0, :, 1] = re, im
        if parts == 2:
            m[t, 1, :, 0], m[t, 1, :, 1] = -im, re
    return m.reshape(length * parts, points * components)


def _dft_type(x: TensorType, *, n, inverse, onesided):
    if len(x.shape) < 2 or x.shape[-1] not in (1, 2) or not E.is_float(x.dtype):
        raise ShapeError(f"dft needs a float signal (..., samples, 1 or 2 components), got {x}")
    if not isinstance(n, int) or n < 1:
        raise ShapeError(f"dft length {n!r} must be a positive integer")
    _, points, components = _sizes(x.shape[-2], n, inverse, onesided)
    return [TensorType((*x.shape[:-2], points, components), x.dtype)]


def _dft_ref(x, *, n, inverse, onesided):
    (out,) = _dft_type(TensorType(x.shape, str(x.dtype)), n=n, inverse=inverse, onesided=onesided)
    m = dft_matrix(x.shape[-2], x.shape[-1], n, inverse, onesided)
    rows = x.astype(np.float64).reshape(*x.shape[:-2], -1)
    return (rows @ m).reshape(out.shape).astype(x.dtype)


def _dft_te(x, *, n, inverse, onesided):
    """out[..., k, o] = sum over samples t and components j of x[..., t, j] * coefficient(t, j, k, o), in
    float64."""
    (out,) = _dft_type(TensorType(x.shape, x.dtype), n=n, inverse=inverse, onesided=onesided)
    used, _, _ = _sizes(x.shape[-2], n, inverse, onesided)
    parts = x.shape[-1]
    t = te.reduce_axis(used, "t")
    j = te.reduce_axis(parts, "j")

    def coefficient(k, o):
        phase = E.cast("float64", (t * k) % n) * (2 * math.pi / n)
        cos, sin = E.cos(phase), E.sin(phase)
        if inverse and onesided:
            once = E.logical_or(t.eq(0), (t * 2).eq(n))  # the frequencies without a mirror image
            weight = E.select(once, E.const(1.0 / n, "float64"), E.const(2.0 / n, "float64"))
            return E.select(j.eq(0), cos * weight, -sin * weight)
        sin = sin * (1.0 / n) if inverse else -sin
        cos = cos * (1.0 / n) if inverse else cos
        real = E.select(j.eq(0), cos, -sin)
        imaginary = E.select(j.eq(0), sin, cos)
        return E.select(o.eq(0), real, imaginary)

    def wide_sum(*i):
        *lead, k, o = i
        return te.sum(E.cast("float64", x[(*lead, t, j)]) * coefficient(k, o), axis=[t, j])

    total = te.compute(out.shape, wide_sum, name="dft_sum", tag="reduce")
    return te.compute(out.shape, lambda *i: E.cast(x.dtype, total[i]), name="dft", tag="elemwise")


declare("dft", kind=REDUCTION, attrs={"n": None, "inverse": 0, "onesided": 0}, infer=_dft_type,
        reference=_dft_ref, compute=_dft_te,
        samples=(Sample((((3, 8, 1), "float32"),), {"n": 8}),
                 Sample((((2, 6, 2), "float32"),), {"n": 5, "inverse": 1}),
                 Sample((((4, 5, 2), "float32"),), {"n": 8, "inverse": 1, "onesided": 1}),
                 Sample((((7, 1), "float32"),), {"n": 9, "onesided": 1})))
