"""Templates of the convolutions: direct NCHW, depthwise NCHW, and the blocked NCHW[x]c layout (convolution and
depthwise), each the default rule's schedule (`_schedule_conv`, `_schedule_window` in schedule/defaults.py,
`schedule_blocked_window` in schedule/rules_nchwc.py) with its degrees of freedom as knobs: the register tile's
splits, the order of the reduction loops, the parallel grain and the unrolling. Their default configs are the
hand-written points.
"""

from __future__ import annotations

from ...errors import ScheduleError
from ...schedule.parallel import parallel_count
from ...schedule.reductions import (UNROLLED_TAPS, attach_window, pads_per_plane, planes_share_out, reduction_work,
                                    unrolls_tap_row, window_pads)
from ...schedule.rules import Anchor
from ...schedule.knobs import Defaults
from ...schedule.rules_nchwc import (PAD_PLACES, accumulate_partitions, default_blocks, default_flat,
                                     default_pad_in_place, default_pad_per_row, default_rows_outer, kblock_choices,
                                     pixel_rows, place_depthwise_pads, read_in_place, strided_pointwise,
                                     tile_columns)
from ...schedule.schedule import Schedule
from ...schedule.state import Stage
from ...schedule.tiling import WINDOW_VECTORS, conv_tile, window_columns
from ...target import Target
from .space import ConfigEntity, ConfigSpace
from .template import extent, parallelize, register_template

Config = ConfigSpace | ConfigEntity


