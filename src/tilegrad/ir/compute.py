"""A node's tensor-expression compute, and the floating-point work it does.

The one step from the graph to the compute layer: the executor, the tuner's tasks and its build worker all
build a node's computation here, so that the same node always gives the same computation.
"""

from __future__ import annotations

import math

from ..errors import ShapeError
from ..te.flops import compute_flops
from ..te.tensor import ComputeOp, Tensor, placeholder, topo_order
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


def node_flops(node: Node) -> int:
    """The floating-point operations of one run of `node`: its op's declared count (the arithmetic of the
    mathematical op, where the compute does more, such as padded lanes), else the count over its compute."""
    opdef = lookup(node.op)
    if opdef.flops is not None:
        return int(opdef.flops([v.type for v in node.inputs], [v.type for v in node.outputs], **node.attrs))
    return compute_flops(node_compute(node)[1])


def kernel_label(node: Node, outputs: list[Tensor]) -> str:
    """How reports name a node's kernel: its ops (a fused node's, in order, once each), its first output's shape
    and the length of its longest reduction, e.g. `panel_matmul+div+erf+add+mul[128x3072 r768]`, as `tilegrad
    tune --list-tasks` names its task (two products of one output shape differ by their reductions)."""
    ops = [n.op for n in node.attrs["body"].nodes] if node.op == "fused" else [node.op]
    reduction = max((math.prod(int(a.hi) - int(a.lo) + 1 for a in t.op.reduce_axes) for t in topo_order(outputs)
                     if isinstance(t.op, ComputeOp) and t.op.reduce_axes), default=0)
    shape = "x".join(str(d) for d in outputs[0].shape) + (f" r{reduction}" if reduction else "")
    return f"{'+'.join(dict.fromkeys(ops))}[{shape}]"
