"""Batch normalisation at inference is a per-channel affine map, y = x * scale + shift with
scale = gamma / sqrt(var + eps) and shift = beta - mean * scale. After a convolution with constant weights it
folds into them: each output channel's weights are multiplied by its scale, and its bias b becomes
(b - mean) * scale + beta. Any other batch norm becomes a `mul` and an `add` of constants, which the fusion pass
can attach to whatever produced x.

The folded parameters are computed in float64 and cast once, so the folded model differs from the original only
by the rounding of that cast.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from .editor import GraphEditor, map_nodes
from .context import PassContext


def fold_batch_norm(g: Graph, ctx: PassContext) -> Graph:
    """Remove batch norms: into the preceding convolution's weights, or else into one multiply-add."""
    producers, readers = g.producers(), g.consumers()
    outputs = {id(v) for v in g.outputs}

    def fold(ed: GraphEditor, node: Node):
        if node.op != "batch_norm":
            return None
        x, *params = ed.inputs_of(node)
        if not all(p.is_constant for p in params):
            return None
        scale, shift = _affine(*(p.data for p in params), node.attrs["epsilon"])
        conv = producers.get(id(node.inputs[0]))
        if conv is not None and _foldable(conv, node, readers, outputs):
            ctx.note(f"folded {node.name} into {conv.name}")
            return _fold_into_conv(ed, conv, scale, shift)
        ctx.note(f"{node.name}: batch_norm as mul and add")
        return _as_multiply_add(ed, node, x, scale, shift)

    return map_nodes(g, fold)


def _affine(gamma, beta, mean, var, epsilon) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) per channel, in float64."""
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    return scale, beta.astype(np.float64) - mean.astype(np.float64) * scale


def _foldable(conv: Node, bn: Node, readers: dict[int, list[Node]], outputs: set[int]) -> bool:
    """A conv or conv_transpose with constant weights (and bias, if any) whose output only this batch norm reads."""
    out = conv.outputs[0]
    return (conv.op in ("conv", "conv_transpose") and all(v.is_constant for v in conv.inputs[1:])
            and readers[id(out)] == [bn] and id(out) not in outputs)


def _fold_into_conv(ed: GraphEditor, conv: Node, scale: np.ndarray, shift: np.ndarray) -> Value:
    x, w, *bias = ed.inputs_of(conv)
    weights = w.data.astype(np.float64)
    if conv.op == "conv":  # weights (M, C / group, *kernel): output channel m is axis 0
        folded = weights * scale.reshape(-1, *[1] * (weights.ndim - 1))
    else:  # weights (C, M / group, *kernel): output channel g * M / group + j is group g's axis-1 entry j
        group, (cin, per_group, *kernel) = conv.attrs["group"], weights.shape
        grouped = weights.reshape(group, cin // group, per_group, *kernel)
        folded = (grouped * scale.reshape(group, 1, per_group, *[1] * len(kernel))).reshape(weights.shape)
    b = bias[0].data.astype(np.float64) if bias else 0.0
    new_w = ed.const(folded.astype(w.dtype), f"{conv.name}_weight")
    new_b = ed.const((b * scale + shift).astype(w.dtype), f"{conv.name}_bias")
    return ed.op(conv.op, x, new_w, new_b, name=conv.name, **conv.attrs)


def _as_multiply_add(ed: GraphEditor, bn: Node, x: Value, scale: np.ndarray, shift: np.ndarray) -> Value:
    per_channel = (-1, *[1] * (len(x.shape) - 2))  # broadcasts over (N, C, ...) along C
    scaled = ed.op("mul", x, ed.const(scale.reshape(per_channel).astype(x.dtype), f"{bn.name}_scale"),
                   name=f"{bn.name}_scale")
    return ed.op("add", scaled, ed.const(shift.reshape(per_channel).astype(x.dtype), f"{bn.name}_shift"),
                 name=bn.name)
