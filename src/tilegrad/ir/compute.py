"""A node's tensor expression: the op's compute on placeholders of the node's input types."""

from __future__ import annotations

from ..errors import ShapeError
from ..te.tensor import Tensor, placeholder
from .graph import Node
from .registry import lookup


def node_compute(node: Node) -> tuple[list[Tensor], list[Tensor]]:
    """(inputs, outputs) of a node's tensor expression. Inputs are named by position, so two nodes of one
    workload give the same computation, and a tuned trace of one replays on the other."""
    opdef = lookup(node.op)
    holders = [placeholder(v.shape, v.dtype, f"in{i}") for i, v in enumerate(node.inputs)]
    out = opdef.compute(*holders, **node.attrs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if not all(isinstance(o, Tensor) for o in outs) or len(outs) != len(node.outputs):
        raise ShapeError(f"node {node.name!r} ({node.op}): its compute gave {len(outs)} tensor(s) for "
                         f"{len(node.outputs)} output(s)")
    return holders, outs
