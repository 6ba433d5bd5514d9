"""Normalisations: batch norm (inference), softmax, log-softmax, layer norm, instance norm, and
local response normalisation across channels (LRN).

Each but LRN is a composite: besides its own compute (a short chain whose last stage runs row by row) it declares
the formula that `expand_composites` rewrites it into, written over terms whose arithmetic emits basic ops
(reductions keep the reduced axes, so their results broadcast back over the rows).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ...te.nn._arguments import normalize_axis
from ..registry import BROADCAST, REDUCTION, Sample, TensorType, declare
from .operands import broadcasts_to, float_dtype, te_type, widened


# ---- batch norm (inference) ----

def _batch_norm_type(x, scale, bias, mean, var, *, epsilon):
    if len(x.shape) < 2:
        raise ShapeError(f"x must be (N, C, ...) with at least 2 axes, got shape {x.shape}")
    dtype = float_dtype(x, scale, bias, mean, var)
    channels = x.shape[1]
    for what, t in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var)):
        if t.shape != (channels,):
            raise ShapeError(f"{what} must have shape ({channels},), one per channel of x, got {t.shape}")
    return [TensorType(x.shape, dtype)]


def _batch_norm_ref(x, scale, bias, mean, var, *, epsilon):
    def per_channel(p):
        return p.astype(np.float64).reshape(-1, *[1] * (x.ndim - 2))

    y = (x - per_channel(mean)) / np.sqrt(per_channel(var) + epsilon) * per_channel(scale) + per_channel(bias)
    return y.astype(x.dtype)


def _batch_norm_te(x, scale, bias, mean, var, *, epsilon):
    _batch_norm_type(*map(te_type, (x, scale, bias, mean, var)), epsilon=epsilon)

    def body(*i):
        c = i[1]
        return (x[i] - mean[c]) * E.rsqrt(var[c] + epsilon) * scale[c] + bias[c]

    return te.compute(x.shape, body, name="batch_norm", tag="broadcast", attrs={"epsilon": epsilon})


def _batch_norm_expand(x, scale, bias, mean, var, *, epsilon):
    """(x - mean) * scale / sqrt(var + epsilon) + bias, rearranged as x * a + b with per-channel a and b: two ops
    per element, and a and b are constants when the statistics are."""
    a = scale * (var + epsilon).rsqrt()
    b = bias - mean * a
    return x * a.per_channel(x.ndim) + b.per_channel(x.ndim)


declare("batch_norm", kind=BROADCAST, attrs={"epsilon": 1e-5}, infer=_batch_norm_type, reference=_batch_norm_ref,
        compute=_batch_norm_te, expand=_batch_norm_expand, num_inputs=5,
        samples=(Sample((((2, 3, 4, 5), "float32"),) + (((3,), "float32"),) * 4),
                 Sample((((4, 6), "float32"),) + (((6,), "float32"),) * 4, {"epsilon": 1e-3})))


# ---- softmax and log-softmax ----

def _softmax_type(x, *, axis):
    normalize_axis(axis, len(x.shape), "softmax")
    return [TensorType(x.shape, float_dtype(x))]


def _log_softmax_ref(x, *, axis):
    wide = x.astype(np.float64)
    shifted = wide - wide.max(axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(x.dtype)


def _softmax_expand(x, *, axis):
    """exp(x - max) / sum(exp(x - max)): subtracting the row's maximum keeps exp from overflowing."""
    e = (x - x.max(axis)).exp()
    return e / e.sum(axis)


def _log_softmax_expand(x, *, axis):
    """x - max - log(sum(exp(x - max))), stable for the same reason as softmax."""
    shifted = x - x.max(axis)
    return shifted - shifted.exp().sum(axis).log()


def _last_axis_rows(x: tuple[int, ...], *, axis, **_) -> tuple[int, ...] | None:
    """A softmax over the last axis works row by row."""
    return x[:-1] if axis % len(x) == len(x) - 1 else None


