"""ONNX's indexing by data mapped onto the registry: GatherElements, GatherND, ScatterElements (and the older
Scatter), ScatterND, TensorScatter (a KV-cache update), OneHot and TopK, whose values are its indices'
gather_elements. The reader (`onnx.py`) imports this module, which registers them; k and depth must be constants."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op


@onnx_op("GatherElements")
def _gather_elements(b: B, name, x, indices, *, axis=0):
    return b.op("gather_elements", x, indices, name=name, axis=axis)


@onnx_op("GatherND")
def _gather_nd(b: B, name, x, indices, *, batch_dims=0):
    return b.op("gather_nd", x, indices, name=name, batch_dims=int(batch_dims))


@onnx_op("ScatterElements", "Scatter")
def _scatter_elements(b: B, name, x, indices, updates, *, axis=0, reduction="none"):
    return b.op("scatter_elements", x, indices, updates, name=name, axis=axis, reduction=reduction)


@onnx_op("ScatterND")
def _scatter_nd(b: B, name, x, indices, updates, *, reduction="none"):
    return b.op("scatter_nd", x, indices, updates, name=name, reduction=reduction)


@onnx_op("TensorScatter")
def _tensor_scatter(b: B, name, cache, update, write_indices=None, *, mode="linear", axis=-2):
    """`update` written into `cache` along the sequence axis, sample n's rows from write_indices[n] (0 if absent)
    on (modulo the cache's length in circular mode): one scatter_elements whose indices are the write positions
    of every element of `update`."""
    if mode not in ("linear", "circular"):
        raise UnsupportedFeatureError(f"node {name!r}: TensorScatter mode {mode!r} is not linear or circular")
    rank = len(cache.shape)
    a = axis % rank if -rank <= axis < rank else 0
    others = [d for d in range(rank) if d != a]
    if a == 0 or len(update.shape) != rank or update.shape[a] > cache.shape[a] or any(
            update.shape[d] != cache.shape[d] for d in others):
        raise ShapeError(f"node {name!r}: TensorScatter needs a sequence axis other than the batch's and an update "
                         f"that matches the cache outside it, no longer along it; got axis {axis}, cache "
                         f"{list(cache.shape)}, update {list(update.shape)}")
    along = [1] * rank
    along[a] = update.shape[a]
    positions = b.const(np.arange(update.shape[a], dtype=np.int64).reshape(along), f"{name}_steps")
    if write_indices is not None:
        if write_indices.shape != (cache.shape[0],):
            raise ShapeError(f"node {name!r}: TensorScatter write_indices of shape {list(write_indices.shape)} "
                             f"need one index per sample, shape {[cache.shape[0]]}")
        starts = b.op("reshape", write_indices, name=f"{name}_starts", shape=(cache.shape[0],) + (1,) * (rank - 1))
        positions = b.op("add", starts, positions, name=f"{name}_positions")
    if mode == "circular":
        length = b.const(np.array(cache.shape[a], np.int64), f"{name}_length")
        positions = b.op("mod", positions, length, name=f"{name}_wrapped", fmod=0)
    full = b.op("expand", positions, name=f"{name}_indices", shape=update.shape)
    return b.op("scatter_elements", cache, full, update, name=name, axis=a, reduction="none")


@onnx_op("OneHot")
def _one_hot(b: B, name, indices, depth, values, *, axis=-1):
    n = int(np.asarray(constant_input(depth, "depth", name)).reshape(-1)[0])
    return b.op("one_hot", indices, values, name=name, depth=n, axis=axis)


@onnx_op("TopK")
def _topk(b: B, name, x, k=None, *, axis=-1, largest=1, sorted=1):
    """The values and indices of the top k, sorted whatever `sorted` says (which ONNX allows). Before opset 10, k is
    an attribute, and arrives as the same keyword."""
    count = k if b.opset < 10 else int(np.asarray(constant_input(k, "k", name)).reshape(-1)[0])
    indices = b.op("topk_indices", x, name=f"{name}_indices", k=int(count), axis=axis, largest=int(largest))
    return b.op("gather_elements", x, indices, name=name, axis=axis), indices
