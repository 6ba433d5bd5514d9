"""Compile a whole graph into one native library with one entry point over a static memory plan.

Every node becomes a kernel (its op's compute under the default schedule; the fusion pass will group nodes
later). The kernels go into a few C files, compiled in parallel and linked into one library with an entry
`tg_run(void** args)`, args being the model's inputs, its outputs, its weights and one workspace buffer;
intermediate values live at fixed offsets in the workspace, reusing the space of values that are dead
(lifetime-based first fit). One native call per inference.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

import numpy as np

from . import config as _config
from .codegen.c import PRELUDE, CRenderer
from .ir.compute import node_compute
from .ir.graph import Graph, Node, Value
from .ir.registry import BROADCAST, ELEMWISE, lookup
from .loop.lower import lower
from .runtime.build import build_many
from .runtime.module import Module, ModuleSpec
from .schedule.defaults import default_schedule
from .schedule.schedule import Schedule
from .te.tensor import Tensor

ALIGN = 64
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "int8": 1, "uint8": 1, "int16": 2, "int32": 4,
             "int64": 8, "bool": 1}


def _c_name(text: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", text)
    return name if name and not name[0].isdigit() else f"v_{name}"


def _nbytes(v: Value) -> int:
    return int(np.prod(v.shape, dtype=np.int64)) * _ITEMSIZE[v.dtype]


VIEW_OPS = {"reshape", "flatten", "squeeze", "unsqueeze", "identity"}  # same bytes, another shape: no kernel


@dataclasses.dataclass
class MemoryPlan:
    offsets: dict[int, int]  # id(value) -> byte offset in the workspace
    views: dict[int, Value]  # id(value) -> the value whose memory it is (a reshape needs no copy)
    workspace_bytes: int
    unshared_bytes: int  # what the intermediates would take without reuse
    in_outputs: dict = dataclasses.field(default_factory=dict)  # id(value) -> the graph output it is written as
    elided: frozenset = frozenset()  # id(node) of those reshapes into a graph output: no kernel

    def kernel_nodes(self, g: Graph) -> list[Node]:
        """The nodes that run a kernel: all but the views."""
        return [n for n in g.nodes
                if id(n) not in self.elided and not any(id(v) in self.views for v in n.outputs)]


def plan_memory(g: Graph, intermediates: list[Value]) -> MemoryPlan:
    """Intermediate values share workspace blocks: a view (reshape) is its input's memory; an element-wise
    kernel writes over an input it reads for the last time (in place); otherwise a value takes the first free
    block that fits (first fit by lifetime: a block is free once the last reader of every value in it has run)."""
    outputs = {id(v) for v in g.outputs}
    in_outputs, elided = _output_views(g)
    views: dict[int, Value] = {}
    wanted = {id(v) for v in intermediates} - set(in_outputs)
    intermediates = [v for v in intermediates if id(v) in wanted]
    for n in g.nodes:
        v = n.inputs[0] if n.inputs else None
        if n.op in VIEW_OPS and id(n.outputs[0]) not in outputs and v is not None:
            views[id(n.outputs[0])] = views.get(id(v), v)
    block_of = {vid: vid for vid in wanted}  # id(value) -> a value in the same block (follow to the owner)
    for vid, root in views.items():
        if vid in wanted:
            block_of[vid] = id(root) if id(root) in wanted else None

    def owner(vid: int) -> int | None:
        while vid is not None and block_of[vid] != vid:
            vid = block_of[vid]
        return vid

    last_use: dict[int, int] = {}
    for t, n in enumerate(g.nodes):
        for v in n.inputs:
            if id(v) in block_of and owner(id(v)) is not None:
                last_use[owner(id(v))] = t
    sizes = {id(v): _padded(v) for v in intermediates}
    for t, n in enumerate(g.nodes):  # in place: the output takes over an input block whose last reader this is
        out = n.outputs[0]
        if len(n.outputs) != 1 or id(out) not in wanted or id(out) in views or not _in_place_ok(n):
            continue
        for v in n.inputs:
            blk = owner(id(v)) if id(v) in block_of else None
            if blk is not None and v.type == out.type and last_use.get(blk) == t and sizes[blk] >= sizes[id(out)]:
                block_of[id(out)] = blk
                last_use[blk] = last_use.pop(id(out), t)
                break
    defined = {}
    for t, n in enumerate(g.nodes):
        for v in n.outputs:
            if block_of.get(id(v)) == id(v):
                defined[id(v)] = t
    free: list[tuple[int, int]] = []  # (offset, size)
    live: list[tuple[int, int, int]] = []  # (last use, offset, size)
    block_offset: dict[int, int] = {}
    top = 0
    for t in range(len(g.nodes)):
        for _, off, size in [x for x in live if x[0] < t]:
            free.append((off, size))
        live = [x for x in live if x[0] >= t]
        for blk in [b for b, d in defined.items() if d == t]:
            size = sizes[blk]
            slot = next((i for i, (_, s) in enumerate(free) if s >= size), None)
            if slot is None:
                off, top = top, top + size
            else:
                off, s = free.pop(slot)
                if s > size:
                    free.append((off + size, s - size))
            block_offset[blk] = off
            live.append((last_use.get(blk, t), off, size))
    offsets = {vid: block_offset[owner(vid)] for vid in block_of if owner(vid) is not None}
    return MemoryPlan(offsets, views, top, sum(sizes.values()), in_outputs, frozenset(elided))


def _output_views(g: Graph) -> tuple[dict[int, Value], set[int]]:
    """A reshape whose output is a graph output, of a value only it reads: the producer writes the graph output's
    buffer directly (seen as that shape) and the reshape runs no kernel."""
    outputs = [id(v) for v in g.outputs]
    producers = g.producers()
    consumers = g.consumers()
    views, elided = {}, set()
    for n in g.nodes:
        v = n.inputs[0] if n.inputs else None
        if (n.op in VIEW_OPS and v is not None and outputs.count(id(n.outputs[0])) == 1 and id(v) not in outputs
                and id(v) in producers and producers[id(v)].op not in VIEW_OPS and len(consumers[id(v)]) == 1):
            views[id(v)] = n.outputs[0]
            elided.add(id(n))
    return views, elided


def intermediates_of(g: Graph) -> list[Value]:
    """The values the workspace holds: node outputs that are not graph outputs."""
    graph_io = {id(v) for v in g.inputs} | {id(v) for v in g.outputs} | {id(w) for w in g.constants}
    return [v for n in g.nodes for v in n.outputs if id(v) not in graph_io]


def kernel_count(g: Graph) -> int:
    """How many kernels the compiled graph runs (views run none)."""
    return len(plan_memory(g, intermediates_of(g)).kernel_nodes(g))


def _padded(v: Value) -> int:
    return -(-_nbytes(v) // ALIGN) * ALIGN


def _in_place_ok(n: Node) -> bool:
    """Whether each output element depends only on the same element of its full-shape inputs, so the output
    may overwrite one of them: element-wise ops, and fused groups of them."""
    if n.op == "fused":
        return all(lookup(m.op).kind in (ELEMWISE, BROADCAST) for m in n.attrs["body"].nodes)
    return lookup(n.op).kind in (ELEMWISE, BROADCAST)


# Chooses a node's schedule: the tuner's best record, or None for the default rules.
ScheduleChooser = Callable[[Node, list[Tensor], list[Tensor]], "Schedule | None"]


def _kernel_source(node: Node, index: int, renderer: CRenderer, choose: ScheduleChooser | None) -> tuple[str, str]:
    """(function name, C source) of one node's kernel."""
    fname = f"k{index}_{_c_name(node.name)}"
    holders, outs = node_compute(node)
    sch = (choose(node, holders, outs) if choose else None) or default_schedule(outs)
    kernel = lower(sch.state, fname, holders + list(sch.state.outputs))
    return fname, renderer.render_function(kernel)