_SOFTMAX_SAMPLES = (Sample((((4, 33), "float32"),)), Sample((((2, 5, 7), "float32"),), {"axis": 1}))
declare("softmax", kind=REDUCTION, attrs={"axis": -1}, infer=_softmax_type,
        reference=lambda x, *, axis: np.exp(_log_softmax_ref(x.astype(np.float64), axis=axis)).astype(x.dtype),
        compute=widened(lambda x, *, axis: nn.softmax(x, axis)), expand=_softmax_expand, rows=_last_axis_rows,
        samples=_SOFTMAX_SAMPLES)
declare("log_softmax", kind=REDUCTION, attrs={"axis": -1}, infer=_softmax_type, reference=_log_softmax_ref,
        compute=widened(lambda x, *, axis: nn.log_softmax(x, axis)), expand=_log_softmax_expand, rows=_last_axis_rows,
        samples=_SOFTMAX_SAMPLES)


# ---- layer norm and instance norm ----

def _normalised(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    return (wide - mean) / np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True) + epsilon)


def _standardized(x, axes: range, epsilon: float):
    """(x - mean) / sqrt(var + epsilon) over `axes`, as terms; the variance is the mean squared deviation from the
    mean (two passes, as the references do, which avoids the cancellation of mean(x²) - mean(x)²)."""
    deviation = x - x.mean(axes)
    return deviation * ((deviation * deviation).mean(axes) + epsilon).rsqrt()


def _layer_norm_type(x, scale=None, bias=None, *, axis, epsilon):
    """ONNX LayerNormalization: statistics over the axes from `axis` on; scale and bias broadcast to them."""
    dtype = float_dtype(x, scale, bias)
    inner = x.shape[normalize_axis(axis, len(x.shape), "layer_norm"):]
    for what, t in (("scale", scale), ("bias", bias)):
        if t is not None and not broadcasts_to(t.shape, inner):
            raise ShapeError(f"{what} of shape {t.shape} does not broadcast to the normalised shape {inner}")
    return [TensorType(x.shape, dtype)]


def _layer_norm_ref(x, scale=None, bias=None, *, axis, epsilon):
    y = _normalised(x, tuple(range(axis % x.ndim, x.ndim)), epsilon)
    y = y if scale is None else y * scale
    return (y if bias is None else y + bias).astype(x.dtype)


def _layer_norm_te(x, scale=None, bias=None, *, axis, epsilon):
    _layer_norm_type(te_type(x), te_type(scale), te_type(bias), axis=axis, epsilon=epsilon)
    return nn.layer_norm(x, scale, bias, axis, epsilon)


def _layer_norm_expand(x, scale=None, bias=None, *, axis, epsilon):
    """Standardise over the axes from `axis` on; scale and bias broadcast over those trailing axes."""
    y = _standardized(x, range(axis % x.ndim, x.ndim), epsilon)
    y = y if scale is None else y * scale
    return y if bias is None else y + bias


declare("layer_norm", kind=REDUCTION, attrs={"axis": -1, "epsilon": 1e-5}, infer=_layer_norm_type,
        reference=_layer_norm_ref, compute=widened(_layer_norm_te), expand=_layer_norm_expand,
        rows=lambda x, *, axis, **_: x[:axis % len(x)], num_inputs=(1, 3), samples=(
            Sample((((4, 33), "float32"), ((33,), "float32"), ((33,), "float32"))),
            Sample((((2, 3, 8), "float32"), ((3, 8), "float32")), {"axis": 1, "epsilon": 1e-3}),
            Sample((((3, 10), "float32"),)),
        ))


def _instance_norm_type(x, scale, bias, *, epsilon):
    if len(x.shape) < 3:
        raise ShapeError(f"x must be (N, C, ...) with at least one spatial axis, got shape {x.shape}")
    dtype = float_dtype(x, scale, bias)
    for what, t in (("scale", scale), ("bias", bias)):
        if t.shape != (x.shape[1],):
            raise ShapeError(f"{what} must have shape ({x.shape[1]},), one per channel of x, got {t.shape}")
    return [TensorType(x.shape, dtype)]


