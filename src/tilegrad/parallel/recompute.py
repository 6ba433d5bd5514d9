"""Recomputation (MindSpore §3.1.9): trade backward-pass FLOPs for activation memory under a budget.

`plan_recompute` profiles a torch.fx-captured model once (each node's output bytes and an estimate of its FLOPs),
then chooses segments, runs of consecutive nodes, whose activations are dropped after the forward and recomputed
when the backward reaches them. The memory model: a node's output stays alive until the backward unless it lies
inside a recomputed segment and no node outside that segment reads it (a segment's inputs and outputs are kept by
their other readers); recomputing a segment briefly brings its dropped activations back, so

    peak = bytes kept + the largest segment's dropped bytes.

The choice is greedy: among runs of up to `max_segment` nodes that overlap no chosen segment, take the one that
lowers the peak most per FLOP recomputed, until the peak fits the budget. `apply_recompute` rewrites the graph:
each segment becomes a submodule called through `torch.utils.checkpoint` (non-reentrant), which runs the same
operations again in the backward, so outputs and gradients are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.fx import GraphModule, Node
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata
from torch.fx.passes.split_module import split_module
from torch.utils.checkpoint import checkpoint

from ..errors import MemoryLimitError, TilegradError

_COMPUTE = ("call_module", "call_function", "call_method")


@dataclass(frozen=True)
class NodeCost:
    """What one node's output costs to keep (bytes) and to compute again (FLOPs, estimated)."""

    name: str
    bytes: int
    flops: int
    readers: tuple[str, ...]  # the nodes (or "output") that read it


@dataclass(frozen=True)
class RecomputePlan:
    """The segments to recompute (node names in graph order), and the simulated peaks before and after."""

    segments: tuple[tuple[str, ...], ...]
    peak_bytes_before: int
    peak_bytes_after: int
    recomputed_flops: int


def profile(gm: GraphModule, *example_inputs: torch.Tensor) -> list[NodeCost]:
    """Each compute node's output bytes and FLOPs, in graph order, from one run on the example inputs."""
    ShapeProp(gm).propagate(*example_inputs)
    modules = dict(gm.named_modules())
    costs = []
    for node in gm.graph.nodes:
        if node.op in _COMPUTE:
            metas = _tensor_metas(node.meta.get("tensor_meta"))
            nbytes = sum(math.prod(m.shape) * m.dtype.itemsize for m in metas)
            flops = _flops(node, modules, metas)
            costs.append(NodeCost(node.name, nbytes, flops, tuple(u.name for u in node.users)))
    return costs


def _tensor_metas(meta) -> list:
    if isinstance(meta, TensorMetadata):  # a NamedTuple: test it before tuples of them
        return [meta]
    if isinstance(meta, (tuple, list)):
        return [m for sub in meta for m in _tensor_metas(sub)]
    if isinstance(meta, dict):
        return [m for sub in meta.values() for m in _tensor_metas(sub)]
    return []  # None, or a non-tensor output


def _flops(node: Node, modules: dict[str, nn.Module], metas: list) -> int:
    """Multiply-adds count twice for linear layers, convolutions and matmuls; anything else one per element."""
    out = sum(math.prod(m.shape) for m in metas)
    module = modules.get(node.target) if node.op == "call_module" else None
    if isinstance(module, nn.Linear):
        return 2 * out * module.in_features
    if isinstance(module, nn.modules.conv._ConvNd):
        return 2 * out * module.in_channels // module.groups * math.prod(module.kernel_size)
    if node.target in (torch.matmul, torch.bmm, torch.mm, "matmul", "bmm", "mm"):
        first = node.args[0].meta.get("tensor_meta") if isinstance(node.args[0], Node) else None
        return 2 * out * (first.shape[-1] if first is not None else 1)
    return out


def simulate_peak(costs: list[NodeCost], segments: tuple[tuple[str, ...], ...]) -> int:
    """Peak activation bytes when `segments` are recomputed (see the module docstring for the model)."""
    segment_of = {name: i for i, seg in enumerate(segments) for name in seg}
    kept = 0
    dropped = [0] * len(segments)
    kept_through = [0] * len(segments)  # kept bytes of the nodes up to each segment's end
    for c in costs:
        seg = segment_of.get(c.name)
        if seg is None or any(segment_of.get(r) != seg for r in c.readers):
            kept += c.bytes
        else:
            dropped[seg] += c.bytes
        if seg is not None:
            kept_through[seg] = kept
    return max([kept] + [k + d for k, d in zip(kept_through, dropped)])


def plan_recompute(gm: GraphModule, example_inputs: tuple[torch.Tensor, ...], budget_bytes: int, *,
                   max_segment: int = 8) -> RecomputePlan:
    """Segments to recompute so that the simulated peak activation memory is at most `budget_bytes`."""
    costs = profile(gm, *example_inputs)
    flops = {c.name: c.flops for c in costs}
    segments: tuple[tuple[str, ...], ...] = ()
    before = peak = simulate_peak(costs, segments)
    while peak > budget_bytes:
        taken = {n for seg in segments for n in seg}
        best = None
        for i in range(len(costs)):
            for j in range(i + 2, min(i + max_segment, len(costs)) + 1):  # one node alone frees nothing
                run = tuple(c.name for c in costs[i:j])
                if taken.intersection(run):
                    break
                gain = peak - simulate_peak(costs, segments + (run,))
                score = gain / max(1, sum(flops[n] for n in run))
                if gain > 0 and (best is None or score > best[0]):
                    best = (score, run)
        if best is None:
            raise MemoryLimitError(f"recompute: the activations need at least {peak} bytes with every useful segment "
                                   f"recomputed, over the budget of {budget_bytes} bytes; raise the budget, "
                                   f"max_segment ({max_segment}), or split the batch")
        segments = tuple(sorted(segments + (best[1],), key=lambda seg: [c.name for c in costs].index(seg[0])))
        peak = simulate_peak(costs, segments)
    return RecomputePlan(segments, before, peak, sum(flops[n] for seg in segments for n in seg))


def apply_recompute(gm: GraphModule, plan: RecomputePlan) -> GraphModule:
    """The model with each planned segment in a submodule run through `torch.utils.checkpoint`."""
    segment_of = {name: i for i, seg in enumerate(plan.segments) for name in seg}
    nodes = list(gm.graph.nodes)
    unknown = set(segment_of) - {n.name for n in nodes}
    if unknown:
        raise TilegradError(f"apply_recompute: the plan names nodes {sorted(unknown)} that the graph does not have; "
                            f"plan on this graph")
    partition: dict[Node, int] = {}
    recomputed: set[int] = set()
    current, key = -1, object()
    for node in nodes:
        if node.op in _COMPUTE:
            node_key = segment_of.get(node.name, "kept")
            if node_key != key:
                current, key = current + 1, node_key
                if node_key != "kept":
                    recomputed.add(current)
            partition[node] = current
    following = max(current, 0)
    for node in reversed(nodes):  # constants and parameters go with the next compute node
        if node.op in _COMPUTE:
            following = partition[node]
        elif node.op == "get_attr":
            partition[node] = following
    split = split_module(gm, gm, lambda node: partition[node])
    for node in list(split.graph.nodes):
        if node.op == "call_module" and int(node.target.removeprefix("submod_")) in recomputed:
            with split.graph.inserting_before(node):
                module = split.graph.get_attr(node.target)
                replaced = split.graph.call_function(checkpoint, (module, *node.args),
                                                     {**node.kwargs, "use_reentrant": False})
            node.replace_all_uses_with(replaced)
            split.graph.erase_node(node)
    split.recompile()
    return split
