"""Slice hoisting: a slice of an element-wise result is the element-wise op applied to slices of its operands,
which computes only the kept elements.

The slice moves above an element-wise or broadcasting op when it is that op's only reader, and keeps moving up
through a chain of such ops. Each operand is sliced along the axes it shares with the result; an operand that
broadcasts along a sliced axis (extent 1, or an axis it lacks) is left as it is there, and a constant operand is
sliced now rather than by a node.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.ops.shape import normalize_axes
from ..ir.registry import BROADCAST, ELEMWISE, lookup
from .editor import GraphEditor, map_nodes
from .context import PassContext

# Element-wise by kind, but each element's result depends on its position (trilu), on a shape attribute
# (expand) or on per-channel parameters laid along axis 1 rather than broadcast from the right (batch_norm).
_POSITIONAL = frozenset({"trilu", "expand", "batch_norm"})


def hoist_slice(g: Graph, ctx: PassContext) -> Graph:
    """Compute element-wise ops only on the elements a slice keeps."""
    producers, readers = g.producers(), g.consumers()
    outputs = {id(v) for v in g.outputs}

    def hoistable(v: Value) -> Node | None:
        """The element-wise node producing `v` if a slice of `v` may move above it."""
        node = producers.get(id(v))
        if (node is None or len(node.outputs) != 1 or node.op in _POSITIONAL
                or lookup(node.op).kind not in (ELEMWISE, BROADCAST)
                or len(readers[id(v)]) != 1 or id(v) in outputs):
            return None
        return node

    def sliced(ed: GraphEditor, v: Value, cuts: dict[int, tuple[int, int, int]]) -> Value:
        """`v` (of the old graph) cut along {axis: (start, end, step)}, hoisted as far up as it goes."""
        node = hoistable(v)
        if node is None:
            return _cut(ed, ed.get(v), cuts)
        ctx.note(f"sliced the operands of {node.name} ({node.op})")
        rank = len(v.shape)
        operands = [sliced(ed, x, _shared_cuts(cuts, x.shape, rank)) for x in node.inputs]
        return ed.op(node.op, *operands, name=node.name, **node.attrs)

    def hoist(ed: GraphEditor, node: Node):
        if node.op != "slice" or hoistable(node.inputs[0]) is None:
            return None
        return sliced(ed, node.inputs[0], _cuts(node))

    return map_nodes(g, hoist)


def _cuts(node: Node) -> dict[int, tuple[int, int, int]]:
    """A slice node's attributes as {axis: (start, end, step)}, axes counted from 0."""
    starts, ends, axes, steps = (node.attrs[k] for k in ("starts", "ends", "axes", "steps"))
    rank = len(node.inputs[0].shape)
    axes = range(len(starts)) if axes is None else normalize_axes(axes, rank, "slice axes")
    steps = steps if steps is not None else (1,) * len(starts)
    return {a: (int(s), int(e), int(k)) for a, s, e, k in zip(axes, starts, ends, steps)}


def _shared_cuts(cuts: dict[int, tuple[int, int, int]], shape: tuple[int, ...], rank: int):
    """The cuts of a rank-`rank` result that apply to an operand of `shape` broadcast into it (right-aligned);
    an axis the operand lacks or has extent 1 on is broadcast, not cut. Bounds carry over unchanged, since the
    operand's extent on a shared axis is the result's, and ONNX resolves negative bounds by the extent alone."""
    offset = rank - len(shape)
    return {a - offset: cut for a, cut in cuts.items() if a >= offset and shape[a - offset] != 1}


def _cut(ed: GraphEditor, v: Value, cuts: dict[int, tuple[int, int, int]]) -> Value:
    if not cuts:
        return v
    if v.is_constant:
        index = [slice(None)] * len(v.shape)
        for a, (start, end, step) in cuts.items():
            index[a] = slice(start, end, step)
        return ed.const(np.ascontiguousarray(v.data[tuple(index)]), f"{v.name}_slice")
    axes = sorted(cuts)
    return ed.op("slice", v, name=f"{v.name}_slice", starts=[cuts[a][0] for a in axes],
                 ends=[cuts[a][1] for a in axes], axes=axes, steps=[cuts[a][2] for a in axes])
