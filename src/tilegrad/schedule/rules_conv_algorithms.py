"""Default schedules for the convolution algorithms of te/nn/winograd.py and te/nn/im2col.py.

Each stage of those computes has its own tag and rule. The GEMMs are tiled as the packed GEMM is (an mr x nr
register tile accumulated over the whole reduction, the nr columns two vectors); the Winograd transforms run one
tile at a time with their position loops unrolled, so that each position's select chain folds to its own few
terms, and vectorised across channels; im2col's copy-out is vectorised along the output row. The last stage of each
algorithm may arrive inlined into an element-wise epilogue (bias, residual, activation); the rules only read
the loops of the stage they are given, so they schedule the epilogue alike. The register tiles (mr, the channel
block, im2col's mr x nr) are the packed layouts of the computes' operands, so they are not parameters, except the
Winograd GEMM's rows per tile (its input transform is not packed by tiles); the parallel grains are.
"""

from __future__ import annotations

import math

from ..errors import ScheduleError
from ..target import Target
from ..te.tiling import row_tile
from .knobs import Knobs
from .parallel import parallel_grain
from .reductions import reduction_work
from .rules import Anchor, rule
from .rules_nchwc import PAIRED_ACCUMULATORS
from .schedule import Schedule
from .state import Stage
from .tiling import extent


