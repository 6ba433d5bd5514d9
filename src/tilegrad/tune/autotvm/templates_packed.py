"""Templates of the packed GEMM (dense layers with constant weights) and the packed convolution: the rules of
schedule/rules_packed.py with their degrees of freedom as knobs. The register tile is the compute's layout (the
panels the operands are packed in), so the knobs are the blocking around it, the loop and reduction orders, the
parallel grain and the unrolling; the default configs are the hand-written points. The packed GEMM's k-blocked
variant (`_k_blocked_tiles`) is not in the template's space: its tiles are always computed at the output.
"""

from __future__ import annotations

import math

from ...schedule.parallel import parallel_count
from ...schedule.reductions import reduction_work, unrolls_tap_row, window_pads
from ...schedule.rules import Anchor
from ...schedule.rules_nchwc import read_in_place
from ...schedule.rules_packed import default_packed_blocks, default_packed_pad_in_place
from ...schedule.schedule import Schedule
from ...schedule.state import Stage
from ...te.tiling import row_tile
from ...target import Target
from .space import ConfigEntity, ConfigSpace
from .template import extent, parallelize, register_template

Config = ConfigSpace | ConfigEntity
MAX_BLOCK_TILES = 16
ACCUMULATORS = 14


@register_template("packed_matmul", "packed_matmul")
def schedule_packed_matmul(cfg: Config, sch: Schedule, s: Stage, target: Target, anchor: Anchor) -> None:
    """Each mr x nr register tile accumulates over all of k at the output's tile-row loop; column panels (in
    chunks of `panels_per_chunk`) and row blocks (whole tiles) run outermost, in the order and to the parallel grain
    the knobs say; each tile reads A in place (`a_in_place`, as the rule's default, and always where the product
    has one row tile) or the packing stages run in parallel at the root."""
    mr, nr = anchor.attrs["mr"], anchor.attrs["nr"]
    padded = _stage_tagged(sch, "packed_matmul_tiles")
    i, j = [a.name for a in s.op.axes]
    m, panels = extent(s, i), -(-extent(s, j) // nr)
    tiles = sch.state.stage(padded).tensor.shape[0] // mr
    mb_tiles = max(d for d in range(1, 10) if tiles % d == 0)

    cfg.define_split("tile_i", m, 3, "candidate", default=(mb_tiles * mr, mr),
                     candidates=[(t * mr, mr) for t in range(1, min(tiles, MAX_BLOCK_TILES) + 1)])
    cfg.define_knob("panels_per_chunk", [v for v in (1, 2, 4, 8) if v == 1 or v < panels], 1)
    cfg.define_reorder("order_outer", ["columns", "blocks"])
    work = mb_tiles * mr * nr * reduction_work(sch, padded)
    cfg.define_knob("grain", range(3), parallel_count([panels, -(-m // (mb_tiles * mr))], target, work))
    cfg.define_annotate("ann_tile", ["i"], "try_unroll", default=("unroll",))
    cfg.define_knob("a_in_place", (0, 1), 1)

    j0, j1 = sch.split(s.name, j, nr)
    i0, i10, i11 = cfg["tile_i"].apply(sch, s.name, i)
    nc = cfg["panels_per_chunk"].val
    columns, inner = ([j0], []) if nc == 1 else [[loop] for loop in sch.split(s.name, j0, nc)]
    outer = [[*columns, i0][k] for k in cfg["order_outer"].perm]
    sch.reorder(s.name, *outer, *inner, i10, i11, j1)
    parallelize(sch, s.name, outer, cfg["grain"].val)
    sch.vectorize(s.name, j1)
    sch.compute_at(padded, s.name, i10)
    pi, pj, pk = sch.loops(padded)
    sch.reorder(padded, pk, pi, pj)
    cfg["ann_tile"].apply(sch, padded, [pi])
    sch.vectorize(padded, pj)
    stages = {st.name for st in sch.state.stages}
    for pack in [t.name for t in sch.state.stage(padded).op.inputs if t.name in stages]:  # not prepacked
        if pack.endswith("_apack") and (tiles == 1 or cfg["a_in_place"].val):
            sch.compute_inline(pack)
            continue
        pack_outer, _, pack_inner = sch.loops(pack)
        pst = sch.state.stage(pack)
        parallelize(sch, pack, [pack_outer], parallel_count([extent(pst, pack_outer)], target,
                                                           math.prod(pst.tensor.shape[1:])))
        sch.vectorize(pack, pack_inner)


@register_template("packed_conv2d", "packed_conv2d")
def schedule_packed_conv(cfg: Config, sch: Schedule, s: Stage, target: Target, anchor: Anchor) -> None:
    """A register tile of output columns x one or two channel blocks (vectorised) accumulates over the input
    channels and taps in the order the knob says, and is copied out to NCHW; images, channel blocks and rows run
    in parallel up to the grain; a padded input is read in place or through a padded copy; the innermost
    tap loop unrolled or not."""
    block = anchor.attrs["block"]
    blocked = _stage_tagged(sch, "packed_conv2d_tiles")
    n, c, h, w = [a.name for a in s.op.axes]
    vectors = -(-block // target.vector_lanes)
    channel_blocks = sch.state.stage(blocked).tensor.shape[1]
    width = extent(s, w)
    budget = max(1, ACCUMULATORS // vectors)
    blocks_d = default_packed_blocks(width, vectors, channel_blocks, ACCUMULATORS, target)
    wr_d = row_tile(width, max(1, budget // blocks_d))
    reduce = sch.loops(blocked)[5:]
    kernel = anchor.attrs["kernel"]

    cfg.define_knob("blocks", (1, 2) if channel_blocks > 1 else (1,), blocks_d)
    cfg.define_split("tile_w", width, 2, "candidate", candidates=[(v,) for v in range(1, min(width, budget) + 1)],
                     default=(wr_d,))
    outer = [extent(s, n), -(-extent(s, c) // block), extent(s, h)]
    cfg.define_knob("grain", range(4), parallel_count(outer, target, width * block * reduction_work(sch, blocked)))
    cfg.define_reorder("order_reduce", reduce)
    cfg.define_annotate("ann_tile", ["w"], "try_unroll", default=("unroll",))
    padded = bool(window_pads(sch, sch.state.stage(blocked), blocked))
    if padded:
        cfg.define_knob("pad_in_place", (0, 1), default_packed_pad_in_place(anchor.attrs))
    tap_row = unrolls_tap_row(kernel)
    if tap_row:
        cfg.define_knob("unroll_taps", (0, 1), 1)

    per_tile = cfg["blocks"].val
    c0, c1 = sch.split(s.name, c, block * per_tile)
    channels = [c1] if per_tile == 1 else list(sch.split(s.name, c1, block))
    w0, w1 = cfg["tile_w"].apply(sch, s.name, w)
    sch.reorder(s.name, n, c0, h, w0, *channels, w1)
    parallelize(sch, s.name, [n, c0, h], cfg["grain"].val)
    sch.compute_at(blocked, s.name, w0)
    if padded and cfg["pad_in_place"].val:
        read_in_place(sch, sch.state.stage(blocked), blocked)
    bn, bc, bh, bw, bb, *reduce = sch.loops(blocked)
    order = [reduce[k] for k in cfg["order_reduce"].perm]
    if per_tile == 1:
        sch.reorder(blocked, bn, bc, bh, *order, bw, bb)
    else:
        sch.reorder(blocked, bn, bh, *order, bw, bc, bb)
        sch.unroll(blocked, bc)
    cfg["ann_tile"].apply(sch, blocked, [bw])
    if tap_row and cfg["unroll_taps"].val and order[-1] == reduce[-1]:  # the tap row innermost
        sch.unroll(blocked, order[-1])
    sch.vectorize(blocked, bb)


def _stage_tagged(sch: Schedule, tag: str) -> str:
    return next(st.name for st in sch.state.stages if st.op.tag == tag)
