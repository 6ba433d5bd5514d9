"""Bias folding: an `add` of a constant after a matrix product or a convolution becomes that op's bias input, so
the kernel adds it while the result is still in registers instead of a second pass over memory.

- `matmul` or `gemm` (without C) of a 2-D constant right-hand side, then an add of a constant that varies along
  the last axis only ((N,), (1, N), or a scalar) -> `gemm` with C = that constant and beta = 1. A matmul whose
  left operand has leading batch axes, (B, S, K) @ (K, N), is one gemm over its B * S rows between two reshapes.
- `conv` or `conv_transpose` (no bias, or a constant one), then an add of a constant that varies along the channel
  axis only ((C, 1, 1), (1, C, 1, 1), or a scalar) -> the same op with that constant (plus the old bias) as bias.

Only when the product or convolution has no reader but the add and is not a graph output, and the add's result has
the product's shape (the constant does not broadcast it further).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Graph, Node, Value
from .editor import GraphEditor, map_nodes
from .context import PassContext


def fold_bias(g: Graph, ctx: PassContext) -> Graph:
    """Turn `product + constant` into a product with a bias, which its kernel adds for free."""
    producers, readers = g.producers(), g.consumers()
    outputs = {id(v) for v in g.outputs}

    def fold(ed: GraphEditor, node: Node):
        if node.op != "add" or not node.outputs[0].dtype.startswith("float"):
            return None  # (gemm accumulates in float64, which would round large integers)
        inputs = ed.inputs_of(node)
        for slot in (0, 1):
            source, constant = node.inputs[slot], inputs[1 - slot]
            producer = producers.get(id(source))
            rewrite = _REWRITES.get(producer.op) if producer is not None else None
            if (rewrite is None or not constant.is_constant or source.type != node.outputs[0].type
                    or readers[id(source)] != [node] or id(source) in outputs):
                continue
            fused = rewrite(ed, producer, constant.data)
            if fused is not None:
                ctx.note(f"folded {node.name} into {producer.name} as its bias")
                return fused
        return None

    return map_nodes(g, fold)


def _along_axis(constant: np.ndarray, rank: int, axis: int, extent: int) -> np.ndarray | None:
    """`constant` as a vector of `extent` entries when, broadcast against a rank-`rank` tensor, it varies along
    `axis` only; None otherwise."""
    if constant.ndim > rank:
        return None
    shape = (1,) * (rank - constant.ndim) + constant.shape
    if any(n != 1 for d, n in enumerate(shape) if d != axis) or shape[axis] not in (1, extent):
        return None
    return np.broadcast_to(constant.reshape(shape[axis]), (extent,)).copy()


def _into_product(ed: GraphEditor, product: Node, constant: np.ndarray) -> Value | None:
    a, b, *c = ed.inputs_of(product)
    out = product.outputs[0]
    if c or not b.is_constant or len(b.shape) != 2 or len(a.shape) < 2:
        return None
    bias = _along_axis(constant, len(out.shape), len(out.shape) - 1, out.shape[-1])
    if bias is None:
        return None
    attrs = {**product.attrs, "beta": 1.0} if product.op == "gemm" else {}
    rows = a if len(a.shape) == 2 else ed.op("reshape", a, name=f"{product.name}_rows",
                                             shape=(math.prod(a.shape[:-1]), a.shape[-1]))
    c = ed.const(bias.astype(out.dtype), f"{product.name}_bias")
    result = ed.op("gemm", rows, b, c, name=product.name, **attrs)
    return result if len(a.shape) == 2 else ed.op("reshape", result, name=f"{product.name}_unrows", shape=out.shape)


def _into_convolution(ed: GraphEditor, conv: Node, constant: np.ndarray) -> Value | None:
    x, w, *old = ed.inputs_of(conv)
    out = conv.outputs[0]
    bias = _along_axis(constant, len(out.shape), 1, out.shape[1])
    if bias is None or (old and not old[0].is_constant):
        return None
    total = bias.astype(np.float64) + (old[0].data.astype(np.float64) if old else 0.0)
    return ed.op(conv.op, x, w, ed.const(total.astype(out.dtype), f"{conv.name}_bias"), name=conv.name,
                 **conv.attrs)


_REWRITES = {"matmul": _into_product, "gemm": _into_product, "conv": _into_convolution,
             "conv_transpose": _into_convolution}
