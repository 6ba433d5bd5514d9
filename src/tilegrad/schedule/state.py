"""The loop state a trace acts on: stages (one per compute), their loops, and how the loops derive from the axes.

A stage's loops start as the compute's axes (spatial, then reduction). Splits and fuses add derived loops and
record the relation; `leaves` is the current loop order. Lowering reads the relations backwards to express every
axis as a function of the leaf loops. Extents are expressions, so symbolic split factors flow through unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ..errors import ScheduleError
from ..te import expr as E
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor, replace_reads, topo_order

# GPU loop kinds: a loop bound to one of these runs as the blocks or the threads of a block (`bind`).
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# Where a stage's buffer lives: "global" (device or host memory), "shared" (one copy per GPU block, filled by its
# threads together), "local" (per thread: registers or the stack).
SCOPES = ("global", "shared", "local")


@dataclasses.dataclass
class Loop:
    """A loop of a stage; `kind` is "serial", "parallel", "vectorized", "unrolled" or a GPU axis it is bound to
    (BLOCK_AXES, THREAD_AXES)."""

    name: str
    extent: E.Expr
    is_reduce: bool
    kind: str = "serial"


@dataclasses.dataclass(frozen=True)
class SplitRel:
    parent: str
    outer: str
    inner: str
    factor: E.Expr | None  # extent of the inner loop, or
    nparts: E.Expr | None = None  # extent of the outer loop
    exact: bool = False  # the parts divide the parent: no tail, no guard, even when the factor is symbolic


@dataclasses.dataclass(frozen=True)
class FuseRel:
    outer: str
    inner: str
    fused: str


@dataclasses.dataclass
class Stage:
    """One compute being scheduled. `attach` is None (root), "inline", or (stage, loop) for compute_at, or for
    compute_with when `shares_loops`: then the stage's leading loops are that stage's, up to `loop`."""

    name: str
    tensor: Tensor
    loops: dict[str, Loop]
    leaves: list[str]
    relations: list = dataclasses.field(default_factory=list)
    attach: object = None
    shares_loops: bool = False
    scope: str = "global"
    auto_unroll_max_step: E.Expr | int = 0  # an expression while the sketch's parameters are symbolic

    @property
    def op(self) -> ComputeOp:
        return self.tensor.op

    @property
    def roots(self) -> list[str]:
        op = self.op
        return [a.name for a in op.axes] + [a.name for a in op.reduce_axes]

    def loop(self, name: str) -> Loop:
        try:
            return self.loops[name]
        except KeyError:
            raise ScheduleError(
                f"stage {self.name!r} has no loop {name!r}; its loops are {', '.join(self.leaves)}") from None

    def leaf(self, name: str) -> Loop:
        loop = self.loop(name)
        if name not in self.leaves:
            raise ScheduleError(f"loop {name!r} of stage {self.name!r} was already split or fused")
        return loop

    def fresh_name(self, name: str) -> str:
        if name not in self.loops:
            return name
        n = 1
        while f"{name}_{n}" in self.loops:
            n += 1
        return f"{name}_{n}"


def make_stage(t: Tensor) -> Stage:
    op = t.op
    loops: dict[str, Loop] = {}
    for a in op.axes:
        loops[a.name] = Loop(a.name, a.upper, False)
    for a in op.reduce_axes:
        loops[a.name] = Loop(a.name, a.upper, True)
    return Stage(t.name, t, loops, list(loops))


class LoopState:
    """All stages of a kernel, producers before consumers; the thing primitives mutate during replay."""

    def __init__(self, outputs: Sequence[Tensor]):
        tensors = _unique_names(topo_order(outputs))
        self.outputs = [tensors[id(t)] for t in outputs]
        self.placeholders: list[Tensor] = []
        self.stages: list[Stage] = []
        for t in tensors.values():
            if isinstance(t.op, ComputeOp):
                self.stages.append(make_stage(t))
            else:
                self.placeholders.append(t)

    def stage(self, name) -> Stage:
        if isinstance(name, Tensor):
            name = name.name
        for s in self.stages:
            if s.name == name:
                return s
        raise ScheduleError(f"no stage {name!r}; stages are {', '.join(s.name for s in self.stages)}")

    def insert_before(self, anchor: Stage, new: Stage) -> None:
        self.stages.insert(self.stages.index(anchor), new)

    def replace_tensor(self, old: Tensor, new: Tensor, readers: Sequence[Stage] | None = None) -> None:
        """Make `readers` (default: all stages) read `new` where they read `old`; outputs follow too."""
        for s in (self.stages if readers is None else readers):
            if s.tensor is new:
                continue
            if any(inp is old for inp in s.op.inputs):
                s.tensor = replace_reads(s.tensor, {old: new})
        self._relink()

    def _relink(self) -> None:
        """Rebuilt tensors keep their names; point every read at the current tensor of that name."""
        current = {s.name: s.tensor for s in self.stages}
        for s in self.stages:
            stale = {inp: current[inp.name] for inp in s.op.inputs
                     if inp.name in current and current[inp.name] is not inp}
            if stale:
                s.tensor = replace_reads(s.tensor, stale)
                current[s.name] = s.tensor
        self.outputs = [current.get(t.name, t) for t in self.outputs]

    def readers(self, t: Tensor) -> list[Stage]:
        return [s for s in self.stages if any(inp.name == t.name for inp in s.op.inputs)]


def _unique_names(order: list[Tensor]) -> dict[int, Tensor]:
    """Stages and buffers are named by their tensors, so a repeated name (two `add`s) gets a suffix, in
    topological order so that traces stay replayable: {id(original): tensor as scheduled}."""
    taken: set[str] = set()
    out: dict[int, Tensor] = {}
    for t in order:
        name, n = t.name, 1
        while name in taken:
            name, n = f"{t.name}_{n}", n + 1
        taken.add(name)
        stale = {old: out[id(old)] for old in (t.op.inputs if isinstance(t.op, ComputeOp) else ())
                 if out[id(old)] is not old}
        new = replace_reads(t, stale) if stale else t
        if name != t.name:
            op = new.op
            new = Tensor(name, t.shape, t.dtype, PlaceholderOp(name) if isinstance(op, PlaceholderOp) else
                         ComputeOp(name, op.axes, op.body, op.tag, op.attrs))
        out[id(t)] = new
    return out
