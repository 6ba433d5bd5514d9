"""Compile a whole graph into one native library with one entry point over a static memory plan.

Every node that is not a view becomes a kernel (`kernel.lower_kernel`: its compute under the default rules, or
under the trace a chooser gives it). The kernels go into a few C files, compiled in parallel and linked into one
library with the entry `tg_run(void** args)` (`codegen/entry.py`), args being the model's inputs, its outputs,
its weights and one workspace buffer whose layout `passes/memory_plan.py` decides. One native call per inference.
Beside it, `tg_run_profiled` times each kernel call, and the spec names each call site (label, FLOPs, bytes)
for `Module.profile`.
The weights are the constants nodes read and the constants that are graph outputs; an output that no node
writes (a weight, a graph input) is copied from where its bytes are. A weight laid out ahead of time into more
bytes than its source (Winograd's) also gets a kernel in the library that computes it from the source: a saved
module stores the source and recomputes the weight on load.
"""

from __future__ import annotations

import re
from typing import Callable

from . import config as _config
from .codegen.c import PRELUDE, CRenderer
from .codegen.entry import KernelCall, OutputCopy, render_entry, render_profiled_entry
from .ir.compute import kernel_label, node_compute
from .ir.graph import Graph, Node, Value
from .ir.registry import lookup
from .kernel import lower_kernel
from .loop.ir import has_parallel
from .passes.memory_plan import MemoryPlan, check_fits, intermediates_of, nbytes, plan_memory
from .runtime.build import build_many
from .runtime.kernel import BufferSpec
from .runtime.module import DerivedWeight, Module, ModuleSpec
from .runtime.profile import KernelSite
from .schedule.trace import Trace
from .target import Target, host
from .te.flops import compute_flops
from .te.tensor import Tensor

# Chooses a node's schedule from its computation's outputs: a tuned trace, or None for the default rules.
ScheduleChooser = Callable[[Node, list[Tensor]], "Trace | None"]


def _c_name(text: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", text)
    return name if name and not name[0].isdigit() else f"v_{name}"


def compile_graph(g: Graph, cfg: _config.Config | None = None, choose: ScheduleChooser | None = None,
                  target: Target | None = None) -> Module:
    """One native library for the whole graph, loaded and ready to call. `choose` may give a node's schedule
    (tuned records); nodes it returns None for get the target's default rules (default: this machine)."""
    cfg = cfg or _config.get()
    target = target or host()
    renderer = CRenderer(target)
    plan = plan_memory(g, intermediates_of(g))
    check_fits(g, plan)
    weights = _weights(g)
    slots = _slots(g, weights, plan)
    functions, calls, sites = [], [], []
    for t, node in enumerate(plan.kernel_nodes(g)):
        fname = f"k{t}_{_c_name(node.name)}"
        inputs, outputs = node_compute(node)
        trace = choose(node, outputs) if choose else None
        loop = lower_kernel((inputs, outputs), trace, name=fname, target=target)
        functions.append(renderer.render_function(loop))
        calls.append(KernelCall(fname, [slots[id(v)] for v in [*node.inputs, *node.outputs]], has_parallel(loop.body)))
        sites.append(KernelSite(fname, kernel_label(node, outputs), compute_flops(outputs),
                                sum(nbytes(v) for v in [*node.inputs, *node.outputs])))
    derived = _derived_weights(weights)
    for d in derived:
        node = _derivation_node(weights[d.weight], d.kernel)
        functions.append(renderer.render_function(lower_kernel(node_compute(node), name=d.kernel, target=target)))
    copies = _output_copies(g, slots)
    entry = render_entry(calls, copies)
    profiled = render_profiled_entry(calls, copies, clock_slot=len(g.inputs) + len(g.outputs) + len(weights) + 1)
    per_unit = max(1, -(-len(functions) // max(1, min(len(functions), 2 * cfg.num_threads, 16))))
    units = [PRELUDE + "\n".join(functions[i:i + per_unit]) for i in range(0, len(functions), per_unit)]
    library = build_many(units + [entry, profiled], cfg=cfg)
    spec = ModuleSpec.of(g.inputs, g.outputs, weights, plan.workspace_bytes, plan.unshared_bytes, derived,
                         tuple(sites))
    recomputed = {d.weight for d in derived}  # by the library, as on load, so a loaded module is the same
    return Module(library, spec, [None if k in recomputed else w.data for k, w in enumerate(weights)], cfg=cfg,
                  sources=[weights[d.weight].origin.source.data for d in derived])


def _derived_weights(weights: list[Value]) -> tuple[DerivedWeight, ...]:
    """The weights laid out ahead of time into more bytes than their source: the library computes them."""
    derived = []
    for k, w in enumerate(weights):
        if w.origin is not None and nbytes(w) > nbytes(w.origin.source):
            source = w.origin.source
            derived.append(DerivedWeight(k, BufferSpec(source.name, tuple(source.shape), source.dtype),
                                         f"d{k}_{_c_name(w.name)}"))
    return tuple(derived)


def _derivation_node(w: Value, kernel: str) -> Node:
    """The node that computes weight `w` from its source, as the pass that laid it out did."""
    origin = w.origin
    return Node(kernel, origin.op, (origin.source,), (w,), lookup(origin.op).bind_attrs(origin.attrs,
                                                                                       f"weight {w.name!r}"))


def _weights(g: Graph) -> list[Value]:
    """The constants the module binds: those nodes read, then those only the outputs name."""
    weights = {id(w): w for w in g.constants}
    for v in g.outputs:
        if v.is_constant:
            weights.setdefault(id(v), v)
    return list(weights.values())


def _slots(g: Graph, weights: list[Value], plan: MemoryPlan) -> dict[int, str]:
    """Where each value's bytes are, as a C expression over `args` (inputs, outputs, weights, then the workspace).
    An input or a weight that is also an output keeps its own slot: the output buffer is only written at the end."""
    slots: dict[int, str] = {}
    base = len(g.inputs) + len(g.outputs)
    for i, v in enumerate(g.inputs):
        slots[id(v)] = f"args[{i}]"
    for k, w in enumerate(weights):
        slots.setdefault(id(w), f"args[{base + k}]")
    for j, v in enumerate(g.outputs):
        slots.setdefault(id(v), f"args[{len(g.inputs) + j}]")
    workspace = f"((char*)args[{base + len(weights)}])"
    for vid, off in plan.offsets.items():
        slots[vid] = f"(void*)({workspace} + {off})"
    for vid, out in plan.in_outputs.items():
        slots[vid] = slots[id(out)]
    for vid, root in plan.views.items():
        slots.setdefault(vid, slots[id(root)])
    return slots


def _output_copies(g: Graph, slots: dict[int, str]) -> list[OutputCopy]:
    """Outputs whose bytes are elsewhere are copied: a graph input or a weight passed straight through, or a value
    named by an earlier output too."""
    copies = []
    for j, v in enumerate(g.outputs):
        target = f"args[{len(g.inputs) + j}]"
        if slots[id(v)] != target:
            copies.append(OutputCopy(target, slots[id(v)], nbytes(v)))
    return copies
