"""Constant folding: a node whose inputs are all constants is evaluated now, with its op's NumPy reference, and
becomes a constant.

Graphs are in topological order, so one forward walk folds whole chains: a node's inputs are substituted before it
is visited, and a node that reads only folded values is itself folded. There is no separate shape-computation
folding to do: every shape in the IR is static, shape-like operands (reshape's shape, slice's bounds, pads, axes)
are attributes, and ONNX's Shape, Size and ConstantOfShape become constants at import, so whatever computes on
shapes is all-constant by the time it reaches this pass.

This pass also removes dead code. Every pass ends with `GraphEditor.finish`, which drops the nodes no output
depends on; this one always rebuilds the graph, so a graph imported with unused branches loses them at opt_level 1
even when nothing folds.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.registry import lookup
from ..te.dims import is_static, mentions_dynamic
from .editor import GraphEditor, map_nodes
from .context import PassContext


def fold_constants(g: Graph, ctx: PassContext) -> Graph:
    """Evaluate the nodes that read only constants at compile time, so no kernel recomputes them every run."""
    def fold(ed: GraphEditor, node: Node):
        inputs = ed.inputs_of(node)
        if (not all(v.is_constant for v in inputs) or not all(is_static(v.shape) for v in node.outputs)
                or any(mentions_dynamic(a) for a in node.attrs.values())):
            return None  # (a value that depends on a dynamic dimension is computed per call)
        ctx.note(f"folded {node.name} ({node.op})")
        return _evaluate(ed, node, inputs)

    return map_nodes(g, fold)


def _evaluate(ed: GraphEditor, node: Node, inputs: tuple[Value, ...]) -> tuple[Value, ...]:
    """The node's outputs as constants, typed exactly as the node's outputs are (a reference may compute in a
    wider dtype or return a NumPy scalar; `run_reference` casts the same way)."""
    with np.errstate(all="ignore"):
        result = lookup(node.op).reference(*(v.data for v in inputs), **node.attrs)
    results = result if isinstance(result, tuple) else (result,)
    return tuple(ed.const(np.asarray(a).astype(v.dtype).reshape(v.shape), v.name)
                 for v, a in zip(node.outputs, results))
