"""MaxPool's optional Indices output: for each output element, the flat index in the input of the maximum its
window holds (row-major over N, C and the spatial axes; with storage_order=1 the spatial axes are column-major),
the first one in window order when several are equal, as ONNX Runtime gives.

In registry ops: the input padded with the lowest value and flattened per channel, every window gathered by a
constant table of positions, argmax over the window, and the winning offset looked up in a constant table of
input indices."""

from __future__ import annotations

import itertools
import math

import numpy as np

from .onnx_builder import OnnxBuilder as B


def max_pool_indices(b: B, name, x, out_spatial, kernel, strides, pads, dilations, storage_order):
    """int64 indices of shape x.shape[:2] + out_spatial."""
    nd = len(kernel)
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    begins = pads[:nd]
    reach = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_spatial, strides, kernel, dilations)]
    ends = [max(0, r - m - p) for r, m, p in zip(reach, spatial, begins)]
    lowest = -np.inf if x.dtype.startswith("float") else int(np.iinfo(x.dtype).min)
    padded = b.op("pad", x, name=f"{name}_padded", pads=(0, 0, *begins, 0, 0, *ends), value=lowest)
    padded_spatial = padded.shape[2:]
    flat = b.op("reshape", padded, name=f"{name}_flat", shape=(n, c, math.prod(padded_spatial)))
    outputs = list(itertools.product(*(range(o) for o in out_spatial)))
    offsets = list(itertools.product(*(range(k) for k in kernel)))
    # positions[o, k]: window o's k-th element, in the padded input and in the input proper
    at = np.array([[[o * s + k * d for o, s, k, d in zip(out, strides, off, dilations)] for off in offsets]
                   for out in outputs], np.int64)
    padded_flat = np.ravel_multi_index(tuple(np.moveaxis(at, -1, 0)), padded_spatial)
    source = at - np.array(begins, np.int64)
    order = "F" if storage_order else "C"
    input_flat = np.ravel_multi_index(tuple(np.moveaxis(source, -1, 0)), spatial, mode="clip", order=order)
    windows = b.op("gather", flat, b.const(padded_flat, f"{name}_windows_at"), name=f"{name}_windows", axis=2)
    best = b.op("argmax", windows, name=f"{name}_argmax", axis=3, keepdims=0)
    row = b.const((np.arange(len(outputs), dtype=np.int64) * len(offsets)), f"{name}_row")
    chosen = b.op("add", best, row, name=f"{name}_chosen")
    index = b.op("gather", b.const(input_flat.reshape(-1), f"{name}_input_index"), chosen, name=f"{name}_index",
                 axis=0)
    channel = b.const((np.arange(n * c, dtype=np.int64) * math.prod(spatial)).reshape(n, c, 1),
                      f"{name}_channel_base")
    indices = b.op("add", index, channel, name=f"{name}_flat_indices")
    return b.op("reshape", indices, name=f"{name}_indices", shape=(n, c, *out_spatial))
