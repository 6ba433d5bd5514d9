"""The default schedule of the int8 GEMM (te.nn.quantized_matmul): the packed GEMM's structure (rules_packed.py)
with its reduction in k groups of 4.

Each mr x nr register tile of int32 sums is computed at the output's row-tile loop over all k groups, then
requantized and copied out. Inside a k group the tile's loops are rows (unrolled), then the nr columns, then
the 4 values of the group: the nest loop/dot4.py gives to the target's u8 x s8 dot-product instruction
(`Target.int8_dot`), one instruction per row and vector of columns. Without one, the 4 values go outside the
columns, so the compiler vectorises the columns. A tile spans as many column panels as three quarters of the
vector registers hold in accumulators (4 panels of 16 with AVX-512), and its requantization runs over them in
one vectorised loop per row: 16 columns of bytes were 16-byte vectors. The parameters (knobs) are the rows per
block `mb`, the panels per tile, the column panels per parallel chunk, the loop order, the parallel grain and the
unrolling of the tile's rows. A channels-last convolution's output is (N, OH, OW, O): its pixel axes are fused
into the one row loop the GEMM's tiles number.

The channels-last depthwise convolution (te.nn.quantized_depthwise_nhwc) has its own rule below.
"""

from __future__ import annotations

import math

from ..dtype import itemsize
from ..target import Target
from ..te.nn.quantized import TAP_LANES
from .knobs import Knobs
from .packed_gemm import Tile, row_blocks, stage_tagged, tile_output_loops
from .parallel import parallel_outer
from .reductions import reduction_work, window_pads
from .rules import rule
from .schedule import Schedule
from .state import Stage
from .tiling import extent, largest_divisor

DEPTHWISE_COLUMNS = 4  # output pixels of a row per register tile of the channels-last depthwise convolution


@rule("packed_int8_matmul")
def schedule_int8_matmul(sch: Schedule, s: Stage, target: Target, anchor, knobs: Knobs,
                         tiles_per_block: int = 8) -> None:
    """The tiles of `packed_int8_tiles` at the output's row tiles; blocks of rows and column panels in
    parallel; the packing of a in parallel at the root."""
    mr, nr = anchor.attrs["mr"], anchor.attrs["nr"]
    rows = [a.name for a in s.op.axes[:-1] if extent(s, a.name) > 1]
    if len(rows) > 1:  # a convolution's output pixels: one loop of rows, as the GEMM numbers them
        sch.fuse(s.name, *rows)  # (a unit axis left out: an element-wise consumer indexes it by 0, not by the row)
    padded = stage_tagged(sch, "packed_int8_tiles")
    mb, mb_d = row_blocks(sch, s, padded, mr, tiles_per_block, knobs)
    accumulators = target.vector_registers * 3 // 4  # the rest hold the panels' weights and the broadcast
    per_tile = tile_output_loops(sch, s, padded, Tile(mr, nr, mb, mb_d), target, knobs, row_span=accumulators)
    pi, pj, *groups, pg = sch.loops(padded)  # the k groups (one loop, or a convolution's tap row, column, channels)
    panels = []
    if per_tile > 1:
        pp, pj = sch.split(padded, pj, nr)
        panels = [pp]
    if target.int8_dot == "scalar":
        sch.reorder(padded, *groups, pi, *panels, pg, pj)
        sch.vectorize(padded, pj)
    else:
        sch.reorder(padded, *groups, pi, *panels, pj, pg)
    if knobs.pick(f"{padded}_unroll", (0, 1), 1):
        sch.unroll(padded, pi)
    for pp in panels:
        sch.unroll(padded, pp)
    for st in [st for st in sch.state.stages if st.op.tag == "pack" and st.attach is None]:
        parallel_outer(sch, st, [sch.loops(st.name)[0]], target, math.prod(st.tensor.shape[1:]))


