"""The one path from a computation to a kernel: compute, schedule, loop IR, source, library.

A computation is a graph node (one op or a fused group), a pair (input tensors, output tensors), or a `Schedule`
already applied. Its schedule is a trace replayed on it (integers, or variables left symbolic for feature
formulas), or else the default rules for the target. `lower_kernel` is the front of the path, shared by model
compilation (which renders many kernels into one library), the tuner's build worker, feature derivation and
`build`, which goes on to compile and load one kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import numpy as np

from . import config as _config
from .backend import backend_for
from .codegen.renderer import Renderer
from .ir.compute import node_compute
from .ir.graph import Node
from .loop.ir import Kernel as LoopKernel
from .loop.lower import lower
from .runtime.kernel import BufferSpec, Kernel
from .schedule.defaults import default_schedule
from .schedule.schedule import Schedule, apply_trace
from .schedule.trace import Trace
from .target import Target, host
from .te.dims import representative, variables
from .te.specialize import specialize
from .te.tensor import Tensor, topo_order

Computation = Union[Node, Schedule, tuple[Sequence[Tensor], Sequence[Tensor]]]


def lower_kernel(computation: Computation, trace: Trace | None = None, *, name: str = "kernel",
                 args: Sequence[Tensor] | None = None, target: Target | None = None) -> LoopKernel:
    """The loop IR of `computation` under `trace` (default: the target's default rules). Its parameters are
    `args`, else the computation's inputs then outputs."""
    if isinstance(computation, Schedule):
        if trace is not None:
            raise ValueError("a Schedule is already scheduled; pass its outputs with a trace instead")
        return lower(computation.state, name, args)
    inputs, outputs = node_compute(computation) if isinstance(computation, Node) else computation
    if trace is None and (dynamic := _dynamic_dims(outputs)):
        trace = representative_trace(outputs, dynamic, target)
    state = apply_trace(outputs, trace) if trace is not None else default_schedule(list(outputs), target).state
    return lower(state, name, list(args) if args is not None else [*inputs, *state.outputs])


def _dynamic_dims(outputs: Sequence[Tensor]) -> list:
    return variables(t.shape for t in topo_order(outputs))


def representative_trace(outputs: Sequence[Tensor], dynamic: list, target: Target | None) -> Trace:
    """The default rules' trace for a computation over dynamic dimensions: made on its specialisation at each
    dimension's representative value (`te/dims.py`), to be replayed on the symbolic computation."""
    made = specialize(outputs, {v.name: representative(v) for v in dynamic})
    return default_schedule([made[t] for t in outputs], target).trace


def renderer_for(target: Target | None = None) -> Renderer:
    """The printer of `target`'s kernels (default: this machine's C)."""
    target = target or host()
    return backend_for(target).renderer(target)


def render_kernel(loop: LoopKernel, target: Target | None = None) -> str:
    """A whole translation unit for one kernel, in `target`'s language (a GPU renderer also checks races and the
    target's limits)."""
    return renderer_for(target).render(loop)


def build_sources(sources: Sequence[str], target: Target | None = None, cfg: _config.Config | None = None):
    """`sources` (translation units rendered for `target`) built into what its runtime loads, or found in the
    cache: a shared library's path for a CPU, PTX for a GPU."""
    target = target or host()
    return backend_for(target).build(list(sources), target, cfg)


def buffer_specs(loop: LoopKernel) -> list[BufferSpec]:
    """The kernel's parameters as the runtime checks them."""
    return [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in loop.params]


class CompiledKernel:
    """A built kernel with its loop IR and C source; `run(*inputs)` allocates and returns the outputs."""

    def __init__(self, loop: LoopKernel, source: str, kernel: Kernel, num_outputs: int):
        self.loop = loop
        self.source = source
        self.kernel = kernel
        self.num_outputs = num_outputs

    @property
    def params(self) -> tuple[BufferSpec, ...]:
        return tuple(self.kernel.params)

    def __call__(self, *arrays: np.ndarray) -> None:
        self.kernel(*arrays)

    def run(self, *inputs: np.ndarray):
        outs = [np.empty(p.shape, dtype=p.dtype) for p in self.params[len(self.params) - self.num_outputs:]]
        self.kernel(*inputs, *outs)
        return outs[0] if len(outs) == 1 else outs


def build(computation: Computation | Tensor | Sequence[Tensor], trace: Trace | None = None, *,
          name: str = "kernel", args: Sequence[Tensor] | None = None, target: Target | None = None,
          cfg: _config.Config | None = None) -> CompiledKernel:
    """Compile a computation into a callable kernel. Output tensors alone get the naive schedule (one loop nest
    per stage, as written); a node or an (inputs, outputs) pair gets `trace` or the default rules."""
    if isinstance(computation, Tensor) or (isinstance(computation, Sequence) and computation
                                           and all(isinstance(t, Tensor) for t in computation)):
        computation = Schedule(computation)
    cfg = cfg or _config.get()
    loop = lower_kernel(computation, trace, name=name, args=args, target=target)
    source = render_kernel(loop, target)
    library = build_sources([source], target, cfg)
    if isinstance(computation, Schedule):
        num_outputs = len(computation.state.outputs)
    elif isinstance(computation, Node):
        num_outputs = len(computation.outputs)
    else:
        num_outputs = len(computation[1])
    return CompiledKernel(loop, source, Kernel(library, name, buffer_specs(loop), cfg=cfg), num_outputs)
