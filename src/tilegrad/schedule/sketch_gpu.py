"""Ansor's GPU sketch: multi-level tiling "SSSRRSRS" with shared-memory cache reads and thread binding, its tile
sizes left as variables so that the task space and both search policies can search GPU tasks.

Each spatial axis of the output is split in four (parts: block, thread, register tile S3, register tile S4), each
reduction axis in three (R0: the steps of the shared-memory fetch, R1, R2). The output's block parts are fused and
bound to blockIdx.x; its thread parts are bound to threadIdx.x (the innermost axis), y and z (beyond three axes the
outer ones are fused into z; Ansor fuses them all into x, which symbolic bound inference cannot see through, so the
shared tiles' formulas would be loose); a local accumulator (cache_write, or the
heavy stage an element-wise epilogue reads) is computed at the thread loop with the order R0 R1 S3 R2 S4, under an
auto-unroll budget. Every input of the accumulator is read through a shared buffer computed at the last R0 loop:
its region is fetched by all the block's threads together (cooperative fetching), `vector` consecutive elements a
thread (float4 loads where the renderer proves them aligned). Ansor's virtual threads are left out: bound
inference gives a thread's region as one box, and a strided virtual-thread tile would make it span other threads'
elements (docs/cuda.md).

A candidate must fit the target (`GpuSketch.valid`): threads per block at most `max_threads_per_block`, the
shared tiles within `shared_bytes_per_block`, and the registers a thread holds (an estimate: accumulators,
operands of one step, a few indices) within `registers_per_thread` and, over the block, `registers_per_block`.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable

from ..dtype import itemsize
from ..errors import ScheduleError
from ..target import Target
from ..te import expr as E
from ..te.simplify import simplify
from ..te.tensor import Tensor
from .patterns import epilogue_anchor
from .rules import HEAVY_TAGS, INJECTIVE_TAGS
from .schedule import Schedule
from .space import Sketch, Space, Tiling

UNROLL_STEPS = (0, 16, 64, 512, 1024)  # Ansor's auto-unroll max steps on GPUs
FETCH_VECTORS = (1, 2, 4)  # elements a thread fetches at once into shared memory
SAMPLE_TRIES = 64  # draws per sample before giving up on the target's limits
MAX_THREADS_Z = 64  # CUDA's limit of a block's z dimension
INDEX_REGISTERS = 16  # registers a thread spends on indices and addresses, in the register estimate


class GpuSketch(Sketch):
    """A GPU sketch whose candidates are also checked against the target's per-block limits."""

    def __init__(self, name: str, outputs: Callable[[], list[Tensor]], target: Target):
        self.target = target
        self.tiles: _Tiles | None = None  # filled by the rule: what the limits are computed from
        super().__init__(name, outputs, lambda sch, space: _multi_level_tiling(sch, space, self))

    def valid(self, params: dict) -> bool:
        return super().valid(params) and not self.over_limits(params)

    def sample(self, rng, fixed: dict[str, int] | None = None) -> dict[str, int]:
        """A random annotation within the target's limits (rejection sampling; after SAMPLE_TRIES draws over
        them, the last, which the validity check then refuses)."""
        for _ in range(SAMPLE_TRIES):
            params = super().sample(rng, fixed)
            if self.over_limits(params) is None:
                break
        return params

    def over_limits(self, params: dict) -> str | None:
        """Which limit of the target a valid assignment exceeds, or None."""
        return self.tiles.over_limits(params, self.target) if self.tiles is not None else None


def gpu_sketches(outputs: Callable[[], list[Tensor]], target: Target) -> list[Sketch]:
    """The GPU sketches of a computation with a heavy reduction (matmul, batch matmul, dense, convolution): the
    multi-level tiling, where it applies."""
    try:
        return [GpuSketch("gpu_tiling", outputs, target)]
    except ScheduleError:  # not a heavy reduction, or one whose inputs are computed in the kernel
        return []