@register_template("conv2d", "conv2d")
def schedule_conv2d(cfg: Config, sch: Schedule, s: Stage, target: Target, anchor: Anchor) -> None:
    """Direct 2-D convolution: a register tile of output channels x output columns accumulated over the input
    channels and taps; batch, channel blocks and rows run in parallel up to the grain knob."""
    if anchor.attrs.get("groups", 1) != 1 or len(s.op.axes) != 4:
        raise ScheduleError(f"template conv2d: stage {s.name} is a grouped or non-2-D convolution")
    lanes = target.vector_lanes
    n, c, h, w = [a.name for a in s.op.axes]
    cext, wext = extent(s, c), extent(s, w)
    wr_d, cr_d = conv_tile(cext, wext, lanes)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    reduce = [lp for lp in sch.state.stage(local).leaves if sch.state.stage(local).loops[lp].is_reduce]

    cfg.define_split("tile_c", cext, 2, max_innermost=16, default=(cr_d,))
    cfg.define_split("tile_w", wext, 2, max_innermost=2 * lanes, default=(wr_d,))
    outer = [extent(s, n), -(-cext // cr_d), extent(s, h)]
    cfg.define_knob("grain", range(4), parallel_count(outer, target, wext * cr_d * reduction_work(sch, local)))
    cfg.define_reorder("order_reduce", reduce)
    cfg.define_annotate("ann_tile", ["c"], "try_unroll", default=("unroll",))

    c0, c1 = cfg["tile_c"].apply(sch, s.name, c)
    w0, w1 = cfg["tile_w"].apply(sch, s.name, w)
    sch.reorder(s.name, n, c0, h, w0, c1, w1)
    parallelize(sch, s.name, [n, c0, h], cfg["grain"].val)
    sch.compute_at(local, s.name, w0)
    ln, lc, lh, lw = [a.name for a in sch.state.stage(local).op.axes]
    order = [reduce[i] for i in cfg["order_reduce"].perm]
    sch.reorder(local, ln, lh, *order, lc, lw)
    cfg["ann_tile"].apply(sch, local, [lc])
    sch.vectorize(local, lw)
    sch.vectorize(s.name, w1)


@register_template("depthwise_conv2d", "depthwise_conv2d")
def schedule_depthwise(cfg: Config, sch: Schedule, s: Stage, target: Target, anchor: Anchor) -> None:
    """A tile of output columns accumulates in registers over the window, its taps unrolled or not; a padding
    stage only the window reads is computed per output row or per plane; the outer loops run in parallel up to
    the grain knob."""
    *outer, w = [a.name for a in s.op.axes]
    wext = extent(s, w)
    wr_d = window_columns(wext, target.vector_lanes)
    pads = window_pads(sch, s, anchor.accumulator or s.name)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    reduce = [lp for lp in sch.state.stage(local).leaves if sch.state.stage(local).loops[lp].is_reduce]

    cfg.define_split("tile_w", wext, 2, max_innermost=WINDOW_VECTORS * target.vector_lanes, default=(wr_d,))
    outer_extents = [extent(s, a) for a in outer]
    work = wext * reduction_work(sch, local)
    per_plane = pads_per_plane(sch, local, pads, target)
    shared = outer_extents[:-1] if per_plane and planes_share_out(outer_extents, target) else outer_extents
    cfg.define_knob("grain", range(len(outer) + 1), parallel_count(shared, target, work))
    cfg.define_reorder("order_reduce", reduce)
    unrolled = reduction_work(sch, local) <= UNROLLED_TAPS
    cfg.define_annotate("ann_reduce", reduce, "try_unroll", default=("unroll" if unrolled else "none",) * len(reduce))
    cfg.define_knob("pad_per_plane", (0, 1), int(per_plane))

    w0, w1 = cfg["tile_w"].apply(sch, s.name, w)
    parallelize(sch, s.name, outer, cfg["grain"].val)
    attach_window(sch, s.name, pads, local, w0, w1, per_plane=bool(cfg["pad_per_plane"].val))
    *local_outer, local_w = [a.name for a in sch.state.stage(local).op.axes]
    order = [reduce[i] for i in cfg["order_reduce"].perm]
    sch.reorder(local, *local_outer, *order, local_w)
    cfg["ann_reduce"].apply(sch, local, order)
    sch.vectorize(local, local_w)


@register_template("conv2d_nchwc", "conv2d_nchwc", "depthwise_conv2d_nchwc")
def schedule_blocked(cfg: Config, sch: Schedule, s: Stage, target: Target, anchor: Anchor) -> None:
    """Blocked layout: a tile of output columns x one (or two) channel blocks accumulates over the whole
    reduction, vectorised across the block; images, channel blocks and rows (or rows, then channel blocks) run in
    parallel up to the grain; a convolution's input channels may be summed in partitions added to the output in
    place (`kblocks`, rules_nchwc.accumulate_partitions, whose reduction order and unrolling are then the rule's).
    It starts where rules_nchwc's rule does."""
    acc = _accumulator(sch, s, anchor)
    n, cb, h, w, ci = [a.name for a in s.op.axes]
    pixels = "pixels" in sch.state.stage(acc).op.attrs
    flat_d = default_flat(target) if pixels else 0
    width, block = extent(s, w) * (extent(s, h) if flat_d else 1), extent(s, ci)
    conv = anchor.tag == "conv2d_nchwc"
    depthwise = anchor.tag == "depthwise_conv2d_nchwc"
    two = conv and extent(s, cb) > 1
    blocks_d = default_blocks(width, block, extent(s, cb), target, strided_pointwise(anchor.attrs),
                              bool(flat_d), reduction_work(sch, acc), one_row=s.tensor.shape[2] == 1) if two else 1
    wr_d = tile_columns(width, block, target, blocks_d)
    budget = max(wr_d, (32 if target.vector_lanes >= 16 else 16) - 2)
    reduce = sch.loops(acc)[5:]
    rows_d = default_rows_outer(sch, acc, target) if two else 0
    kchoices, kblocks_d = kblock_choices(sch, acc, blocks_d, rows_d, target) if conv else ([1], 1)

    cfg.define_knob("flat", (0, 1) if pixels else (0,), flat_d)
    cfg.define_knob("blocks", (1, 2) if two else (1,), blocks_d)
    cfg.define_knob("rows_outer", (0, 1), rows_d)
    cfg.define_knob("kblocks", kchoices, kblocks_d)
    cfg.define_split("tile_w", width, 2, "candidate", candidates=[(v,) for v in range(1, min(width, budget) + 1)],
                     default=(wr_d,))
    if kblocks_d > 1:  # the rule's grain over its tiled loops, its tiles only copying the partitions' sums out
        blocks_out = -(-extent(s, cb) // blocks_d)
        rows_blocks = [extent(s, h), blocks_out] if rows_d else [blocks_out, extent(s, h)]
        grain_d = parallel_count([extent(s, n), *rows_blocks], target, width * block * blocks_d)
    else:  # a depthwise padding made per plane keeps the rows out where the planes share out, as the rule does
        loops = [extent(s, a) for a in (n, cb, h)]
        if depthwise and default_pad_per_row(sch, acc, target) == 2 and planes_share_out(loops, target):
            loops = loops[:-1]
        grain_d = parallel_count(loops, target, width * block * reduction_work(sch, acc))
    cfg.define_knob("grain", range(4), grain_d)
    cfg.define_reorder("order_reduce", reduce)
    cfg.define_annotate("ann_tile", ["w"], "try_unroll", default=("unroll",))
    if depthwise:
        cfg.define_knob("pad_per_row", PAD_PLACES, default_pad_per_row(sch, acc, target))
    padded = conv and not pixels and window_pads(sch, s, acc)
    if padded:
        cfg.define_knob("pad_in_place", (0, 1), default_pad_in_place(anchor.attrs))
    tap_row = conv and not pixels and unrolls_tap_row(anchor.attrs["kernel"])
    if tap_row:
        cfg.define_knob("unroll_taps", (0, 1), 1)

    per_tile, kblocks = cfg["blocks"].val, cfg["kblocks"].val
    if padded and cfg["pad_in_place"].val:
        read_in_place(sch, s, acc)
    if kblocks > 1:
        accumulate_partitions(sch, acc, kblocks, per_tile, cfg["tile_w"].factors[0], target, Defaults())
    if cfg["flat"].val:
        w = sch.fuse(s.name, h, w)
    elif pixels:
        read_in_place(sch, s, acc)
    w0, w1 = cfg["tile_w"].apply(sch, s.name, w)
    if cfg["flat"].val:
        h, w0 = sch.split(s.name, w0, pixel_rows(extent(s, w), cfg["tile_w"].factors[0]))
    cb1 = []
    if per_tile > 1:
        cb, inner = sch.split(s.name, cb, per_tile)
        cb1 = [inner]
    outer = [n, h, cb] if cfg["rows_outer"].val else [n, cb, h]
    if cfg["rows_outer"].val or cb1 or cfg["flat"].val:
        sch.reorder(s.name, *outer, w0, *cb1, w1, ci)
    parallelize(sch, s.name, outer, cfg["grain"].val)
    sch.vectorize(s.name, ci)
    if kblocks > 1:
        return
    sch.compute_at(acc, s.name, w0)
    an, acb, ah, aw, aci, *reduce = sch.loops(acc)
    order = [reduce[i] for i in cfg["order_reduce"].perm]
    if per_tile > 1:
        sch.reorder(acc, an, ah, *order, aw, acb, aci)
        sch.unroll(acc, acb)
    else:
        sch.reorder(acc, an, acb, ah, *order, aw, aci)
    cfg["ann_tile"].apply(sch, acc, [aw])
    if tap_row and cfg["unroll_taps"].val and order[-1] == reduce[-1]:  # the row of taps innermost
        sch.unroll(acc, order[-1])
    sch.vectorize(acc, aci)
    if depthwise:
        place_depthwise_pads(sch, s, acc, w0, cfg["pad_per_row"].val)


def _accumulator(sch: Schedule, s: Stage, anchor: Anchor) -> str:
    """The reduction stage computed inside `s`'s tile: a local copy when `s` is the reduction, else the anchor's
    accumulator (or the reduction of the anchor's op that `s` adds its bias to, the stages between inlined)."""
    if anchor.accumulator is None and s.op.reduce_axes:
        return sch.cache_write(s.name)
    acc = anchor.accumulator or next((p.name for p in sch.state.stages
                                      if p.op.reduce_axes and p.op.tag == anchor.tag and p.attach is None), None)
    if acc is None:
        raise ScheduleError(f"template conv2d_nchwc: no reduction tagged {anchor.tag} feeds stage {s.name}")
    for p in list(sch.state.stages):
        if p is not s and p.name != acc and p.attach is None and not p.op.reduce_axes and p.op.tag == anchor.tag:
            sch.compute_inline(p.name)
    return acc
