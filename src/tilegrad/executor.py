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

import numpy as np

from . import config as _config
from .codegen.c import PRELUDE, CRenderer
from .errors import ShapeError
from .ir.graph import Graph, Node, Value
from .ir.registry import lookup
from .loop.lower import lower
from .runtime.build import build_many
from .runtime.module import Module, ModuleSpec
from .schedule.defaults import default_schedule
from .te.tensor import Tensor, placeholder

ALIGN = 64
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "int8": 1, "uint8": 1, "int16": 2, "int32": 4,
             "int64": 8, "bool": 1}


def _c_name(text: str) -> str:
    name = re.sub(r"[^0-9A-Za-z_]", "_", text)
    return name if name and not name[0].isdigit() else f"v_{name}"


def _nbytes(v: Value) -> int:
    return int(np.prod(v.shape, dtype=np.int64)) * _ITEMSIZE[v.dtype]


@dataclasses.dataclass
class MemoryPlan:
    offsets: dict[int, int]  # id(value) -> byte offset in the workspace
    workspace_bytes: int
    unshared_bytes: int  # what the intermediates would take without reuse


def plan_memory(g: Graph, intermediates: list[Value]) -> MemoryPlan:
    """First-fit reuse of workspace blocks by lifetime: a value's block is free after its last reader runs."""
    last_use: dict[int, int] = {}
    for t, n in enumerate(g.nodes):
        for v in n.inputs:
            last_use[id(v)] = t
    defined = {id(v): t for t, n in enumerate(g.nodes) for v in n.outputs}
    wanted = {id(v) for v in intermediates}
    free: list[tuple[int, int]] = []  # (offset, size)
    live: list[tuple[int, int, int]] = []  # (last use, offset, size)
    offsets: dict[int, int] = {}
    top = 0
    for t, n in enumerate(g.nodes):
        for end, off, size in [x for x in live if x[0] < t]:
            free.append((off, size))
        live = [x for x in live if x[0] >= t]
        for v in n.outputs:
            if id(v) not in wanted:
                continue
            size = -(-_nbytes(v) // ALIGN) * ALIGN
            slot = next((i for i, (_, s) in enumerate(free) if s >= size), None)
            if slot is None:
                off, top = top, top + size
            else:
                off, s = free.pop(slot)
                if s > size:
                    free.append((off + size, s - size))
            offsets[id(v)] = off
            live.append((last_use.get(id(v), defined[id(v)]), off, size))
    unshared = sum(-(-_nbytes(v) // ALIGN) * ALIGN for v in intermediates)
    return MemoryPlan(offsets, top, unshared)


def _kernel_source(node: Node, index: int, renderer: CRenderer) -> tuple[str, str]:
    """(function name, C source) of one node's kernel."""
    opdef = lookup(node.op)
    fname = f"k{index}_{_c_name(node.name)}"
    holders = [placeholder(v.shape, v.dtype, f"in{i}_{_c_name(v.name)}") for i, v in enumerate(node.inputs)]
    out = opdef.compute(*holders, **node.attrs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if not all(isinstance(o, Tensor) for o in outs) or len(outs) != len(node.outputs):
        raise ShapeError(f"node {node.name!r} ({node.op}): its compute gave {len(outs)} tensor(s) for "
                         f"{len(node.outputs)} output(s)")
    sch = default_schedule(outs)
    kernel = lower(sch.state, fname, holders + list(sch.state.outputs))
    return fname, renderer.render_function(kernel)


def compile_graph(g: Graph, cfg: _config.Config | None = None) -> Module:
    """One native library for the whole graph, loaded and ready to call."""
    cfg = cfg or _config.get()
    renderer = CRenderer()
    weights = g.constants
    graph_io = {id(v) for v in g.inputs} | {id(v) for v in g.outputs} | {id(w) for w in weights}
    intermediates = [v for n in g.nodes for v in n.outputs if id(v) not in graph_io]
    plan = plan_memory(g, intermediates)

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

    functions, calls, declarations = [], [], []
    for t, node in enumerate(g.nodes):
        fname, source = _kernel_source(node, t, renderer)
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
