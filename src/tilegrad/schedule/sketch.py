"""Sketches: the structures a kernel's schedule can take, derived by rules from its computation (Ansor), with
their tunable parameters left as variables.

Rules look at each stage, consumers first: a cheap injective stage is inlined; a stage with data reuse (matmul,
convolution) gets multi-level tiling "SSRSRS" (spatial loops split in four levels, reduction loops in two),
computed at the tile of a fused element-wise consumer, or of a copy-out added by cache_write, or tiled in place;
a reduction with little spatial work and a long reduction is split with rfactor; any other stage is vectorised
along its innermost loop and either computed at a loop of its consumer or at the root, in parallel. The default
schedule is one more sketch, "default": the hand-written rules with their degrees of freedom (register tiles,
blocking, loop order, parallel grain, unrolling) as parameters, whose defaults (`Sketch.default_params`) give the
hand-written schedule.

A sketch's structure and parameters (`Sketch`, `Space`: tile sizes as Vars, structural choices) are space.py's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from ..backend import backend_for
from ..errors import ScheduleError
from ..te import expr as E
from ..te.simplify import simplify
from ..te.tensor import Tensor
from ..target import Target, host
from .defaults import default_schedule
from .schedule import Schedule
from .space import MAX_INNERMOST, Sketch, Space, divisors
from .state import Stage

UNROLL_STEPS = (0, 16, 64, 512)  # Ansor's auto-unroll max steps on CPU
INLINE_MAX_LOADS = 4  # an injective stage reading more than this is worth materialising (a transform)
# Each structural choice multiplies the programs whose features must be derived; keep a few values of each: the
# innermost compute locations (outer ones recompute little and reuse less) and the finest parallel grains.
MAX_LOCATIONS = 3
MAX_PARALLEL_GRAINS = 3
RFACTOR_MIN_REDUCTION = 64
RFACTOR_MAX_SPATIAL = 256


def generate_sketches(outputs: Callable[[], list[Tensor]], target: Target | None = None,
                      limit: int = 8) -> list[Sketch]:
    """The sketches of a computation (`outputs` builds fresh tensors of it): the default schedule, then at most
    `limit` that the target backend's derivation rules give (`cpu_sketches` here; a GPU's in `sketch_gpu.py`)."""
    target = target or host()
    default = Sketch("default", outputs, lambda sch, space: _replay_default(sch, space, target))
    return [default, *backend_for(target).sketches(outputs, target, limit)]


def cpu_sketches(outputs: Callable[[], list[Tensor]], target: Target, limit: int) -> list[Sketch]:
    """The sketches Ansor's derivation rules give on a CPU, each checked to build."""
    sketches = []
    analysis = _Analysis(Schedule(outputs()))
    for plan in analysis.plans()[:limit]:
        name = "+".join(dict.fromkeys(decision for decision in plan.values() if decision != "inline")) or "inline"
        try:
            sketches.append(Sketch(name, outputs, functools.partial(_apply_plan, plan=plan, analysis=analysis,
                                                                    target=target)))
        except ScheduleError:
            continue
    return sketches


def _replay_default(sch: Schedule, space: Space, target: Target) -> None:
    """The default rules with their parameters declared in `space` (at its structure), replayed on `sch`."""
    for step in default_schedule(sch.outputs, target, knobs=space).trace.steps:
        sch._record(step.kind, **dict(step.args))


