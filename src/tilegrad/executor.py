"""Compile a whole graph into one native library with one entry point over a static memory plan.

Every node that is not a view becomes a kernel (`kernel.lower_kernel`: its compute under the default rules, or
under the trace a chooser gives it). The kernels go into a few C files, compiled in parallel and linked into one
library with the entry `tg_run(void** args)` (`codegen/entry.py`), args being the model's inputs, its outputs,
its weights and one workspace buffer whose layout `passes/memory_plan.py` decides. One native call per inference.
"""

from __future__ import annotations

import re
from typing import Callable

from . import config as _config
from .codegen.c import PRELUDE, CRenderer
from .codegen.entry import KernelCall, OutputCopy, render_entry
from .ir.compute import node_compute
from .ir.graph import Graph, Node
from .kernel import lower_kernel
from .passes.memory_plan import MemoryPlan, intermediates_of, nbytes, plan_memory
from .runtime.build import build_many
from .runtime.module import Module, ModuleSpec
from .schedule.trace import Trace
from .target import Target, host
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
    slots = _slots(g, plan)
    functions, calls = [], []
    for t, node in enumerate(plan.kernel_nodes(g)):
        fname = f"k{t}_{_c_name(node.name)}"
        inputs, outputs = node_compute(node)
        trace = choose(node, outputs) if choose else None
        functions.append(renderer.render_function(lower_kernel((inputs, outputs), trace, name=fname, target=target)))
        calls.append(KernelCall(fname, [slots[id(v)] for v in [*node.inputs, *node.outputs]]))
    entry = render_entry(calls, _output_copies(g, slots))
    per_unit = max(1, -(-len(functions) // max(1, min(len(functions), 2 * cfg.num_threads, 16))))
    units = [PRELUDE + "\n".join(functions[i:i + per_unit]) for i in range(0, len(functions), per_unit)]
    library = build_many(units + [entry], cfg=cfg)
    spec = ModuleSpec.of(g.inputs, g.outputs, g.constants, plan.workspace_bytes, plan.unshared_bytes)
    return Module(library, spec, [w.data for w in g.constants], cfg=cfg)


def _slots(g: Graph, plan: MemoryPlan) -> dict[int, str]:
    """Where each value's bytes are, as a C expression over `args`: inputs, outputs, weights, then the workspace."""
    slots: dict[int, str] = {}
    for i, v in enumerate(g.inputs):
        slots[id(v)] = f"args[{i}]"
    base = len(g.inputs)
    for j, v in enumerate(g.outputs):
        slots.setdefault(id(v), f"args[{base + j}]")
    base += len(g.outputs)
    for k, w in enumerate(g.constants):
        slots.setdefault(id(w), f"args[{base + k}]")
    workspace = f"((char*)args[{base + len(g.constants)}])"
    for vid, off in plan.offsets.items():
        slots[vid] = f"(void*)({workspace} + {off})"
    for vid, out in plan.in_outputs.items():
        slots[vid] = slots[id(out)]
    for vid, root in plan.views.items():
        slots.setdefault(vid, slots[id(root)])
    return slots


def _output_copies(g: Graph, slots: dict[int, str]) -> list[OutputCopy]:
    """Outputs that no node writes (a graph input or a constant passed straight through) are copied."""
    produced = {id(v) for n in g.nodes for v in n.outputs}
    copies = []
    for j, v in enumerate(g.outputs):
        target = f"args[{len(g.inputs) + j}]"
        if id(v) not in produced or slots[id(v)] != target:
            copies.append(OutputCopy(target, slots[id(v)], nbytes(v)))
    return copies
