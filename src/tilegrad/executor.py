"""Compile a whole graph into one native library with one entry point over a static memory plan.

Every node that is not a view becomes a kernel (`kernel.lower_kernel`: its compute under the default rules, or
under the trace a chooser gives it). The kernels go into a few C files, compiled in parallel and linked into one
library with the entry `tg_run(void** args)` (`codegen/entry.py`), args being the model's inputs, its outputs,
its weights and one workspace buffer whose layout `passes/memory_plan.py` decides, then, where the graph has
dynamic dimensions (docs/dynamic.md), an array of their values, which each kernel reads after its buffers. One
native call per inference; a kernel too small to share (`_small`) runs on thread 0 alone.
Beside it, `tg_run_profiled` times each kernel call, and the spec names each call site (label, FLOPs, bytes)
for `Module.profile`.
The weights are the constants nodes read and the constants that are graph outputs; an output that no node
writes (a weight, a graph input) is copied from where its bytes are. A weight laid out ahead of time into more
bytes than its source (Winograd's) also gets a kernel in the library that computes it from the source: a saved
module stores the source and recomputes the weight on load.
"""

from __future__ import annotations

import re

from . import config as _config
from . import metrics, progress
from .codegen.c import CRenderer
from .codegen.descriptor import render_descriptor
from .codegen.entry import KernelCall, OutputCopy, render_entry, render_profiled_entry
from .dtype import itemsize
from .errors import ShapeError
from .graph_plan import GraphPlan, ScheduleChooser, plan_graph
from .ir.compute import kernel_label
from .ir.graph import Graph
from .loop.ir import has_parallel
from .runtime.build import build_many
from .runtime.dims import Dim, Extent
from .runtime.module import Module, ModuleSpec
from .runtime.profile import KernelSite
from .runtime.slots import Slot
from .target import Target, host
from .te import expr as E
from .te.dims import dim, formula, name_of, product, variables
from .te.flops import compute_flops

SMALL_BYTES = 16 * 1024  # a kernel that reads and writes no more, and does no more FLOPs than SMALL_FLOPS, is small
SMALL_FLOPS = 16 * 1024