@rule("winograd_conv2d")
def schedule_winograd_output(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """Y = A^T (M A): one output tile at a time (tiles in parallel), a vector of output channels at a time (the
    row of M each position reads is contiguous in them; in the blocked layout, an output block, whose lanes are
    contiguous in the output too), M A computed for that tile and vector, the m x m positions unrolled."""
    m = anchor.attrs["m"]
    if len(s.op.axes) == 5:
        n, o0, h, w, o1 = [a.name for a in s.op.axes]
        channels = extent(s, o0) * extent(s, o1)
    else:
        n, o, h, w = [a.name for a in s.op.axes]
        channels = extent(s, o)
        o0, o1 = _vector_split(sch, s, o, target)
    h0, h1 = sch.split(s.name, h, m)
    w0, w1 = sch.split(s.name, w, m)
    sch.reorder(s.name, *[lp for lp in (n, h0, w0, o0, h1, w1, o1) if lp])
    parallel_grain(sch, s, [n, h0, w0], None, target, channels * m * m, knobs)
    half = _producer(sch, s, "winograd_output")
    loops = sch.loops(s.name)
    sch.compute_at(half, s.name, loops[loops.index(h1) - 1])  # o0, or the (maybe fused) tile loop
    _, e, col, lane = sch.loops(half)
    sch.unroll(half, e)
    sch.unroll(half, col)
    sch.vectorize(half, lane)
    sch.unroll(s.name, h1)
    sch.unroll(s.name, w1)
    sch.vectorize(s.name, o1)


@rule("winograd_gemm")
def schedule_winograd_gemm(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """M[xi] = V[xi] U[xi] for each tile position xi: an mr tiles x one block of output channels register tile
    over all input channels; positions and channel blocks run in parallel. V is not packed by tiles, so mr is a
    parameter (by default `winograd_rows`; one that does not divide the rows leaves a guarded tail)."""
    block = anchor.attrs["block"]
    default = winograd_rows(anchor.attrs, target)
    mr = knobs.choice(f"{s.name}_mr", range(1, max(8, default) + 1), default)
    local = sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    xi, p, o = [a.name for a in s.op.axes]
    p0, p1 = sch.split(s.name, p, mr)
    o0, o1 = sch.split(s.name, o, block)
    sch.reorder(s.name, xi, o0, p0, p1, o1)
    parallel_grain(sch, s, [xi, o0], None, target, extent(s, p) * block * reduction_work(sch, local), knobs)
    sch.vectorize(s.name, o1)
    sch.compute_at(local, s.name, p0)
    lst = sch.state.stage(local)
    *_, li, lo = [a.name for a in lst.op.axes]
    sch.reorder(local, lst.leaves[-1], li, lo)
    sch.unroll(local, li)
    sch.vectorize(local, lo)


def winograd_rows(attrs: dict, target: Target) -> int:
    """Tiles per register tile of the Winograd GEMM: the compute's `row_tile` (to which its rows are padded; 4 to
    6, for AVX2's 16 registers), or with 32 registers and a block of several vectors, the rows of a tile of
    PAIRED_ACCUMULATORS accumulators, as the direct convolution's (`te.tiling.row_tile` over the tiles)."""
    vectors = -(-attrs["block"] // target.vector_lanes)
    if target.vector_registers < 32 or vectors < 2:
        return attrs["mr"]
    return row_tile(math.prod(attrs["tiles"]), PAIRED_ACCUMULATORS // vectors)


@rule("winograd_input")
def schedule_winograd_input(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """V = (B^T d) B: one tile at a time (in parallel), a vector of channels at a time, B^T d computed for that
    tile and vector, the alpha^2 positions unrolled."""
    xi, p, c = [a.name for a in s.op.axes]
    c0, c1 = _vector_split(sch, s, c, target)
    sch.reorder(s.name, *[lp for lp in (p, c0, xi, c1) if lp])
    parallel_grain(sch, s, [p], None, target, extent(s, xi) * extent(s, c), knobs)
    half = _producer(sch, s, "winograd_input_rows")
    sch.compute_at(half, s.name, c0 or p)
    _, e, col, lane = sch.loops(half)
    sch.unroll(half, e)
    sch.unroll(half, col)
    sch.vectorize(half, lane)
    sch.unroll(s.name, xi)
    sch.vectorize(s.name, c1)


def _producer(sch: Schedule, s: Stage, tag: str) -> str:
    """The stage tagged `tag` that `s` reads, directly or through stages inlined into it."""
    stages = {st.name: st for st in sch.state.stages}
    todo = list(s.op.inputs)
    while todo:
        t = todo.pop()
        st = stages.get(t.name)
        if st is None:
            continue
        if st.op.tag == tag:
            return st.name
        if st.attach == "inline":
            todo.extend(st.op.inputs)
    raise ScheduleError(f"stage {s.name!r} reads no stage tagged {tag!r}")


def _vector_split(sch: Schedule, s: Stage, loop: str, target: Target) -> tuple[str | None, str]:
    """(outer, lanes) of `loop` when whole vectors divide it, else (None, loop): a vector loop without a tail."""
    if extent(s, loop) % target.vector_lanes == 0 and extent(s, loop) > target.vector_lanes:
        return sch.split(s.name, loop, target.vector_lanes)
    return None, loop


@rule("im2col_conv2d")
def schedule_im2col_output(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """The copy-out of the product to NCHW: images and channels in parallel, vectors along the row."""
    n, o, h, w = [a.name for a in s.op.axes]
    _, w1 = _vector_split(sch, s, w, target)
    parallel_grain(sch, s, [n, o, h], None, target, extent(s, w), knobs)
    sch.vectorize(s.name, w1)


ROWS_PER_THREAD = 4  # output rows enough to share out whole: fewer (a 1-D convolution's one) share the columns


@rule("im2col_gemm")
def schedule_im2col_gemm(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """W @ cols per image, one output row at a time (rows in parallel): that row's columns are built first (a
    slab that stays in cache), then every mr channels x nr positions register tile accumulates over all of k.
    Where the rows are too few to share out (a 1-D convolution has one), the row's tiles of nr positions run in
    parallel instead, each building its own panel of columns first, then every tile of mr channels over it."""
    mr, nr = anchor.attrs["mr"], anchor.attrs["nr"]
    cols = next(t.name for t in s.op.inputs if getattr(t.op, "tag", None) == "im2col")
    local = sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    n, o, h, w = [a.name for a in s.op.axes]
    o0, o1 = sch.split(s.name, o, mr)
    w0, w1 = sch.split(s.name, w, nr)
    work = extent(s, o) * reduction_work(sch, local)
    if extent(s, n) * extent(s, h) < ROWS_PER_THREAD * target.cores:
        sch.reorder(s.name, n, h, w0, o0, o1, w1)
        parallel_grain(sch, s, [n, h, w0], None, target, work * nr, knobs)
    else:
        sch.reorder(s.name, n, h, o0, w0, o1, w1)
        parallel_grain(sch, s, [n, h], None, target, work * extent(s, w), knobs)
    sch.vectorize(s.name, w1)
    loops = sch.loops(s.name)
    sch.compute_at(cols, s.name, loops[loops.index(o0) - 1])
    sch.vectorize(cols, sch.loops(cols)[-1])
    sch.compute_at(local, s.name, loops[loops.index(o1) - 1])
    lst = sch.state.stage(local)
    *_, lo, _, lw = [a.name for a in lst.op.axes]
    sch.reorder(local, lst.leaves[-1], lo, lw)
    sch.unroll(local, lo)
    sch.vectorize(local, lw)
