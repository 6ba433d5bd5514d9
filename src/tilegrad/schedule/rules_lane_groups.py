"""The default schedule of a grouped convolution whose groups lie inside one vector (te/nn/lane_groups.py).

A register tile holds `wr` output columns x the k rotations of one channel block: each step of the window loads
one input vector per column and multiplies it into the column's k accumulators by k weight vectors, which stay
in registers across the columns. After the window the tile's output lanes sum their group's rotated
accumulators, a loop over the lanes that loop/rotations.py lowers to one helper call (whole vectors permuted by
constant shuffles: vpermilps for groups of 4), into the output or, under an epilogue, a local vector the
epilogue then reads lane-wise. Images, channel blocks and rows run in parallel; a window reaching one pixel past
each edge reads its input in place (the tiles at the edges guarded), a wider one a padded copy, as the NCHWc
convolution does (rules_nchwc.py)."""

from __future__ import annotations

from ..target import Target
from ..te.tiling import row_tile
from .knobs import Knobs
from .parallel import parallel_grain
from .reductions import reduction_work, window_pads
from .rules import Anchor, rule
from .rules_nchwc import MIN_CHAINS, default_pad_in_place, read_in_place
from .schedule import Schedule
from .state import Stage
from .tiling import extent

TAG = "lane_group_conv2d_nchwc"


@rule(TAG)
def schedule_lane_groups(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """The tile above for the output `s` (the rotations' sum, or an epilogue fused onto it); its parameters are
    the tile's columns (`default_columns`) and whether the padding is read in place."""
    tagged = [p for p in sch.state.stages if p.op.tag == TAG]
    rot = next(p.name for p in tagged if p.op.reduce_axes)
    total = next(p for p in tagged if rot in {t.name for t in p.op.inputs})  # the rotations summed
    for p in tagged:
        if p is not s and p is not total and not p.op.reduce_axes and p.attach is None:
            sch.compute_inline(p.name)  # the bias
    if window_pads(sch, s, rot) and knobs.pick(f"{s.name}_pad_in_place", (0, 1), default_pad_in_place(anchor.attrs)):
        read_in_place(sch, s, rot)
    n, cb, h, w, ci = [a.name for a in s.op.axes]
    width, k = extent(s, w), anchor.attrs["group_size"]
    budget = column_budget(k, target)
    wr = knobs.choice(f"{s.name}_wr", range(1, min(width, budget) + 1), default_columns(width, k, target))
    w0, w1 = sch.split(s.name, w, wr)
    work = width * extent(s, ci) * k * reduction_work(sch, rot)
    parallel_grain(sch, s, [n, cb, h], None, target, work, knobs)
    sch.unroll(s.name, w1)
    sch.compute_at(rot, s.name, w0)
    if total is s:
        sch.unroll(s.name, ci)
    else:
        sch.vectorize(s.name, ci)
        sch.compute_at(total.name, s.name, w0)
        _, tw, tci = sch.loops(total.name)[-3:]
        sch.unroll(total.name, tw)
        sch.unroll(total.name, tci)
    *_, rd, _, rw, rci = [a.name for a in sch.state.stage(rot).op.axes]
    reduce = [lp for lp in sch.loops(rot) if sch.state.stage(rot).loops[lp].is_reduce]
    outer = [lp for lp in sch.loops(rot) if lp not in reduce and lp not in (rd, rw, rci)]
    sch.reorder(rot, *outer, *reduce, rw, rd, rci)
    sch.unroll(rot, rw)
    sch.unroll(rot, rd)
    for tap in reduce[1:]:
        sch.unroll(rot, tap)
    sch.vectorize(rot, rci)


def default_columns(width: int, k: int, target: Target) -> int:
    """The tile's columns: the most that divide the row within `column_budget`, where they keep MIN_CHAINS
    accumulators; else the fewest tiles a row, the last guarded (`row_tile`). A guarded tail of one or two
    columns cost ResNeXt's 3 x 3 more than a narrower tile does (docs/benchmarks.md, "Machine F, thirty-ninth
    session")."""
    budget = column_budget(k, target)
    fitting = [c for c in range(min(width, budget), 0, -1) if width % c == 0 and c * k >= MIN_CHAINS]
    return fitting[0] if fitting else row_tile(width, budget)


def column_budget(k: int, target: Target) -> int:
    """The most columns whose k accumulators each leave four registers for the input and the weights (these read
    from memory by the multiply-adds where the registers run out): 7 columns with groups of 4 and 32 registers,
    3 with groups of 8."""
    return max(1, (target.vector_registers - 4) // k)