def compile_graph(g: Graph, cfg: _config.Config | None = None, choose: ScheduleChooser | None = None,
                  target: Target | None = None) -> Module:
    """One native library for the whole graph, loaded and ready to call. `choose` may give a node's schedule
    (tuned records); nodes it returns None for get the target's default rules (default: this machine). The
    kernels are C whatever the target: a GPU target's schedules run serially here, which is how they are checked
    on a machine without a GPU."""
    cfg = cfg or _config.get()
    target = target or host()
    renderer = CRenderer(target)
    plan = plan_graph(g)
    arg = _c_slots(g, plan)
    dims = variables(v.shape for v in g.inputs)
    dim_index = {d.name: j for j, d in enumerate(dims)}
    dims_at = len(g.inputs) + len(g.outputs) + len(plan.weights) + 1  # after the workspace, where there are any
    largest = {d.name: int(d.hi) for d in dims}
    functions, calls, sites = [], [], []
    rendered: dict[str, str] = {}  # a kernel's C with its name taken out -> the function that has it
    printed: dict[int, str] = {}  # a loop IR's id -> the function that runs it (repeats share one loop)
    progress.stage("kernels", len(plan.kernels))
    for k, loop, outputs in plan.lowered(choose, target):
        if id(loop) not in printed:
            printed[id(loop)] = _one_copy(renderer.render_function(loop), loop.name, rendered, functions)
        function = printed[id(loop)]
        progress.advance()
        site = KernelSite(function, kernel_label(k.node, outputs), _count(compute_flops(outputs, dim)),
                          _count(sum(product(v.shape) * itemsize(v.dtype) for v in [*k.node.inputs, *k.node.outputs])))
        calls.append(KernelCall(function, [arg(s) for s in k.args] + _dim_args(loop, dim_index, dims_at),
                                has_parallel(loop.body) and not _small(site, largest)))
        sites.append(site)
    functions.extend(renderer.render_function(loop) for loop in plan.derivations(target))
    copies = [OutputCopy(arg(Slot("output", c.output)), arg(c.source), c.nbytes) for c in plan.copies]
    entry = render_entry(calls, copies)
    profiled = render_profiled_entry(calls, copies, clock_slot=dims_at + bool(dims))
    per_unit = max(1, -(-len(functions) // max(1, min(len(functions), 2 * cfg.num_threads, 16))))
    units = [renderer.prelude + "\n".join(functions[i:i + per_unit]) for i in range(0, len(functions), per_unit)]
    weights = plan.weights
    spec = ModuleSpec.of(g.inputs, g.outputs, weights, plan.memory.workspace_bytes, plan.memory.unshared_bytes,
                         plan.derived, tuple(sites), _runtime_dims(dims), _runtime_shape)
    descriptor = render_descriptor(spec)
    progress.stage("building", 1)
    progress.note(f"{len(units) + 3} C files")
    hits = metrics.counters["build.cache_hit"]
    library = build_many(units + [entry, profiled, descriptor], cfg=cfg)
    progress.advance("from the build cache" if metrics.counters["build.cache_hit"] > hits else "built")
    recomputed = {d.weight for d in plan.derived}  # by the library, as on load, so a loaded module is the same
    return Module(library, spec, [None if k in recomputed else w.data for k, w in enumerate(weights)], cfg=cfg,
                  sources=[weights[d.weight].origin.source.data for d in plan.derived])


def _dim_args(loop, index: dict[str, int], dims_at: int) -> list[str]:
    """The addresses of a kernel's dynamic dimensions in `tg_run`'s array of them (the slot after the workspace,
    `index` their places in it), in the kernel's order."""
    unknown = [name_of(d) for d in loop.dims if d.name not in index]
    if unknown:
        raise ShapeError(f"kernel {loop.name} reads dynamic dimension(s) {unknown} that no graph input has")
    return [f"(void*)((int64_t*)args[{dims_at}] + {index[d.name]})" for d in loop.dims]


def _count(n):
    """A kernel's FLOPs or bytes as the runtime holds them: an int, or an `Extent` of the dynamic dimensions."""
    return Extent(formula(n)) if isinstance(n, E.Expr) else n


def _runtime_dims(dims: list) -> tuple[Dim, ...]:
    return tuple(Dim(d.name, name_of(d), int(d.lo), int(d.hi)) for d in dims)


def _runtime_shape(shape) -> tuple:
    """A shape as the runtime holds it: ints, and an `Extent` for each dynamic dimension."""
    return tuple(Extent(formula(d)) if isinstance(d, E.Expr) else d for d in shape)


def _one_copy(text: str, name: str, rendered: dict[str, str], functions: list[str]) -> str:
    """The C function that runs kernel `name`, whose functions are `text`: an earlier kernel's where its C is the
    same but for the name (a repeated block of the model), else its own, added to `functions`. Each copy left out
    is C the compiler need not build, most of a cold compile (docs/benchmarks.md has the figures)."""
    anonymous = re.sub(rf"\b{re.escape(name)}(?=(_team)?\b)", "TG_KERNEL", text)
    if anonymous not in rendered:
        rendered[anonymous] = name
        functions.append(text)
    return rendered[anonymous]


def _small(site: KernelSite, largest: dict[str, int]) -> bool:
    """Whether a kernel is too small to share among threads: each would save less time than the barrier after
    it costs (a few hundred nanoseconds), so thread 0 runs it alone (`codegen/entry.py`); one sized by dynamic
    dimensions, at their `largest` values."""
    site = site.at(largest)
    return site.bytes <= SMALL_BYTES and site.flops <= SMALL_FLOPS


def _c_slots(g: Graph, plan: GraphPlan):
    """A slot as a C expression over `tg_run`'s `args`: inputs, outputs, weights, then the workspace."""
    outputs_at = len(g.inputs)
    weights_at = outputs_at + len(g.outputs)
    workspace = f"((char*)args[{weights_at + len(plan.weights)}])"
    first = {"input": 0, "output": outputs_at, "weight": weights_at}

    def arg(s: Slot) -> str:
        if s.kind == "workspace":
            return f"(void*)({workspace} + {s.index})"
        return f"args[{first[s.kind] + s.index}]"

    return arg
