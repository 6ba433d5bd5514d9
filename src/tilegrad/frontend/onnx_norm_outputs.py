"""ONNX normalizations whose optional outputs are statistics: LayerNormalization's Mean and InvStdDev, and
BatchNormalization in training mode (the batch's statistics normalize, and the running mean and variance are
updated with `momentum`). The statistics are reductions in basic ops, computed in the stash type (float32) as
ONNX's function body does. The reader (`onnx.py`) imports this module, which registers them."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import onnx_op


@onnx_op("LayerNormalization")
def _layer_norm(b: B, name, x, scale=None, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    inputs = tuple(v for v in (x, scale, bias) if v is not None)
    y = b.op("layer_norm", *inputs, name=name, axis=axis, epsilon=float(epsilon))
    if b.node_outputs == 1:
        return y
    if stash_type != 1:
        raise UnsupportedFeatureError(f"node {name!r}: LayerNormalization stash_type={stash_type} is not supported "
                                      f"(only 1, float32)")
    stashed = x if x.dtype == "float32" else b.op("cast", x, name=f"{name}_stashed", to="float32")
    axes = tuple(range(axis % len(x.shape), len(x.shape)))
    mean, var = _moments(b, name, stashed, axes)
    eps = b.const(np.asarray(epsilon, "float32"), f"{name}_epsilon")
    std = b.op("sqrt", b.op("add", var, eps, name=f"{name}_var_eps"), name=f"{name}_std")
    return y, mean, b.op("reciprocal", std, name=f"{name}_inv_std_dev")


def _moments(b: B, name, x, axes):
    """The mean and the (biased) variance of x over `axes`, kept as axes of extent 1."""
    mean = b.op("reduce_mean", x, name=f"{name}_mean", axes=axes, keepdims=1)
    centered = b.op("sub", x, mean, name=f"{name}_centered")
    square = b.op("mul", centered, centered, name=f"{name}_square")
    return mean, b.op("reduce_mean", square, name=f"{name}_var", axes=axes, keepdims=1)


@onnx_op("BatchNormalization")
def _batch_norm(b: B, name, x, scale, bias, mean, var, *, epsilon=1e-5, momentum=0.9, training_mode=0, spatial=1):
    if not training_mode:
        return b.op("batch_norm", x, scale, bias, mean, var, name=name, epsilon=float(epsilon))
    axes = (0,) + tuple(range(2, len(x.shape)))
    batch_mean, batch_var = _moments(b, f"{name}_batch", x, axes)
    flat = (x.shape[1],)
    batch_mean = b.op("reshape", batch_mean, name=f"{name}_batch_mean_flat", shape=flat)
    batch_var = b.op("reshape", batch_var, name=f"{name}_batch_var_flat", shape=flat)
    y = b.op("batch_norm", x, scale, bias, batch_mean, batch_var, name=name, epsilon=float(epsilon))
    if b.node_outputs == 1:
        return y
    keep = b.const(np.asarray(momentum, x.dtype), f"{name}_momentum")
    take = b.const(np.asarray(1 - momentum, x.dtype), f"{name}_one_minus_momentum")

    def running(old, batch, what):
        kept = b.op("mul", old, keep, name=f"{name}_{what}_kept")
        return b.op("add", kept, b.op("mul", batch, take, name=f"{name}_{what}_new"), name=f"{name}_running_{what}")
    return y, running(mean, batch_mean, "mean"), running(var, batch_var, "var")
