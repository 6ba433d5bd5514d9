"""Tuning tasks: the kernels of a compiled graph, deduplicated by workload.

A task is one kernel's computation (its tensor expression: structure, shapes, dtypes), the nodes of the graph
that run it (its weight is how many), and what the tuner needs around it: a key that names the workload in the
records database, its floating-point work, a NumPy reference, and the default schedule as a starting point.
Two nodes with the same computation share a task, whatever their names or the values of their weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Iterator

import numpy as np

from ..dtype import is_float, itemsize
from ..ir.compute import kernel_label, node_compute
from ..ir.graph import Graph, Node
from ..ir.registry import lookup
from ..passes.memory_plan import intermediates_of, plan_memory
from ..schedule.defaults import default_schedule
from ..schedule.trace import Trace
from ..target import Target
from ..te.flops import compute_flops
from ..te.printer import format_expr
from ..te.tensor import ComputeOp, Tensor, topo_order


@dataclasses.dataclass
class Task:
    """One workload to tune. `nodes` are the graph's nodes that run it; `weight` is their number. `algorithm`
    names the convolution algorithm of the variant graph the task comes from, where it is not a kernel of the
    graph `compile` builds by default, and `convolutions` the places the kernel runs where other variants could
    run them (tune/algorithms.py): the imported graph's convolutions, and attention nodes, whose other softmax
    form is the alternative. `target` is the machine its kernel is built for: its
    sketches, default schedule and features follow it."""

    key: str
    name: str
    nodes: list[Node]
    flops: int
    algorithm: str | None = None
    convolutions: frozenset[str] = frozenset()
    target: Target | None = None  # None: this machine's CPU

    @property
    def weight(self) -> int:
        return len(self.nodes)

    @property
    def node(self) -> Node:
        return self.nodes[0]

    def compute(self) -> tuple[list[Tensor], list[Tensor]]:
        """Fresh (inputs, outputs) tensors of the computation, as the executor builds them."""
        return node_compute(self.node)

    def default_trace(self) -> Trace:
        return default_schedule(self.compute()[1], self.target).trace

    @property
    def min_bytes(self) -> int:
        """Bytes the kernel cannot avoid moving: its inputs read and its outputs written once."""
        values = [*self.node.inputs, *self.node.outputs]
        return sum(math.prod(v.shape) * itemsize(v.dtype) for v in values)

    def roofline_s(self, fma_gflops: float, bandwidth_gbs: float) -> float:
        """The least time the kernel can take on a machine of these peaks (the roofline): its FLOPs at the FMA
        peak, or its unavoidable bytes at the memory bandwidth, whichever is longer. A measured latency over it is
        the fraction of the machine the kernel reaches, comparable across tasks and across machines."""
        return max(self.flops / (fma_gflops * 1e9), self.min_bytes / (bandwidth_gbs * 1e9), 1e-12)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs a measurement and its correctness check share: the data of an input that carries it (a layer
        norm's epsilon: a random one near minus a row's variance makes the check compare ill-conditioned
        quotients), random floats, in-range integer indices."""
        rng = np.random.default_rng(seed)
        arrays = []
        for v in self.node.inputs:
            if v.data is not None and np.shape(v.data) == tuple(v.shape):
                arrays.append(np.asarray(v.data, dtype=v.dtype))
            elif is_float(v.dtype):
                arrays.append(rng.standard_normal(v.shape).astype(v.dtype))
            elif v.dtype == "bool":
                arrays.append(rng.random(v.shape) < 0.5)
            else:
                arrays.append(rng.integers(0, 2, v.shape).astype(v.dtype))  # indices valid for any axis
        return arrays

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The outputs NumPy computes for `inputs` (the op registry's reference)."""
        opdef = lookup(self.node.op)
        with np.errstate(all="ignore"):
            out = opdef.reference(*inputs, **opdef.bind_attrs(self.node.attrs, f"node {self.node.name!r}"))
        return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def workload_key(outputs: list[Tensor]) -> str:
    """A digest of the computation: every stage's shape, dtype, tag and body, inputs by position."""
    order = topo_order(outputs)
    names = {}
    lines = []
    for t in order:
        names[t.name] = f"t{len(names)}"
        if isinstance(t.op, ComputeOp):
            body = format_expr(t.op.body)
            lines.append(f"{t.name}:{t.shape}:{t.dtype}:{t.op.tag}:{','.join(a.name for a in t.op.axes)}={body}")
        else:
            lines.append(f"{t.name}:{t.shape}:{t.dtype}:input")
    lines.append("out:" + ",".join(t.name for t in outputs))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def kernels(g: Graph) -> Iterator[tuple[Node, list[Tensor], str]]:
    """Each node of `g` that runs a kernel, with its computation's outputs and workload key."""
    plan = plan_memory(g, intermediates_of(g))
    for node in plan.kernel_nodes(g):
        _, outs = node_compute(node)
        yield node, outs, workload_key(outs)


def extract_tasks(g: Graph, target: Target | None = None) -> list[Task]:
    """The graph's kernels as tasks, one per distinct workload, in order of first appearance; `target` the machine
    they are tuned for (None: this CPU)."""
    tasks: dict[str, Task] = {}
    for node, outs, key in kernels(g):
        if key in tasks:
            tasks[key].nodes.append(node)
        else:
            tasks[key] = Task(key, kernel_label(node, outs), [node], compute_flops(outs), target=target)
    return list(tasks.values())
