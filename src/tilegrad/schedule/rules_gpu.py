"""Default schedules for GPUs (targets of kind "cuda"), chosen per kernel like the CPU rules, in TVM's style.

- Any computation: its output's loops fused, split into blocks of threads (one output element a thread); every
  producer that is not inlined (a reduction: pooling, a depthwise window) is computed per thread at that loop.
- A reduction output (sums, means, norms over many elements): one block per output element. The reduction is
  split over the block's threads by rfactor into a shared buffer of partial sums, which each thread then adds up
  into a register before the copy out.
- Row-wise chains (softmax, layer norm): one block per row, threads across the row; each reduction of the chain
  is split over the threads as above.
- Matmul, batch matmul, dense and convolution (and their element-wise epilogues): Ansor's GPU sketch, SSSRRSRS
  without virtual threads: each block computes a tile of the output, each thread a register tile of it, and the
  reduction walks in steps whose slices of the inputs the block's threads fetch into shared memory together,
  four consecutive elements a thread (float4 loads where aligned).
"""

from __future__ import annotations

import math

from ..target import Target
from ..te.tensor import Tensor
from .knobs import Defaults, Knobs
from .patterns import epilogue_anchor, row_axes
from .rules import CONV_TAGS, HEAVY_TAGS, INJECTIVE_TAGS
from .schedule import Schedule
from .state import Stage

THREADS = 256  # threads per block of the one-element-per-thread and row rules
THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)  # what the default sketch may pick instead
TILE_THREADS = (8, 16)  # (rows, columns) of threads of a tiled block
TILE_REGISTERS = (4, 4)  # output elements per thread
# A convolution's columns are its output's rows and columns fused: a thread's columns would cross a row wherever
# they do not divide the width, and a register tile is a box over the output's axes, so 4 columns could span
# whole rows (every thread computed 2 x 14 columns to keep 4 of a 14-wide map). One column a thread and more
# rows keep the block's tile (32 x 64) and leave nothing to compute twice.
CONV_TILE_THREADS = (4, 64)
CONV_TILE_REGISTERS = (8, 1)
TILE_K = 8  # reduction elements per shared-memory step
VECTOR = 4  # float32 elements a thread fetches at once into shared memory (float4)
ROW_REDUCTION_MIN = 64  # reductions over fewer elements stay in one thread


def gpu_schedule(outputs: list[Tensor], target: Target, knobs: Knobs | None = None) -> Schedule:
    """The default GPU schedule of a kernel computing `outputs`; `knobs` (the default sketch's space) may pick
    the threads per block of each untiled output (`THREAD_CHOICES`, 256 by default), which tuning then searches."""
    knobs = knobs or Defaults()
    sch = Schedule(outputs)
    out_names = {t.name for t in sch.state.outputs}
    for s in list(reversed(sch.state.stages)):
        if s.name not in out_names and not s.op.reduce_axes and s.op.tag in INJECTIVE_TAGS:
            sch.compute_inline(s.name)
    rows = row_axes(sch)
    for name in [t.name for t in sch.state.outputs]:
        s = sch.state.stage(name)
        anchor = epilogue_anchor(sch, s)
        heavy = s if s.op.tag in HEAVY_TAGS and s.op.reduce_axes else None
        if anchor is not None and anchor.accumulator is not None and anchor.tag in HEAVY_TAGS:
            heavy = sch.state.stage(anchor.accumulator)
        if heavy is not None and len(s.op.axes) >= 2 and _tiled(sch, s, heavy, target):
            continue
        threads = knobs.pick(f"{s.name}_threads", [t for t in THREAD_CHOICES if t <= target.max_threads_per_block],
                             default=min(THREADS, target.max_threads_per_block))
        if rows:  # a chain over the whole tensor (rows == 0) is one thread per element
            _rows(sch, s, rows, threads)
        elif s.op.reduce_axes and _reduced(s) >= ROW_REDUCTION_MIN:
            _block_reduction(sch, s, threads)
        else:
            _elementwise(sch, s, threads)
    return sch