def compile_graph(g: Graph, cfg: _config.Config | None = None, choose: ScheduleChooser | None = None) -> Module:
    """One native library for the whole graph, loaded and ready to call. `choose` may give a node's schedule
    (tuned records); nodes it returns None for get the default rules."""
    cfg = cfg or _config.get()
    renderer = CRenderer()
    weights = g.constants
    plan = plan_memory(g, intermediates_of(g))

    slots: dict[int, str] = {}
    for i, v in enumerate(g.inputs):
        slots[id(v)] = f"args[{i}]"
    base = len(g.inputs)
    for j, v in enumerate(g.outputs):
        slots.setdefault(id(v), f"args[{base + j}]")
    base += len(g.outputs)
    for k, w in enumerate(weights):
        slots.setdefault(id(w), f"args[{base + k}]")
    workspace = f"((char*)args[{base + len(weights)}])"
    for vid, off in plan.offsets.items():
        slots[vid] = f"(void*)({workspace} + {off})"
    for vid, out in plan.in_outputs.items():
        slots[vid] = slots[id(out)]
    for vid, root in plan.views.items():
        slots.setdefault(vid, slots[id(root)])

    functions, calls, declarations = [], [], []
    for t, node in enumerate(plan.kernel_nodes(g)):
        fname, source = _kernel_source(node, t, renderer, choose)
        functions.append(source)
        declarations.append(f"void {fname}(void** args);")
        ptrs = ", ".join(slots[id(v)] for v in list(node.inputs) + list(node.outputs))
        calls.append(f"  {{ void* a[] = {{{ptrs}}}; {fname}(a); }}")
    copies = _output_copies(g, slots, base)
    entry = ("#include <string.h>\n" + "\n".join(declarations) + "\nvoid tg_run(void** args) {\n"
             + "\n".join(calls + copies) + "\n}\n")
    per_unit = max(1, -(-len(functions) // max(1, min(len(functions), 2 * cfg.num_threads, 16))))
    units = [PRELUDE + "\n".join(functions[i:i + per_unit]) for i in range(0, len(functions), per_unit)]
    library = build_many(units + [entry], cfg=cfg)
    spec = ModuleSpec.of(g.inputs, g.outputs, weights, plan.workspace_bytes, plan.unshared_bytes)
    return Module(library, spec, [w.data for w in weights], cfg=cfg)


def _output_copies(g: Graph, slots: dict[int, str], base: int) -> list[str]:
    """Outputs that no node writes (a graph input or a constant passed straight through) are copied."""
    produced = {id(v) for n in g.nodes for v in n.outputs}
    lines = []
    for j, v in enumerate(g.outputs):
        target = f"args[{len(g.inputs) + j}]"
        if id(v) not in produced or slots[id(v)] != target:
            lines.append(f"  memcpy({target}, {slots[id(v)]}, {_nbytes(v)});")
    return lines
