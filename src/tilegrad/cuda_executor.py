"""Compile a whole graph for a CUDA device: every kernel in one CUDA source, NVRTC's PTX, a `CudaModule`.

The same graph, memory plan and kernels as the native executor (`executor.py`), lowered under the GPU rules (or
the trace a chooser gives) and printed by `CudaRenderer`. Where the native module has an entry point, the CUDA
one has a list of launches, each with its grid, block and argument slots over the inputs, outputs, weights and
the workspace. `render_graph` stops before the device, so CI compiles every model's kernels to PTX without one.
"""

from __future__ import annotations

import dataclasses

from . import config as _config
from .codegen.cuda import PRELUDE, CudaRenderer
from .errors import UnsupportedFeatureError
from .executor import ScheduleChooser, _c_name, _derived_weights, _weights
from .ir.compute import node_compute
from .ir.graph import Graph, Value
from .kernel import lower_kernel
from .passes.memory_plan import MemoryPlan, check_fits, intermediates_of, nbytes, plan_memory
from .runtime.cuda import Copy, CudaModule, KernelLaunch, Slot
from .runtime.kernel import BufferSpec
from .runtime.nvrtc import compile_ptx
from .target import Target, cuda


@dataclasses.dataclass(frozen=True)
class CudaProgram:
    """A graph's CUDA source and how to run it, before it meets a device."""

    source: str
    launches: tuple[KernelLaunch, ...]
    copies: tuple[Copy, ...]
    weights: tuple[Value, ...]
    workspace_bytes: int


def render_graph(g: Graph, choose: ScheduleChooser | None = None, target: Target | None = None) -> CudaProgram:
    """The CUDA source of every kernel of `g`, and the launches that run them in order."""
    target = target or cuda()
    renderer = CudaRenderer(target)
    plan = plan_memory(g, intermediates_of(g))
    check_fits(g, plan)
    weights = _weights(g)
    if _derived_weights(weights):
        raise UnsupportedFeatureError("weights laid out ahead of time (Winograd) have no CUDA kernels yet; "
                                      "compile for CUDA without the CPU layout passes")
    slots = _slots(g, weights, plan)
    functions, launches = [], []
    for t, node in enumerate(plan.kernel_nodes(g)):
        name = f"k{t}_{_c_name(node.name)}"
        inputs, outputs = node_compute(node)
        trace = choose(node, outputs) if choose else None
        loop = lower_kernel((inputs, outputs), trace, name=name, target=target)
        functions.append(renderer.render_function(loop))
        shape = renderer.launch(loop)
        launches.append(KernelLaunch(name, shape.grid, shape.block, tuple(slots[id(v)] for v in [*node.inputs,
                                                                                             *node.outputs])))
    copies = tuple(Copy(j, slots[id(v)], nbytes(v)) for j, v in enumerate(g.outputs)
                   if slots[id(v)] != Slot("output", j))
    return CudaProgram(PRELUDE + "\n".join(functions), tuple(launches), copies, tuple(weights),
                       plan.workspace_bytes)


def compile_graph(g: Graph, cfg: _config.Config | None = None, choose: ScheduleChooser | None = None,
                  target: Target | None = None) -> CudaModule:
    """`g` compiled to PTX and loaded on the first CUDA device, weights copied there once."""
    target = target or cuda()
    program = render_graph(g, choose, target)
    ptx = compile_ptx(program.source, target.arch, cfg=cfg)
    specs = [[BufferSpec(v.name, tuple(v.shape), v.dtype) for v in values] for values in (g.inputs, g.outputs)]
    return CudaModule(ptx, program.launches, specs[0], specs[1], [w.data for w in program.weights],
                      program.workspace_bytes, program.copies)


def _slots(g: Graph, weights: list[Value], plan: MemoryPlan) -> dict[int, Slot]:
    """Where each value's bytes are on the device: as `executor._slots`, over device allocations."""
    slots: dict[int, Slot] = {}
    for i, v in enumerate(g.inputs):
        slots[id(v)] = Slot("input", i)
    for k, w in enumerate(weights):
        slots.setdefault(id(w), Slot("weight", k))
    for j, v in enumerate(g.outputs):
        slots.setdefault(id(v), Slot("output", j))
    for vid, off in plan.offsets.items():
        slots[vid] = Slot("workspace", off)
    for vid, out in plan.in_outputs.items():
        slots[vid] = slots[id(out)]
    for vid, root in plan.views.items():
        slots.setdefault(vid, slots[id(root)])
    return slots