def _reduced(s: Stage) -> int:
    """The elements of the longest reduction axis: what the block's threads would share."""
    return max(a.upper.value for a in s.op.reduce_axes)


def _spatial(s: Stage) -> list[str]:
    return [n for n in s.leaves if not s.loops[n].is_reduce]


def _fused(sch: Schedule, s: Stage, loops: list[str]) -> str:
    return sch.fuse(s.name, *loops) if len(loops) > 1 else loops[0]


def _producers(sch: Schedule, s: Stage) -> list[Stage]:
    """The stages `s` reads that are neither inlined nor attached yet, nearest first."""
    seen, out, stack = set(), [], [s]
    while stack:
        x = stack.pop()
        for p in [st for st in sch.state.stages if any(t.name == st.name for t in x.op.inputs)]:
            if p.name in seen:
                continue
            seen.add(p.name)
            if p.attach == "inline":
                stack.append(p)
            elif p.attach is None and p.tensor not in sch.state.outputs:
                out.append(p)
                stack.append(p)
    return out


def _elementwise(sch: Schedule, s: Stage, threads: int) -> None:
    """One output element per thread; producers computed by the thread that reads them."""
    flat = _fused(sch, s, _spatial(s)) if _spatial(s) else None
    if flat is None:
        return
    n = s.loops[flat].extent.value
    block, thread = sch.split(s.name, flat, factor=min(threads, n))
    sch.bind(s.name, block, "blockIdx.x")
    sch.bind(s.name, thread, "threadIdx.x")
    for p in _producers(sch, s):
        sch.compute_at(p.name, s.name, thread)


def _split_over_threads(sch: Schedule, s: Stage, at: Stage, block: str, threads: int) -> None:
    """Compute reduction `s` at loop `block` of `at`, its reduction split over the block's threads: partial
    results in a shared buffer (rfactor), combined by each thread in a register."""
    reduce = [n for n in s.leaves if s.loops[n].is_reduce]
    k = max(reduce, key=lambda n: s.loops[n].extent.value)  # rfactor takes one split axis, not a fusion
    width = min(threads, 1 << (s.loops[k].extent.value - 1).bit_length())
    _, inner = sch.split(s.name, k, factor=width)
    rf = sch.rfactor(s.name, inner)
    sch.set_scope(rf, "shared")
    sch.compute_at(rf, at.name, block)
    sch.bind(rf, sch.loops(rf)[0], "threadIdx.x")
    sch.compute_at(s.name, at.name, block)


def _block_reduction(sch: Schedule, s: Stage, threads: int) -> None:
    """One block per output element of reduction `s`, its threads sharing the reduction."""
    acc = sch.state.stage(sch.cache_write(s.name, "local"))
    s = sch.state.stage(s.name)
    block = _fused(sch, s, list(s.leaves))
    sch.bind(s.name, block, "blockIdx.x")
    _split_over_threads(sch, acc, s, block, threads)
    for p in _producers(sch, acc):
        sch.compute_at(p.name, acc.name, sch.loops(acc.name)[-1])


def _rows(sch: Schedule, s: Stage, rows: int, threads: int) -> None:
    """One block per row of a row-wise chain: threads across the row, each reduction split over them."""
    leaves = list(s.leaves)
    row = _fused(sch, s, leaves[:rows])
    col = _fused(sch, s, leaves[rows:])
    width = min(threads, s.loops[col].extent.value)
    _, thread = sch.split(s.name, col, factor=width)
    sch.bind(s.name, row, "blockIdx.x")
    sch.bind(s.name, thread, "threadIdx.x")
    for p in reversed(_producers(sch, s)):  # producers first: a reduction's rfactor stage precedes its readers
        if p.op.reduce_axes:
            _split_over_threads(sch, p, s, row, threads)
        else:
            sch.compute_at(p.name, s.name, row)