def _instance_norm_ref(x, scale, bias, *, epsilon):
    def per_channel(p):
        return p.astype(np.float64).reshape(-1, *[1] * (x.ndim - 2))

    y = _normalised(x, tuple(range(2, x.ndim)), epsilon) * per_channel(scale) + per_channel(bias)
    return y.astype(x.dtype)


def _instance_norm_te(x, scale, bias, *, epsilon):
    """Layer norm's chain with the statistics per (n, c): `instance_norm_mean` and `instance_norm_var` over the
    spatial axes, then the output (tag "instance_norm"), which the row schedule runs over (n, c) like a layer
    norm: a channel's statistics and its normalisation in one loop."""
    _instance_norm_type(te_type(x), te_type(scale), te_type(bias), epsilon=epsilon)
    spatial = tuple(range(2, x.ndim))
    count = E.const(float(math.prod(x.shape[2:])), x.dtype)
    ks = [te.reduce_axis(x.shape[d], f"r{d}") for d in spatial]
    mean = te.compute(x.shape[:2], lambda n, c: te.sum(x[(n, c, *ks)] / count, axis=ks), name="instance_norm_mean",
                      tag="reduce", attrs={"axis": spatial})

    def squared_deviation(n, c):
        centred = x[(n, c, *ks)] - mean[n, c]
        return te.sum(centred * centred / count, axis=ks)

    var = te.compute(x.shape[:2], squared_deviation, name="instance_norm_var", tag="reduce", attrs={"axis": spatial})

    def normalised(*i):
        n, c = i[:2]
        return (x[i] - mean[n, c]) * E.rsqrt(var[n, c] + epsilon) * scale[c] + bias[c]

    return te.compute(x.shape, normalised, name="instance_norm", tag="instance_norm",
                      attrs={"axis": 2, "epsilon": epsilon, "row_axes": 2})


def _instance_norm_expand(x, scale, bias, *, epsilon):
    """Standardise each (n, c) over the spatial axes, then scale and shift per channel."""
    return _standardized(x, range(2, x.ndim), epsilon) * scale.per_channel(x.ndim) + bias.per_channel(x.ndim)


declare("instance_norm", kind=REDUCTION, attrs={"epsilon": 1e-5}, infer=_instance_norm_type,
        reference=_instance_norm_ref, compute=_instance_norm_te, expand=_instance_norm_expand,
        rows=lambda x, **_: x[:2], num_inputs=3, samples=(
            Sample((((2, 3, 5, 4), "float32"), ((3,), "float32"), ((3,), "float32"))),
            Sample((((1, 4, 10), "float32"), ((4,), "float32"), ((4,), "float32")), {"epsilon": 1e-3}),
        ))


# ---- local response normalisation (across channels) ----

def _lrn_type(x, *, size, alpha, beta, bias):
    if len(x.shape) < 3:
        raise ShapeError(f"lrn needs x of shape (N, C, D1, ...), got {x.shape}")
    if size is None or int(size) < 1:
        raise ShapeError(f"lrn needs a positive size, got {size!r}")
    return [TensorType(x.shape, float_dtype(x))]


def _lrn_ref(x, *, size, alpha, beta, bias):
    wide = x.astype(np.float64)
    squares = np.pad(wide * wide, [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    sums = sum(squares[:, k:k + x.shape[1]] for k in range(size))
    return (wide / (bias + alpha / size * sums) ** beta).astype(x.dtype)


declare("lrn", kind=REDUCTION, attrs={"size": None, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}, infer=_lrn_type,
        reference=_lrn_ref, compute=lambda x, *, size, alpha, beta, bias: nn.lrn(x, int(size), alpha, beta, bias),
        samples=(Sample((((2, 7, 5, 4), "float32"),), {"size": 3, "alpha": 0.2, "beta": 0.75, "bias": 2.0}),
                 Sample((((1, 5, 6), "float32"),), {"size": 4, "alpha": 0.5, "beta": 0.5})))
