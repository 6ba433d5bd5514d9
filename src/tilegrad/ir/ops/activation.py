"""Activation functions of floats beyond relu, sigmoid and tanh: softplus, softsign, mish, the exponential linear
units (elu, selu, celu), thresholded relu and shrink, with ONNX's attributes and defaults.

Each is one element-wise map (`te.nn.elementwise`); the references compute in float64 so that they judge the
computes' float32 arithmetic, not their own.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import nn
from ..registry import ELEMWISE, Sample, TensorType, declare

_SAMPLES = (Sample((((4, 33), "float32"),)), Sample((((1, 8, 5, 7), "float32"),)))


def _float(x: TensorType, **_) -> list[TensorType]:
    if not E.is_float(x.dtype):
        raise ShapeError(f"activations need a float input, got {x.dtype}; insert a Cast")
    return [x]


def _wide(fn):
    """A reference computing `fn` in float64 and returning the input's dtype."""
    return lambda x, **attrs: fn(x.astype(np.float64), **attrs).astype(x.dtype)


def _softplus(x):
    return np.logaddexp(x, 0.0)


def _elu(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _activation(name: str, compute, reference, attrs=None, samples=_SAMPLES, finite=True) -> None:
    declare(name, kind=ELEMWISE, attrs=attrs, infer=_float, reference=_wide(reference), compute=compute,
            samples=samples, finite=finite)


_activation("softplus", lambda x: nn.softplus(x), _softplus)
_activation("softsign", lambda x: nn.softsign(x), lambda x: x / (1 + np.abs(x)))
_activation("mish", lambda x: nn.mish(x), lambda x: x * np.tanh(_softplus(x)))
_activation("elu", lambda x, alpha: nn.elu(x, alpha), _elu, attrs={"alpha": 1.0},
            samples=_SAMPLES + (Sample((((4, 33), "float32"),), {"alpha": 0.5}),))
_activation("selu", lambda x, alpha, gamma: nn.selu(x, alpha, gamma),
            lambda x, alpha, gamma: gamma * _elu(x, alpha),
            attrs={"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875})
_activation("celu", lambda x, alpha: nn.celu(x, alpha),
            lambda x, alpha: np.maximum(x, 0) + np.minimum(alpha * np.expm1(np.minimum(x, 0) / alpha), 0),
            attrs={"alpha": 1.0}, samples=_SAMPLES + (Sample((((4, 33), "float32"),), {"alpha": 2.0}),))
_activation("thresholded_relu", lambda x, alpha: nn.thresholded_relu(x, alpha),
            lambda x, alpha: np.where(x > alpha, x, 0.0), attrs={"alpha": 1.0},
            samples=_SAMPLES + (Sample((((4, 33), "float32"),), {"alpha": -0.5}),))
_activation("shrink", lambda x, bias, lambd: nn.shrink(x, bias, lambd),
            lambda x, bias, lambd: np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0.0)),
            attrs={"bias": 0.0, "lambd": 0.5}, samples=_SAMPLES + (Sample((((4, 33), "float32"),),
                                                                          {"bias": 1.5, "lambd": 1.0}),))