class _Tiles:
    """The tilings of a GPU sketch and the accumulator they tile: threads, shared bytes and registers of an
    assignment follow from them."""

    def __init__(self, spatial: list[Tiling], loads: list[tuple[E.Load, dict, dict]], acc_bytes: int):
        self.spatial, self.loads, self.acc_bytes = spatial, loads, acc_bytes

    def threads(self, params: dict) -> int:
        return math.prod(t.parts(params)[1] for t in self.spatial)

    def threads_z(self, params: dict) -> int:
        """The threads bound to threadIdx.z: the outermost tiled axis, or the fusion of all but the last two."""
        return math.prod(t.parts(params)[1] for t in self.spatial[:-2])

    def registers(self, params: dict) -> int:
        accumulators = math.prod(params[t.vars[1]] for t in self.spatial)
        operands = sum(params[t.vars[2]] for t in self.spatial)
        return (accumulators + operands) * max(1, self.acc_bytes // 4) + INDEX_REGISTERS

    def shared_bytes(self, params: dict) -> int:
        """Bytes of every input's shared tile: each read's index range over the block's tile of the spatial axes
        and one R0 step of the reduction axes (a convolution's window adds its halo)."""
        total = 0
        for load, spatial, reduce in self.loads:
            ranges = {**{a: params[t.vars[0]] for a, t in spatial.items()},
                      **{r: params[t.vars[0]] for r, t in reduce.items()}}
            total += math.prod(_index_range(i, ranges) for i in load.indices) * itemsize(load.buffer.dtype)
        return total

    def over_limits(self, params: dict, target: Target) -> str | None:
        threads, shared, registers = self.threads(params), self.shared_bytes(params), self.registers(params)
        if threads > target.max_threads_per_block:
            return f"{threads} threads a block, above the target's {target.max_threads_per_block}"
        if self.threads_z(params) > MAX_THREADS_Z:
            return f"{self.threads_z(params)} threads along threadIdx.z, above CUDA's {MAX_THREADS_Z}"
        if shared > target.shared_bytes_per_block:
            return f"{shared} bytes of shared memory a block, above the target's {target.shared_bytes_per_block}"
        if registers > target.registers_per_thread or registers * threads > target.registers_per_block:
            return (f"about {registers} registers a thread ({registers * threads} a block), above the target's "
                    f"{target.registers_per_thread} ({target.registers_per_block})")
        return None


def _index_range(index: E.Expr, ranges: dict[str, int]) -> int:
    """How many values `index` takes (a bound: hi - lo + 1) while each axis named in `ranges` runs over that many
    values from 0; other axes stay whole."""
    fresh = {n: E.Var(f"{n}__range{r}", E.INDEX, 0, r - 1) for n, r in ranges.items()}
    e = simplify(E.substitute(index, fresh))
    return int(e.hi - e.lo + 1)


def _multi_level_tiling(sch: Schedule, space: Space, sketch: GpuSketch) -> None:
    """The rule of the module doc on `sch`, its tile sizes declared in `space`; a ScheduleError where it does not
    apply."""
    outputs = {t.name for t in sch.state.outputs}
    for st in list(reversed(sch.state.stages)):
        if st.name not in outputs and not st.op.reduce_axes and st.op.tag in INJECTIVE_TAGS:
            sch.compute_inline(st.name)
    if len(outputs) != 1:
        raise ScheduleError(f"no GPU tiling for a kernel of {len(outputs)} outputs")
    (out,) = outputs
    s = sch.state.stage(out)
    acc = s if s.op.tag in HEAVY_TAGS and s.op.reduce_axes else None
    anchor = epilogue_anchor(sch, s)
    if anchor is not None and anchor.accumulator is not None and anchor.tag in HEAVY_TAGS:
        acc = sch.state.stage(anchor.accumulator)
    if acc is None:
        raise ScheduleError(f"no GPU tiling for {out}: it is not a matmul, dense or convolution, nor its epilogue")
    inputs = {t.name for t in acc.op.inputs}
    if any(p.attach != "inline" for p in sch.state.stages if p.name in inputs):
        raise ScheduleError(f"no GPU tiling for {out}: an input of {acc.name} is computed in the kernel")
    if acc is s:
        acc = sch.state.stage(sch.cache_write(s.name, "local"))
        s = sch.state.stage(s.name)
    axes = list(s.leaves)
    spatial, inner, blocks, threads, registers = {}, {}, [], [], []
    for a, acc_axis in zip(axes, [x.name for x in acc.op.axes]):
        n = s.loops[a].extent.value
        if n == 1:
            blocks.append(a)
            continue
        v1, v2, v3 = space.tile(f"{acc.name}_{a}", n, 4)
        spatial[acc_axis] = space.tilings[-1]
        inner[acc_axis] = v3
        b, rest = sch.split(s.name, a, v1, exact=True)
        t, r = sch.split(s.name, rest, v2, exact=True)
        blocks.append(b)
        threads.append((t, v1 // v2))
        registers.append(r)
    if not threads:
        raise ScheduleError(f"no GPU tiling for {out}: every spatial axis has extent 1")
    sch.reorder(s.name, *blocks, *[t for t, _ in threads], *registers)
    block = sch.fuse(s.name, *blocks) if len(blocks) > 1 else blocks[0]
    sch.bind(s.name, block, "blockIdx.x")
    axes_threads = _bind_threads(sch, s.name, threads)
    thread = threads[-1][0]
    sch.compute_at(acc.name, s.name, thread)
    s3, s4 = [], []
    for a in [x.name for x in acc.op.axes]:
        if a in inner:
            o, i = sch.split(acc.name, a, inner[a], exact=True)
            s3.append(o)
            s4.append(i)
        else:
            s3.append(a)
    r0, r1, r2, reduce = [], [], [], {}
    for r in [x.name for x in acc.op.reduce_axes]:
        n = sch.state.stage(acc.name).loops[r].extent.value
        if n == 1:
            r0.append(r)
            continue
        w1, w2 = space.tile(f"{acc.name}_{r}", n, 3)
        reduce[r] = space.tilings[-1]
        o, rest = sch.split(acc.name, r, w1, exact=True)
        m, i = sch.split(acc.name, rest, w2, exact=True)
        r0.append(o)
        r1.append(m)
        r2.append(i)
    sch.reorder(acc.name, *r0, *r1, *s3, *r2, *s4)
    sch.auto_unroll(acc.name, space.choice(f"{acc.name}_unroll", UNROLL_STEPS))
    loads = [(x, spatial, reduce) for x in E.loads(acc.op.body) if x.buffer.name in inputs]
    for t in list(acc.op.inputs):
        _cooperative_fetch(sch, space, t, acc.name, r0[-1], axes_threads)
    for p in sch.state.stages:
        if p.attach is None and p.name not in outputs and p.name != acc.name:
            sch.compute_at(p.name, s.name, thread)
    _declare_limits(space, sketch.target, spatial, reduce, loads)
    sketch.tiles = _Tiles(list(spatial.values()), loads, itemsize(acc.tensor.dtype))


def _bind_threads(sch: Schedule, stage: str, threads: list[tuple[str, E.Expr]]) -> list[tuple[str, E.Expr]]:
    """Bind the thread loops (outermost first, each with its extent) to threadIdx.z, y, x, the innermost to x;
    more than three are fused into z (bound inference is exact per axis, so an axis is fused only when needed).
    Returns the (axis, extent) bound, x first."""
    if len(threads) > 3:
        outer = [t for t, _ in threads[:len(threads) - 2]]
        extent = functools.reduce(operator.mul, [n for _, n in threads[:len(threads) - 2]])
        threads = [(sch.fuse(stage, *outer), extent)] + threads[len(threads) - 2:]
    bound = []
    for (loop, extent), axis in zip(reversed(threads), ("threadIdx.x", "threadIdx.y", "threadIdx.z")):
        sch.bind(stage, loop, axis)
        bound.append((axis, extent))
    return bound


def _declare_limits(space: Space, target: Target, spatial: dict[str, Tiling], reduce: dict[str, Tiling],
                    loads: list[tuple[E.Load, dict, dict]]) -> None:
    """The target's limits in log space, for the gradient search's penalty: threads per block (the product of
    v1 / v2 over the axes), accumulators per thread (the product of v2) within the registers, and each input's
    shared tile (the block tiles of the axes its indices read; a window's halo left out) within the shared bytes."""
    var = {n: E.Var(n, E.INDEX) for t in [*spatial.values(), *reduce.values()] for n in t.vars}
    threads: dict[E.Var, float] = {}
    for t in spatial.values():
        threads[var[t.vars[0]]] = threads.get(var[t.vars[0]], 0.0) + 1.0
        threads[var[t.vars[1]]] = threads.get(var[t.vars[1]], 0.0) - 1.0
    space.limit(threads, math.log(target.max_threads_per_block))
    space.limit({var[t.vars[1]]: 1.0 for t in spatial.values()}, math.log(target.registers_per_thread))
    tiles = {**spatial, **reduce}
    for load, _, _ in loads:
        axes = {v.name for i in load.indices for v in E.free_vars(i)} & set(tiles)
        if axes:
            space.limit({var[tiles[a].vars[0]]: 1.0 for a in axes},
                        math.log(target.shared_bytes_per_block / itemsize(load.buffer.dtype)))


def _cooperative_fetch(sch: Schedule, space: Space, t: Tensor, acc: str, at: str,
                       threads: list[tuple[str, E.Expr]]) -> None:
    """Read `t` through a shared buffer computed at loop `at` of `acc`, fetched by all the block's threads:
    the buffer's loops fused, `vector` consecutive elements a thread, the threads across the rest (threadIdx.x
    fastest, so that a warp reads consecutive elements)."""
    cached = sch.cache_read(t.name, "shared", [acc])
    sch.compute_at(cached, acc, at)
    loops = sch.loops(cached)
    flat = sch.fuse(cached, *loops) if len(loops) > 1 else loops[0]
    vector = space.choice(f"{cached}_vector", FETCH_VECTORS)
    rest, lanes = sch.split(cached, flat, vector)
    for axis, extent in threads:
        rest, thread = sch.split(cached, rest, extent)
        sch.bind(cached, thread, axis)
    sch.vectorize(cached, lanes)