class _Analysis:
    """Per stage of the unscheduled computation: what the rules may do with it."""

    def __init__(self, sch: Schedule):
        st = sch.state
        self.outputs = [t.name for t in st.outputs]
        self.stages = {s.name: s for s in st.stages}
        self.order = [s.name for s in reversed(st.stages)]  # consumers first
        self.readers = {s.name: [r.name for r in st.readers(s.tensor)] for s in st.stages}
        self.inline = {n for n in self.order if self._inlinable(self.stages[n])}
        self.fused = {}  # tiled producer -> its element-wise consumer (an output of the same shape)
        self.fused_axes = {}  # tiled producer -> the consumer axis of each of its axes (`axis_map`)
        for n in self.order:
            s = self.stages[n]
            if n in self.outputs or not _has_reuse(s):
                continue
            readers = self.effective_readers(n)
            if len(readers) == 1 and readers[0] in self.outputs:
                c = self.stages[readers[0]]
                if not c.op.reduce_axes and c.tensor.shape == s.tensor.shape and c.name not in self.fused.values():
                    axes = self.axis_map(n, c.name)
                    if axes is not None:
                        self.fused[n], self.fused_axes[n] = c.name, axes

    def _inlinable(self, s: Stage) -> bool:
        if s.name in self.outputs or s.op.reduce_axes or "pad" in s.op.tag:
            return False
        return len(E.loads(s.op.body)) <= INLINE_MAX_LOADS

    def effective_readers(self, name: str) -> list[str]:
        """The non-inlined stages reading `name`, looking through inlined ones."""
        out = []
        for r in self.readers[name]:
            out.extend(self.effective_readers(r) if r in self.inline else [r])
        return list(dict.fromkeys(out))

    def axis_map(self, producer: str, consumer: str) -> dict[str, str] | None:
        """Per axis of `producer`, the axis of `consumer` that indexes it, where every read (through inlined
        stages) is at the consumer's axes, permuted: the consumer's tile then needs a tile of the producer along
        the mapped axes (an attention whose output layout swaps heads and queries of one extent). An axis of
        extent 1 may be read at any index and maps to none. None for any other read."""
        reads: list[tuple[E.Expr, ...]] = []

        def collect(body: E.Expr, names: dict[str, E.Expr]) -> None:
            for load in E.loads(body):
                indices = tuple(simplify(E.substitute(i, names)) for i in load.indices)
                if load.buffer.name == producer:
                    reads.append(indices)
                elif load.buffer.name in self.inline:
                    inlined = self.stages[load.buffer.name].op
                    collect(inlined.body, {a.name: i for a, i in zip(inlined.axes, indices)})
        c, p = self.stages[consumer].op, self.stages[producer].op
        collect(c.body, {})
        if not reads or any(r != reads[0] for r in reads):
            return None
        axes, out = {a.name for a in c.axes}, {}
        for a, i in zip(p.axes, reads[0]):
            if type(i) is E.Var and i.name in axes:
                out[a.name] = i.name
            elif a.upper.value != 1:
                return None
        return out if len(set(out.values())) == len(out) else None

    def options(self, name: str) -> list[str]:
        s = self.stages[name]
        if name in self.inline:
            return ["inline"]
        if name in self.fused.values():
            return ["consumer"]
        if name in self.fused:
            return ["tile_fused"]
        out = []
        if _has_reuse(s):
            out += ["tile_cache_write", "tile"] if name in self.outputs else ["tile"]
        elif s.op.reduce_axes and _rfactor_worthy(s):
            out.append("rfactor")
        return out or ["simple"]

    def plans(self) -> list[dict[str, str]]:
        plans: list[dict[str, str]] = [{}]
        for n in self.order:
            plans = [{**p, n: o} for p in plans for o in self.options(n)]
        return plans


def _has_reuse(s: Stage) -> bool:
    """A reduction where some input is read at indices that miss a spatial axis: each element is reused across
    that axis, which tiling turns into register and cache reuse (matmul, convolution)."""
    if not s.op.reduce_axes:
        return False
    spatial = {a.name for a in s.op.axes if a.upper.value > 1}
    stack = [s.op.body]
    while stack:
        x = stack.pop()
        if type(x) is E.Load:
            used = {v.name for i in x.indices for v in E.free_vars(i)}
            if spatial - used:
                return True
        stack.extend(x.children())
    return False


def _rfactor_worthy(s: Stage) -> bool:
    reduce = math.prod(a.upper.value for a in s.op.reduce_axes)
    spatial = math.prod(s.tensor.shape)
    return reduce >= RFACTOR_MIN_REDUCTION and spatial <= RFACTOR_MAX_SPATIAL and len(s.op.reduce_axes) == 1


