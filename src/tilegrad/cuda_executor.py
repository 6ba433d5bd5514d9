"""Compile a whole graph for a CUDA device: every kernel in one CUDA source, NVRTC's PTX, a `CudaModule`.

The same graph, memory plan and kernels as the native executor (`executor.py`), lowered under the GPU rules (or
the trace a chooser gives) and printed by `CudaRenderer`. Where the native module has an entry point, the CUDA
one has a list of launches, each with its grid, block and argument slots over the inputs, outputs, weights and
the workspace. `render_graph` stops before the device, so CI compiles every model's kernels to PTX without one.
"""

from __future__ import annotations

import dataclasses

from . import config as _config
from .errors import UnsupportedFeatureError
from .graph_plan import ScheduleChooser, plan_graph
from .ir.graph import Graph, Value
from .kernel import build_sources, renderer_for
from .runtime.cuda import CudaModule, KernelLaunch
from .runtime.kernel import BufferSpec
from .runtime.slots import Copy
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
    renderer = renderer_for(target)
    plan = plan_graph(g)
    if plan.derived:
        raise UnsupportedFeatureError("weights laid out ahead of time (Winograd) have no CUDA kernels yet; "
                                      "compile for CUDA without the CPU layout passes")
    functions, launches, printed = [], [], set()
    for k, loop, _ in plan.lowered(choose, target):
        if id(loop) not in printed:  # a repeated kernel's loop is an earlier one's: printed once, launched by name
            printed.add(id(loop))
            functions.append(renderer.render_function(loop))
        shape = renderer.launch(loop)
        launches.append(KernelLaunch(loop.name, shape.grid, shape.block, k.args))
    return CudaProgram(renderer.prelude + "\n".join(functions), tuple(launches), plan.copies, plan.weights,
                       plan.memory.workspace_bytes)


def compile_graph(g: Graph, cfg: _config.Config | None = None, choose: ScheduleChooser | None = None,
                  target: Target | None = None) -> CudaModule:
    """`g` compiled to PTX and loaded on the first CUDA device, weights copied there once."""
    target = target or cuda()
    program = render_graph(g, choose, target)
    ptx = build_sources([program.source], target, cfg)
    specs = [[BufferSpec(v.name, tuple(v.shape), v.dtype) for v in values] for values in (g.inputs, g.outputs)]
    return CudaModule(ptx, program.launches, specs[0], specs[1], [w.data for w in program.weights],
                      program.workspace_bytes, program.copies)
