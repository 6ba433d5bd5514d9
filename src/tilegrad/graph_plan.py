"""A whole graph's plan, before a backend prints it: which nodes run kernels, under what names, with their
arguments where; the weights the module binds; the weights it derives; the outputs it copies.

Both executors (`executor.py` for C, `cuda_executor.py` for CUDA) start from this plan and differ only in how
they print it: the C executor spells a slot as an expression over `tg_run`'s `args`, the CUDA one hands the
slots to the device module. Slots are assigned once, here: a graph input, output or weight by its index, an
intermediate by its byte offset in the workspace the memory plan lays out; a view is its root's slot, a value
written into an output is that output's slot.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator

from .errors import ShapeError
from .ir.compute import node_compute
from .ir.graph import Graph, Node, Value
from .ir.registry import lookup
from .kernel import lower_kernel
from .loop.ir import Kernel as LoopKernel
from .passes.memory_plan import MemoryPlan, check_fits, intermediates_of, nbytes, plan_memory
from .runtime.kernel import BufferSpec
from .runtime.module import DerivedWeight
from .runtime.slots import Copy, Slot
from .schedule.trace import Trace
from .target import Target
from .te.dims import is_static
from .te.fingerprint import fingerprint
from .te.tensor import Tensor

# Chooses a node's schedule from its computation's outputs: a tuned trace, or None for the default rules.
ScheduleChooser = Callable[[Node, list[Tensor]], "Trace | None"]


@dataclasses.dataclass(frozen=True)
class PlannedKernel:
    """One kernel call: its function's name, the node it computes and its arguments (inputs, then outputs)."""

    name: str
    node: Node
    args: tuple[Slot, ...]


@dataclasses.dataclass(frozen=True)
class GraphPlan:
    memory: MemoryPlan
    weights: tuple[Value, ...]  # the constants the module binds, in argument order
    kernels: tuple[PlannedKernel, ...]  # in the order they run
    derived: tuple[DerivedWeight, ...]  # weights laid out ahead of time, computed by a kernel from their source
    copies: tuple[Copy, ...]  # outputs whose bytes are elsewhere, copied at the end

    def lowered(self, choose: ScheduleChooser | None, target: Target) -> Iterator[tuple[PlannedKernel, LoopKernel,
                                                                                        list[Tensor]]]:
        """Each kernel with its loop IR, under the trace `choose` gives (else the target's default rules), and
        its computation's outputs. A kernel whose computation and trace are an earlier kernel's gets that one's
        loop IR, the very object, named after it: a model's repeated blocks are lowered once, and a printer
        prints each loop once and calls it by its name."""
        lowered: dict[tuple[str, str], LoopKernel] = {}
        for k in self.kernels:
            inputs, outputs = node_compute(k.node)
            trace = choose(k.node, outputs) if choose else None
            key = (fingerprint(inputs, outputs), "default" if trace is None else str(trace))
            if key not in lowered:
                lowered[key] = lower_kernel((inputs, outputs), trace, name=k.name, target=target)
            yield k, lowered[key], outputs

    def derivations(self, target: Target) -> Iterator[LoopKernel]:
        """The loop IR of the kernels that compute the derived weights from their sources, each kernel once."""
        done = set()
        for d in self.derived:
            if d.kernel not in done:
                done.add(d.kernel)
                node = _derivation_node(self.weights[d.weight], d.kernel)
                yield lower_kernel(node_compute(node), name=d.kernel, target=target)


def plan_graph(g: Graph) -> GraphPlan:
    """The plan of `g`: its memory (checked to fit), weights, kernels with their argument slots, and copies."""
    memory = plan_memory(g, intermediates_of(g))
    check_fits(g, memory)
    weights = _weights(g)
    slots = _slots(g, weights, memory)
    kernels = tuple(PlannedKernel(f"k{t}_{c_name(node.name)}", node,
                                  tuple(slots[id(v)] for v in [*node.inputs, *node.outputs]))
                    for t, node in enumerate(memory.kernel_nodes(g)))
    copies = tuple(Copy(j, slots[id(v)], nbytes(v)) for j, v in enumerate(g.outputs)
                   if slots[id(v)] != Slot("output", j))
    dynamic = [g.outputs[c.output].name for c in copies if not is_static(g.outputs[c.output].shape)]
    if dynamic:
        raise ShapeError(f"graph output(s) {dynamic} pass a graph input or a weight through with a dynamic shape, "
                         f"which a module with dynamic dimensions does not copy yet")
    return GraphPlan(memory, tuple(weights), kernels, _derived_weights(weights), copies)


def c_name(text: str) -> str:
    """`text` as a C identifier: kernels are named after their nodes."""
    name = re.sub(r"[^0-9A-Za-z_]", "_", text)
    return name if name and not name[0].isdigit() else f"v_{name}"


def _weights(g: Graph) -> list[Value]:
    """The constants the module binds: those nodes read, then those only the outputs name."""
    weights = {id(w): w for w in g.constants}
    for v in g.outputs:
        if v.is_constant:
            weights.setdefault(id(v), v)
    return list(weights.values())


def _slots(g: Graph, weights: list[Value], memory: MemoryPlan) -> dict[int, Slot]:
    """Where each value's bytes are. An input or a weight that is also an output keeps its own slot: the output
    buffer is only written at the end."""
    slots: dict[int, Slot] = {}
    for i, v in enumerate(g.inputs):
        slots[id(v)] = Slot("input", i)
    for k, w in enumerate(weights):
        slots.setdefault(id(w), Slot("weight", k))
    for j, v in enumerate(g.outputs):
        slots.setdefault(id(v), Slot("output", j))
    for vid, off in memory.offsets.items():
        slots[vid] = Slot("workspace", off)
    for vid, out in memory.in_outputs.items():
        slots[vid] = slots[id(out)]
    for vid, root in memory.views.items():
        slots.setdefault(vid, slots[id(root)])
    return slots


def _derived_weights(weights: list[Value]) -> tuple[DerivedWeight, ...]:
    """The weights laid out ahead of time into more bytes than their source: the library computes them, each
    computation once (the weights of a repeated block's convolutions share the first one's kernel)."""
    derived, kernel_of = [], {}
    for k, w in enumerate(weights):
        if w.origin is not None and nbytes(w) > nbytes(w.origin.source):
            source = w.origin.source
            key = fingerprint(*node_compute(_derivation_node(w, "derivation")))
            kernel = kernel_of.setdefault(key, f"d{k}_{c_name(w.name)}")
            derived.append(DerivedWeight(k, BufferSpec(source.name, tuple(source.shape), source.dtype), kernel))
    return tuple(derived)


def _derivation_node(w: Value, kernel: str) -> Node:
    """The node that computes weight `w` from its source, as the pass that laid it out did."""
    origin = w.origin
    return Node(kernel, origin.op, (origin.source,), (w,), lookup(origin.op).bind_attrs(origin.attrs,
                                                                                       f"weight {w.name!r}"))