def _apply_plan(sch: Schedule, space: Space, plan: dict[str, str], analysis: _Analysis, target: Target) -> None:
    roots: list[tuple[str, list[str]]] = []  # (stage, loops that may run in parallel) for the final annotation
    for name in analysis.order:
        decision = plan[name]
        if decision == "inline":
            sch.compute_inline(name)
        elif decision == "tile_fused":
            roots.append(_multi_level_tiling(sch, space, name, analysis.fused[name], analysis.fused_axes[name]))
        elif decision == "tile_cache_write":
            local = sch.cache_write(name)
            axes = [a.name for a in sch.state.stage(name).op.axes]
            roots.append(_multi_level_tiling(sch, space, local, name, dict(zip(axes, axes))))
        elif decision == "tile":
            roots.append(_tile_in_place(sch, space, name, target))
        elif decision == "rfactor":
            roots.append(_rfactor(sch, space, name, target, analysis))
        elif decision == "simple":
            root = _place(sch, space, name, analysis)
            loops = _simple(sch, space, name, target, split=root)
            if root:
                roots.append((name, loops))
    for name, loops in roots:
        count = space.pick(f"{name}_parallel", range(len(loops), max(-1, len(loops) - MAX_PARALLEL_GRAINS), -1))
        sch.parallel_outer(name, count)


def _spatial(sch: Schedule, name: str) -> list[str]:
    st = sch.state.stage(name)
    return [lp for lp in st.leaves if not st.loops[lp].is_reduce]


def _extent(sch: Schedule, name: str, loop: str) -> int:
    return sch.state.stage(name).loops[loop].extent.value


def _multi_level_tiling(sch: Schedule, space: Space, producer: str, consumer: str,
                        axis_map: dict[str, str]) -> tuple[str, list[str]]:
    """SSRSRS: the consumer's spatial loops split twice (levels 0 and 1); the producer computed at the last
    level-1 loop, its region split once more (levels 2 and 3; `axis_map` names the consumer axis of each producer
    axis) and its reductions split in two, ordered r0 s2 r1 s3; the innermost loop vectorised, the producer
    auto-unrolled."""
    axes = [a.name for a in sch.state.stage(consumer).op.axes]
    level0, level1, level2 = [], [], []
    inner: dict[str, E.Var] = {}
    for a in axes:
        n = _extent(sch, consumer, a)
        if n == 1:
            level0.append(a)
            continue
        v1, v2, v3 = space.tile(f"{producer}_{a}", n, 4)
        a0, a1 = sch.split(consumer, a, v1, exact=True)
        a10, a11 = sch.split(consumer, a1, v2, exact=True)
        level0.append(a0)
        level1.append(a10)
        level2.append(a11)
        inner[a] = v3
    sch.reorder(consumer, *level0, *level1, *level2)
    attach = (level1 or level0)[-1]
    sch.compute_at(producer, consumer, attach)
    p_axes = [a.name for a in sch.state.stage(producer).op.axes]
    s2, s3 = [], []
    for pa in p_axes:
        ca = axis_map.get(pa)
        if ca in inner:
            o, i = sch.split(producer, pa, inner[ca], exact=True)
            s2.append(o)
            s3.append(i)
        else:
            s2.append(pa)
    r0, r1 = _split_reductions(sch, space, producer)
    sch.reorder(producer, *r0, *s2, *r1, *s3)
    if s3 and axis_map.get(p_axes[-1]) in inner:
        sch.vectorize(producer, s3[-1])
    sch.auto_unroll(producer, space.choice(f"{producer}_unroll", UNROLL_STEPS))
    if level2 and axes[-1] in inner:
        sch.vectorize(consumer, level2[-1])
    return consumer, level0


def _split_reductions(sch: Schedule, space: Space, name: str) -> tuple[list[str], list[str]]:
    """The "RR" of SSRSRS: each reduction axis of the stage split in two by a tile size (outer loops, inner
    loops); an axis of extent 1 stays whole, among the outer."""
    r0, r1 = [], []
    for r in [a.name for a in sch.state.stage(name).op.reduce_axes]:
        n = _extent(sch, name, r)
        if n == 1:
            r0.append(r)
            continue
        (w,) = space.tile(f"{name}_{r}", n, 2)
        o, i = sch.split(name, r, w, exact=True)
        r0.append(o)
        r1.append(i)
    return r0, r1


