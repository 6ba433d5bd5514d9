"""Move element-wise ops above the reshapes that feed them, so that they can fuse into the op before the reshape.

A packed matmul of an (B, S, K) activation runs on (B*S, K) rows and is reshaped back to (B, S, N); the bias,
GELU or residual add that follows then sits behind a reshape, which no epilogue fusion crosses. Element-wise
ops do not care about the shape they run in, so they are rewritten to run in the reshape's input shape:
`f(reshape(a), c) -> reshape(f(a, c))`, other full-size operands reshaped too (a reshape is a view, free in the
executor), operands that broadcast only along the last axis left alone (the last axis is kept, so they line up
the same way). Reshape chains collapse as they form, so `reshape(f(reshape(a)))` back to a's shape is `f(a)`.
"""

from __future__ import annotations

import math

from ..ir.graph import Graph, Node, Value
from ..ir.registry import BROADCAST, ELEMWISE, lookup
from .editor import GraphEditor
from .context import PassContext


def _source(v: Value, producers: dict[int, Node]) -> Value | None:
    """The input of the reshape that made `v` (in the new graph), if a reshape made it."""
    node = producers.get(id(v))
    return node.inputs[0] if node is not None and node.op == "reshape" else None


def _broadcasts_alike(v: Value, old: tuple[int, ...], new: tuple[int, ...]) -> bool:
    """Whether `v` broadcasts against both shapes the same way: it varies along the last axis at most."""
    return math.prod(v.shape) in (1, old[-1]) and all(d == 1 for d in v.shape[:-1]) and len(v.shape) <= len(new)


def sink_reshape(g: Graph, ctx: PassContext) -> Graph:
    """Element-wise ops move above the reshapes feeding them (into the producer's shape)."""
    ed = GraphEditor(g)
    producers: dict[int, Node] = {}  # id(value) -> its node in the new graph
    moved = []
    for node in g.nodes:
        before = len(ed.nodes)
        out = _rewrite(ed, node, producers)
        if out is None:
            ed.keep(node)
        else:
            ed.replace(node.outputs[0], out)
            if node.op != "reshape":
                moved.append(node.name)
        for emitted in ed.nodes[before:]:
            for v in emitted.outputs:
                producers[id(v)] = emitted
    if moved:
        ctx.note(f"moved {len(moved)} element-wise op(s) above reshapes: {', '.join(moved[:6])}"
                 + (" ..." if len(moved) > 6 else ""))
    return ed.finish()


def _rewrite(ed: GraphEditor, node: Node, producers: dict[int, Node]) -> Value | None:
    if node.op == "reshape":
        src = _source(ed.get(node.inputs[0]), producers)
        if src is not None:  # a chain: reshape the original once, or not at all
            if src.shape == node.outputs[0].shape:
                return src
            return ed.op("reshape", src, name=node.name, shape=node.outputs[0].shape)
        return None
    if lookup(node.op).kind not in (ELEMWISE, BROADCAST) or len(node.outputs) != 1:
        return None
    shape = node.outputs[0].shape
    inputs = ed.inputs_of(node)
    sources = [_source(v, producers) for v in inputs]
    inner = next((s.shape for s, v in zip(sources, inputs) if s is not None and v.shape == shape), None)
    if inner is None or inner == shape or not inner or not shape or inner[-1] != shape[-1]:
        return None
    operands = []
    for v, src in zip(inputs, sources):
        if v.shape == shape:
            operands.append(src if src is not None and src.shape == inner else
                            ed.op("reshape", v, name=f"{node.name}_in", shape=inner))
        elif _broadcasts_alike(v, shape, inner):
            operands.append(v)
        else:
            return None
    out = ed.op(node.op, *operands, name=f"{node.name}_inner", **node.attrs)
    return ed.op("reshape", out, name=node.name, shape=shape)
