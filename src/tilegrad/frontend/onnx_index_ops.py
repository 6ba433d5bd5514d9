"""ONNX's indexing by data mapped onto the registry: GatherElements, GatherND, ScatterElements (and the older
Scatter), ScatterND, OneHot and TopK, whose values are its indices' gather_elements. Importing `onnx_ops` registers
them; k and depth must be constants."""

from __future__ import annotations

import numpy as np

from .onnx import OnnxBuilder as B
from .onnx import constant_input, onnx_op


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
