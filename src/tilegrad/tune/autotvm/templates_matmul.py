"""The template of matmul, dense and batch matmul: the default rule's register tile (`_schedule_matmul` in
schedule/defaults.py) with its sizes, the k blocking, the parallel grain and the unrolling as knobs.

Its default config is the hand-written schedule's point: rows per block mb and register rows mr (the two factors
of one split of the rows in three), register columns nr, k blocks of kb, the same parallel grain, the tile's rows unrolled.
"""

from __future__ import annotations

from ...schedule.parallel import parallel_count
from ...schedule.reductions import reduction_work
from ...schedule.rules import Anchor
from ...schedule.schedule import Schedule
from ...schedule.state import Stage
from ...target import Target
from .space import ConfigEntity, ConfigSpace
from .template import extent, parallelize, register_template

K_BLOCKS = (8, 16, 32, 64, 128, 256)


@register_template("matmul", "matmul", "dense", "batch_matmul")
def schedule_matmul(cfg: ConfigSpace | ConfigEntity, sch: Schedule, s: Stage, target: Target,
                    anchor: Anchor) -> None:
    """Blocks of rows and register tiles of rows x columns accumulated over blocks of k; batch, row blocks and
    column tiles run in parallel up to the grain knob."""
    lanes = target.vector_lanes
    *batch, i, j = [a.name for a in s.op.axes]
    m, n = extent(s, i), extent(s, j)
    if anchor.tag == "batch_matmul" and n >= lanes and m >= 8:
        nr_d, mr_d = lanes, 8
    else:
        nr_d, mr_d = first_fitting(n, (lanes * 2, lanes)), first_fitting(m, (4, 3, 2))
    mb_d = min(m, 64)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    k = sch.state.stage(local).leaves[-1]
    kext = extent(sch.state.stage(local), k)

    cfg.define_split("tile_i", m, 3, max_innermost=8, default=(mb_d, mr_d))
    widths = {lanes * q for q in (1, 2, 3, 4) if lanes * q <= -(-n // lanes) * lanes}
    widths |= {d for d in range(1, 4 * lanes + 1) if n % d == 0}
    cfg.define_split("tile_j", n, 2, "candidate", candidates=[(w,) for w in sorted(widths)], default=(nr_d,))
    cfg.define_split("tile_k", kext, 2, "candidate", candidates=[(b,) for b in K_BLOCKS if b <= kext],
                     default=(min(kext, 256),))
    outer_extents = [extent(s, b) for b in batch] + [-(-m // mb_d), -(-n // nr_d)]
    work = mb_d * nr_d * reduction_work(sch, local)
    cfg.define_knob("grain", range(len(outer_extents) + 1), parallel_count(outer_extents, target, work))
    cfg.define_annotate("ann_tile", ["i"], "try_unroll", default=("unroll",))

    i0, i10, i11 = cfg["tile_i"].apply(sch, s.name, i)
    j0, j1 = cfg["tile_j"].apply(sch, s.name, j)
    sch.reorder(s.name, *batch, i0, j0, i10, i11, j1)
    parallelize(sch, s.name, [*batch, i0, j0], cfg["grain"].val)
    sch.vectorize(s.name, j1)
    sch.compute_at(local, s.name, i10)
    k0, k1 = cfg["tile_k"].apply(sch, local, k)
    li, lj = [a.name for a in sch.state.stage(local).op.axes][-2:]
    sch.reorder(local, k0, k1, li, lj)
    cfg["ann_tile"].apply(sch, local, [li])
    sch.vectorize(local, lj)


def first_fitting(n: int, sizes: tuple[int, ...]) -> int:
    """The first of `sizes` that divides n, else the first that fits in it, else n (the default rule's tile)."""
    return next((t for t in sizes if n % t == 0), next((t for t in sizes if t <= n), n))
