"""From a scheduled computation to a callable native kernel: lower, render C, compile, load."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import config as _config
from .codegen.c import render_c
from .loop.ir import Kernel as LoopKernel
from .loop.lower import lower
from .runtime.build import build as build_library
from .runtime.kernel import BufferSpec, Kernel
from .schedule.schedule import Schedule
from .te.tensor import Tensor


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


def build(sch: Schedule | Tensor | Sequence[Tensor], *, name: str = "kernel", args: Sequence[Tensor] | None = None,
          cfg: _config.Config | None = None) -> CompiledKernel:
    """Compile a schedule (or the naive schedule of some output tensors) into a callable kernel."""
    if not isinstance(sch, Schedule):
        sch = Schedule(sch)
    cfg = cfg or _config.get()
    loop = lower(sch.state, name, args)
    source = render_c(loop)
    library = build_library(source, cfg=cfg)
    specs = [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in loop.params]
    return CompiledKernel(loop, source, Kernel(library, name, specs, cfg=cfg), len(sch.state.outputs))