@rule("depthwise_nhwc")
def schedule_depthwise_nhwc(sch: Schedule, s: Stage, target: Target, anchor, knobs: Knobs) -> None:
    """A register tile of up to DEPTHWISE_COLUMNS pixels of a row by one vector of byte channels (4 vectors of
    int32 sums: gcc sizes a loop's vectors by its narrowest type, so a tile of one int32 vector of channels ran
    on 16-byte vectors; docs/quantization.md has the figures) accumulates over the taps, then is requantized and
    stored as bytes; output rows run in parallel, each computing the padded input rows it reads (a few rows, in
    cache). With its taps grouped (te.nn.quantized's `_grouped_taps`), the tile is `grouped_channels` wide and
    its innermost loops, 16 channels by a group's 4 taps, go to the dot-product instruction (loop/dot4.py)."""
    local = anchor.accumulator or sch.cache_write(s.name)
    pads = [p for p in window_pads(sch, s, local) if p.op.tag == "pad"]  # not the weights' copy
    n, h, w, c = [a.name for a in s.op.axes]
    width, channels = extent(s, w), extent(s, c)
    lanes = target.vector_lanes
    wr = knobs.choice(f"{s.name}_wr", tuple(range(1, min(width, 2 * DEPTHWISE_COLUMNS) + 1)),
                      largest_divisor(width, DEPTHWISE_COLUMNS))
    attrs = sch.state.stage(local).op.attrs
    grouped = "taps_grouped" in attrs
    w0, w1 = sch.split(s.name, w, wr)
    c0, c1 = sch.split(s.name, c, grouped_channels(channels) if grouped else min(4 * lanes, channels))
    row_bytes = math.prod(pads[0].tensor.shape[2:]) * itemsize(pads[0].tensor.dtype) if pads else 0
    per_copy = knobs.pick(f"{s.name}_pad_rows", PAD_ROWS, default_pad_rows(extent(s, h), attrs["window_rows"],
                                                                          row_bytes))
    blocks = [h]
    if per_copy > 1:
        blocks = list(sch.split(s.name, h, per_copy))
    sch.reorder(s.name, n, *blocks, w0, c0, w1, c1)
    parallel_outer(sch, s, [n, blocks[0]], target, width * channels * per_copy * reduction_work(sch, local))
    sch.vectorize(s.name, c1)
    loops = sch.loops(s.name)
    row = loops[loops.index(w0) - len(blocks)]  # the rows' loop (or their blocks'), or the parallel loop
    for p in pads:
        sch.compute_at(p.name, s.name, row)
        sch.vectorize(p.name, sch.loops(p.name)[-1])
    sch.compute_at(local, s.name, c0)
    lst = sch.state.stage(local)
    reduce = [lp for lp in lst.leaves if lst.loops[lp].is_reduce]
    *outer, lw, lc = [a.name for a in lst.op.axes]
    if grouped:  # each pixel's vectors of 16 channels, then a group's 4 taps: loop/dot4.py's transposed nest
        *reduce, group = reduce
        lv, lj = sch.split(local, lc, TAP_LANES)
        sch.reorder(local, *outer, *reduce, lw, lv, lj, group)
        sch.unroll(local, lw)
        sch.unroll(local, lv)
        return
    sch.reorder(local, *outer, *reduce, lw, lc)
    sch.unroll(local, lw)
    sch.vectorize(local, lc)


PAD_ROWS = (1, 2, 4)  # output rows of a depthwise convolution per padded copy of its input rows
PAD_COPY_BYTES = 48 * 1024  # the most a padded copy of a block of rows takes by default: L1, with room


def default_pad_rows(rows: int, window_rows: tuple[int, int, int], row_bytes: int) -> int:
    """Output rows per padded copy of the input rows they read (`row_bytes` a padded input row): a copy per row
    reads each input row once for each output row whose window holds it (3 times for a 3 x 3 window, stride 1),
    a copy per block of rows once per block, the window's overlap between blocks copied twice (docs/quantization.md
    has the measurements). The largest block of PAD_ROWS whose copy fits PAD_COPY_BYTES and that leaves at least
    4 blocks to share out."""
    taps, stride, dilation = window_rows
    fits = [r for r in PAD_ROWS if r == 1 or (rows // r >= 4
                                              and ((r - 1) * stride + (taps - 1) * dilation + 1) * row_bytes
                                              <= PAD_COPY_BYTES)]
    return fits[-1]


def grouped_channels(channels: int) -> int:
    """The channels of a register tile of the grouped-taps depthwise convolution: the most whole vectors of
    TAP_LANES, up to four, that divide the channels (144: 3 x 16, without the guarded tail 64 + 64 + 16 has), or
    four vectors where the channels are no whole number of them."""
    vectors = [v for v in (4, 3, 2, 1) if channels % (v * TAP_LANES) == 0]
    return min(channels, (vectors[0] if vectors else 4) * TAP_LANES)