def _tile_in_place(sch: Schedule, space: Space, name: str, target: Target) -> tuple[str, list[str]]:
    """SSRSRS on the stage itself, accumulating into its own buffer."""
    st = sch.state.stage(name)
    levels: list[list[str]] = [[], [], [], []]
    for a in [x.name for x in st.op.axes]:
        n = _extent(sch, name, a)
        if n == 1:
            levels[0].append(a)
            continue
        v1, v2, v3 = space.tile(f"{name}_{a}", n, 4)
        a0, a1 = sch.split(name, a, v1, exact=True)
        a10, a11 = sch.split(name, a1, v2, exact=True)
        a110, a111 = sch.split(name, a11, v3, exact=True)
        for level, loop in zip(levels, (a0, a10, a110, a111)):
            level.append(loop)
    r0, r1 = _split_reductions(sch, space, name)
    sch.reorder(name, *levels[0], *levels[1], *r0, *levels[2], *r1, *levels[3])
    last_axis = st.op.axes[-1].name
    if levels[3] and _extent(sch, name, last_axis) > 1:
        sch.vectorize(name, levels[3][-1])
    sch.auto_unroll(name, space.choice(f"{name}_unroll", UNROLL_STEPS))
    return name, levels[0]


def _rfactor(sch: Schedule, space: Space, name: str, target: Target, analysis: _Analysis) -> tuple[str, list[str]]:
    """A long reduction over a small output: its inner part becomes a spatial axis of partial results (rfactor),
    which vectorise; the stage itself stays at the root."""
    st = sch.state.stage(name)
    (r,) = [a.name for a in st.op.reduce_axes]
    n = _extent(sch, name, r)
    width = space.pick(f"{name}_rfactor", [d for d in divisors(n) if 1 < d <= MAX_INNERMOST and d < n] or [n])
    _, inner = sch.split(name, r, width, exact=True)
    rf = sch.rfactor(name, inner)
    lane, *rest = sch.loops(rf)
    sch.reorder(rf, *rest, lane)
    sch.vectorize(rf, lane)
    spatial = _spatial(sch, name)
    if spatial:
        sch.compute_at(rf, name, spatial[-1])
    return name, spatial[:-1] if spatial else []


def _place(sch: Schedule, space: Space, name: str, analysis: _Analysis) -> bool:
    """Choose where a non-output stage is computed: at the root, or at a loop of its only consumer. True if at
    the root."""
    if name in analysis.outputs:
        return True
    readers = analysis.effective_readers(name)
    if len(readers) != 1 or len(E.loads(analysis.stages[name].op.body)) > INLINE_MAX_LOADS:
        return True  # a transform reading many inputs is computed once, at the root
    consumer = readers[0]
    reads = sum(1 for x in E.loads(analysis.stages[consumer].op.body) if x.buffer.name == name)
    if reads > INLINE_MAX_LOADS:
        return True  # the region a many-tap reader needs is a min/max over every tap: keep it whole
    leaves = sch.state.stage(consumer).leaves
    last = len(leaves) - 1
    for s in sch.state.stages:  # the consumer's cache_write tile now reads it: compute it outside that tile
        if isinstance(s.attach, tuple) and s.attach[0] == consumer and name in {t.name for t in s.op.inputs}:
            last = min(last, leaves.index(s.attach[1]))
    where = space.pick(f"{name}_at", [-1] + list(range(max(0, last + 1 - MAX_LOCATIONS), last + 1)))
    sch.compute_at(name, consumer, where)
    return where == -1


def _simple(sch: Schedule, space: Space, name: str, target: Target, split: bool) -> list[str]:
    """Vectorise the innermost spatial loop (split by a tile size when at the root), reductions inside the
    spatial loops; returns the loops that may run in parallel."""
    spatial = _spatial(sch, name)
    st = sch.state.stage(name)
    reduce = [lp for lp in st.leaves if st.loops[lp].is_reduce]
    if not spatial:
        return []
    last = spatial[-1]
    outer = spatial[:-1]
    if split and _extent(sch, name, last) > 1:
        (v,) = space.tile(f"{name}_{last}", _extent(sch, name, last), 2)
        lo, last = sch.split(name, last, v, exact=True)
        outer = outer + [lo]
    if reduce:
        sch.reorder(name, *outer, *reduce, last)
    if not reduce or _contiguous_in(st, last):
        sch.vectorize(name, last)
    return outer if split else []


def _contiguous_in(st: Stage, loop: str) -> bool:
    """Whether the stage's reads move along their innermost index with the innermost spatial axis (so the
    loop vectorises over contiguous data)."""
    axis = st.op.axes[-1].name
    stack = [st.op.body]
    while stack:
        x = stack.pop()
        if type(x) is E.Load and x.indices:
            if axis in {v.name for v in E.free_vars(x.indices[-1])}:
                return True
        stack.extend(x.children())
    return False