def _tiled(sch: Schedule, s: Stage, acc: Stage, target: Target) -> bool:
    """Tile output `s` over blocks and threads around accumulator `acc` (s itself, or the heavy op an epilogue
    `s` reads) with the inputs' slices in shared memory. False, leaving the schedule as it was, where the
    output is too small for the tile or the slices would not fit in shared memory."""
    axes = _spatial(s)
    conv = acc.op.tag in CONV_TAGS
    (ty, tx), (ry, rx) = _tile_shape(conv)
    extents = [s.loops[n].extent.value for n in axes]
    if len(axes) < 2 or extents[-2] * math.prod(extents[-1:]) < math.prod(TILE_THREADS):
        return False
    if _shared_bytes(acc, conv) > target.shared_bytes_per_block or any(
            p.attach != "inline" for p in sch.state.stages if any(t.name == p.name for t in acc.op.inputs)):
        return False  # an input computed in the kernel (attention's softmax) would be recomputed per fetch
    if acc is s:
        acc = sch.state.stage(sch.cache_write(s.name, "local"))
        s = sch.state.stage(s.name)
        axes = list(s.leaves)
    # rows: the second axis of a convolution (output channels) or the next-to-last of a matmul; columns: the rest
    i = axes[1] if conv else axes[-2]
    cols = axes[2:] if conv else axes[-1:]
    outer = axes[:1] if conv else axes[:-2]
    j = _fused(sch, s, cols)
    bi, rest_i = sch.split(s.name, i, factor=ty * ry)
    ti, ri = sch.split(s.name, rest_i, factor=ry)
    bj, rest_j = sch.split(s.name, j, factor=tx * rx)
    tj, rj = sch.split(s.name, rest_j, factor=rx)
    order = ([_fused(sch, s, outer)] if outer else []) + [bi, bj, ti, tj, ri, rj]
    sch.reorder(s.name, *order)
    if outer:
        sch.bind(s.name, order[0], "blockIdx.z")
    sch.bind(s.name, bi, "blockIdx.y")
    sch.bind(s.name, bj, "blockIdx.x")
    sch.bind(s.name, ti, "threadIdx.y")
    sch.bind(s.name, tj, "threadIdx.x")
    sch.compute_at(acc.name, s.name, tj)
    reduce = [n for n in acc.leaves if acc.loops[n].is_reduce]
    spatial = [n for n in acc.leaves if not acc.loops[n].is_reduce]
    ko, ki = sch.split(acc.name, reduce[0], factor=TILE_K)
    sch.reorder(acc.name, ko, *reduce[1:], ki, *spatial)
    for ax in spatial:
        sch.unroll(acc.name, ax)
    for t in list(acc.op.inputs):
        cached = sch.cache_read(t.name, "shared", [acc.name])
        sch.compute_at(cached, acc.name, ko)
        loops = sch.loops(cached)
        lanes = None
        if t.dtype == "float32":  # float4 loads where the renderer proves them aligned, else 4 scalar ones
            last, lanes = sch.split(cached, loops[-1], factor=VECTOR)
            loops = loops[:-1] + [last]
        flat = _fused(sch, sch.state.stage(cached), loops)
        _, inner = sch.split(cached, flat, factor=ty * tx)
        fy, fx = sch.split(cached, inner, factor=tx)
        sch.bind(cached, fy, "threadIdx.y")
        sch.bind(cached, fx, "threadIdx.x")
        if lanes is not None:
            sch.vectorize(cached, lanes)
    for p in _producers(sch, s):
        if p.attach is None and p is not acc:
            sch.compute_at(p.name, s.name, tj)
    return True


def _tile_shape(conv: bool) -> tuple[tuple[int, int], tuple[int, int]]:
    """(threads, registers) of a tiled block, each as (rows, columns)."""
    return (CONV_TILE_THREADS, CONV_TILE_REGISTERS) if conv else (TILE_THREADS, TILE_REGISTERS)


def _shared_bytes(acc: Stage, conv: bool) -> int:
    """An upper bound of the shared memory a tile's input slices take: a slice per input of one reduction step
    (the whole of the other reduction axes) by the block's rows or columns, with a convolution's window halo."""
    (ty, tx), (ry, rx) = _tile_shape(conv)
    window = math.prod(a.upper.value for a in acc.op.reduce_axes[1:])
    per_input = TILE_K * window * max(ty * ry, tx * rx) * 4
    return len(acc.op.inputs) * per_input * 2
