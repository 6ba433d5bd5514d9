"""Default schedules for the blocked channel layout NCHW[x]c (te/nn/nchwc.py).

Every op there writes (N, C / b, OH, OW, b) and reduces over a window (and, for a convolution, over the input
channels), so one rule serves them all, in the manner of `schedule_packed_conv` (rules_packed.py): a register tile
of `wr` output columns x the b lanes of one channel block accumulates over the whole reduction, vectorised across
the block, and is written once (through the epilogue, when one is fused on); images, channel blocks and rows run
in parallel, the rows outside the blocks where the input outgrows L2 (`default_rows_outer`). Each step of a
convolution broadcasts one input value and multiplies it by one weight vector into each column. With AVX-512
a tile spans two channel blocks by default (each broadcast feeds both; `default_blocks`); tiles of several
channel blocks hold only 6 columns with AVX2, so there the tile is two blocks wide where those columns fill a
row with little guarded tail (28, 56 or 112 columns, not 14 or 7; not on a one-row image), where a row is too
narrow for enough accumulators (7 or 5 columns: fewer than MIN_CHAINS), in a strided 1 x 1 convolution, and in an
unstrided one, whose tiles run along its pixels as one row (`default_flat`); else one block wide and as many
columns as the registers hold (docs/passes.md, "Layout", has the measurements); the blocks per tile remain a
parameter for the search. A convolution whose window reaches one pixel past the edges reads its input in place,
guarded, else a padded copy (`default_pad_in_place`). A depthwise convolution with a window larger than 3 x 3,
or on a map streamed from memory, reads a padded copy of its input made per output row, its window's rows of one
channel block (`default_pad_per_row`), so its inner loop reads without bounds checks."""

from __future__ import annotations

import math

from ..dtype import itemsize
from ..target import Target
from ..te.specialize import DYNAMIC_AXES
from ..te.tiling import row_tile
from .knobs import Knobs
from .parallel import parallel_grain
from .reductions import (plane_fits, planes_share_out, reduction_order, reduction_work, unroll_tap_row,
                         window_pads)
from .rules import Anchor, rule
from .schedule import Schedule
from .state import Stage
from .tiling import extent

WINDOW_TAGS = ("conv2d_nchwc", "depthwise_conv2d_nchwc", "pool_nchwc")


@rule(*WINDOW_TAGS)
def schedule_blocked_window(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """The register-tiled schedule above, for the op's own output or for an epilogue fused onto it. The block is
    the layout's; the parameters are the channel blocks per tile of a convolution (1 or 2: two reuse each
    broadcast input twice), the tile's columns (up to the registers' budget, by default `tile_columns`; one that
    does not divide the row leaves a guarded tail), whether a convolution's rows run outside its channel blocks
    (`default_rows_outer`), the order of the reduction (input channels outside or inside the taps), the input
    channels' partition (`default_kblocks`), the parallel grain, whether the tile's columns are unrolled and
    whether a depthwise convolution's padded input is made per row or read guarded in place."""
    acc = _accumulator(sch, s, anchor)
    n, cb, h, w, ci = [a.name for a in s.op.axes]
    block = extent(s, ci)
    conv = anchor.tag == "conv2d_nchwc"
    two = conv and extent(s, cb) > 1
    pixels = "pixels" in sch.state.stage(acc).op.attrs
    flat = pixels and knobs.pick(f"{s.name}_flat", (0, 1), default_flat(target))
    if flat:
        h, w = None, sch.fuse(s.name, h, w)
    elif pixels:
        read_in_place(sch, s, acc)
    elif conv and window_pads(sch, s, acc):
        if knobs.pick(f"{s.name}_pad_in_place", (0, 1), default_pad_in_place(anchor.attrs)):
            read_in_place(sch, s, acc)
    width = extent(s, w)
    dynamic = set(s.op.attrs.get(DYNAMIC_AXES, ())) & {a.name for a in s.op.axes[2:4]}
    default = default_blocks(width, block, extent(s, cb), target, strided_pointwise(anchor.attrs), flat,
                             reduction_work(sch, acc), one_row=s.tensor.shape[2] == 1,
                             dynamic_width=bool(dynamic)) if two else 1
    per_tile = knobs.pick(f"{s.name}_blocks", (1, 2) if two else (1,), default)
    wr_d = tile_columns(width, block, target, per_tile)
    wr = knobs.choice(f"{s.name}_wr", range(1, min(width, _column_budget(block, target, per_tile)) + 1), wr_d)
    rows_outer = knobs.pick(f"{s.name}_rows_outer", (0, 1), default_rows_outer(sch, acc, target)) if two else 0
    kblocks = _kblocks(sch, acc, per_tile, rows_outer, target, knobs) if conv else 1
    if kblocks > 1:
        accumulate_partitions(sch, acc, kblocks, per_tile, wr, target, knobs)
        acc = None
    row_tiles = pixel_rows(width, wr_d) if flat else None
    place = None
    if anchor.tag == "depthwise_conv2d_nchwc":
        place = knobs.pick(f"{s.name}_pad_per_row", PAD_PLACES, default_pad_per_row(sch, acc, target))
    columns = _register_tile(sch, s, acc, (n, cb, h, w, ci), per_tile, wr, rows_outer, target, knobs, row_tiles,
                             planes_apart=place == 2)
    if place is not None:
        place_depthwise_pads(sch, s, acc, columns, place)


def _register_tile(sch: Schedule, s: Stage, acc: str | None, loops: tuple, per_tile: int, wr, rows_outer: int,
                   target: Target, knobs: Knobs, row_tiles: int | None = None, planes_apart: bool = False) -> str:
    """Tile stage `s`, its `loops` (n, cb, h, w, ci; h None where the pixels are one loop w, then taken in rows
    of `row_tiles` tiles), in `wr` columns x `per_tile` channel blocks, its leading loops in parallel, and compute
    its reduction `acc` (unless None: computed elsewhere) per tile, the tile's accumulators innermost. With
    `planes_apart` (a padded copy made per plane), the rows stay out of the parallel loop where the planes give
    every thread enough, so that the plane loop the copy needs exists. Returns the loop over a row's tiles."""
    n, cb, h, w, ci = loops
    width, block = extent(s, w), extent(s, ci)
    w0, w1 = sch.split(s.name, w, wr)
    flat = h is None
    if flat:
        h, w0 = sch.split(s.name, w0, row_tiles)
    cb1 = []
    if per_tile > 1:
        cb, inner = sch.split(s.name, cb, per_tile)
        cb1 = [inner]
    outer = [n, h, cb] if rows_outer else [n, cb, h]
    if rows_outer or cb1 or flat:
        sch.reorder(s.name, *outer, w0, *cb1, w1, ci)
    work = width * block * per_tile * (1 if acc is None else reduction_work(sch, acc))
    if planes_apart and not rows_outer and planes_share_out([extent(s, lp) for lp in outer], target):
        outer = outer[:-1]
    parallel_grain(sch, s, outer, None, target, work, knobs)
    sch.vectorize(s.name, ci)
    if acc is not None:
        sch.compute_at(acc, s.name, w0)
        _tile_reduction(sch, acc, per_tile, knobs)
    return w0


def read_in_place(sch: Schedule, s: Stage, acc: str) -> None:
    """A convolution reads its input in place: the stage between them inlined, be it a strided 1 x 1
    convolution's image of the pixels it reads (te/nn/nchwc.py's `_strided`, a copy made for the tiles along all
    the pixels) or the padded copy of a window's input (`default_pad_in_place`)."""
    for p in window_pads(sch, s, acc):
        sch.compute_inline(p.name)


def default_pad_in_place(attrs: dict) -> int:
    """1 (a convolution reads its input in place, each read of the padding guarded) where its window reaches at
    most one pixel past each edge, undilated; else 0 (it reads a padded copy made first). The copy is a pass over
    the whole input, read and written, and a barrier before the convolution; read in place, only the tiles that
    reach the padding run guarded (loop/tails.py versions the tests per row and per tile), and in them gcc
    branches around the one column's multiply-add whose tap falls in the padding. Where the padding is wider or
    the window dilated, more of each such tile's columns and rows read padding and the guarded tiles cost more
    than the copy (the measurements: docs/benchmarks.md, "Machine E, thirty-first session")."""
    pads = [p for side in attrs.get("padding", ()) for p in side]
    return int(max(pads, default=0) <= 1 and max(attrs.get("dilation", (1,))) == 1)


def pixel_rows(pixels: int, wr: int) -> int:
    """The tiles of `wr` pixels in a row of a 1 x 1 convolution's pixels taken as one row: about a square image's
    row of them, the unit its loops (parallel grain, rows outside the blocks) take for an image row."""
    return max(1, round(math.isqrt(pixels) / wr))


PAD_PLACES = (0, 1, 2)  # a depthwise convolution's padding read in place, copied per output row, per plane


def default_pad_per_row(sch: Schedule, acc: str, target: Target) -> int:
    """Where a depthwise convolution's padded input is made (PAD_PLACES): 1 or 2 (a copy per output row, or per
    plane where the padded plane of one channel block fits a quarter of L2) where its window is larger than
    3 x 3, or its input and output outgrow L3; else 0 (reads guarded in place). gcc turns the guarded reads of a
    5 x 5 window into a scalar loop and masked loads; those of a 3 x 3 window it vectorises, and then the per-row
    copy is the slower on maps in cache and the faster on maps streamed from memory (docs/benchmarks.md, "Machine
    A, thirteenth session"). A copy per row copies each input row once for every tap row that reads it; per
    plane, once (MNASNet's 5 x 5 on 7 x 7 maps: docs/benchmarks.md, "Machine F, thirty-fifth session")."""
    pads = window_pads(sch, sch.state.stage(acc), acc)
    if not pads:
        return 0
    x = pads[0].op.inputs[0]
    streamed = 2 * math.prod(x.shape) * itemsize(x.dtype) > target.l3_bytes
    if not (reduction_work(sch, acc) > 9 or streamed):
        return 0
    return 2 if plane_fits(pads[0], 3, target) else 1  # a channel block's plane: rows, columns and lanes


def place_depthwise_pads(sch: Schedule, s: Stage, acc: str, columns: str, place: int) -> None:
    """A depthwise convolution's padded input (`place`, one of PAD_PLACES): made per output row (its window's
    rows of one channel block, in L1, read by the inner loop without bounds checks; each channel block reads
    only its own lanes) or per plane (the loop around the rows, where the rows are a loop of their own), or
    inlined, each read guarded. `columns` is the loop over the row's register tiles."""
    loops = sch.loops(s.name)
    at = loops.index(columns) - (2 if place == 2 and loops.index(columns) >= 2 else 1)
    for p in window_pads(sch, s, acc):
        if place:
            sch.compute_at(p.name, s.name, loops[at])
            sch.vectorize(p.name, sch.loops(p.name)[-1])
        else:
            sch.compute_inline(p.name)


def _tile_reduction(sch: Schedule, acc: str, per_tile: int, knobs: Knobs) -> None:
    """Reduction `acc`, computed in a register tile, with its reduction loops outside the tile's columns, channel
    blocks and lanes, in that order: each column's broadcast input then dies after its blocks' multiply-adds (with
    the blocks outside, gcc kept every column's broadcast live across them and spilled accumulators)."""
    *_, an, acb, ah, aw, aci = [a.name for a in sch.state.stage(acc).op.axes]
    reduce = [lp for lp in sch.loops(acc) if sch.state.stage(acc).loops[lp].is_reduce]
    reduce = reduction_order(knobs, acc, reduce)
    if per_tile > 1:
        sch.reorder(acc, an, ah, *reduce, aw, acb, aci)
        sch.unroll(acc, acb)
    else:
        sch.reorder(acc, an, acb, ah, *reduce, aw, aci)
    if knobs.pick(f"{acc}_unroll", (0, 1), 1):
        sch.unroll(acc, aw)
    unroll_tap_row(sch, acc, reduce, knobs)
    sch.vectorize(acc, aci)


KBLOCK_CHOICES = (1, 2, 4, 8, 16)  # the input channels' partitions offered


def _kblocks(sch: Schedule, acc: str, per_tile: int, rows_outer: int, target: Target, knobs: Knobs) -> int:
    """In how many partitions of its input channels a convolution sums (`default_kblocks`, a parameter)."""
    choices, default = kblock_choices(sch, acc, per_tile, rows_outer, target)
    return knobs.pick(f"{acc}_kblocks", choices, default)


def kblock_choices(sch: Schedule, acc: str, per_tile: int, rows_outer: int, target: Target) -> tuple[list[int], int]:
    """The partitions of reduction `acc`'s input channels offered (whole, and those that divide them), and the
    default (`default_kblocks`), for a tile of `per_tile` channel blocks."""
    st = sch.state.stage(acc)
    channels = extent(st, st.op.reduce_axes[0].name)
    data, wpack = st.op.inputs[:2]
    tile_weights = math.prod(wpack.shape[1:4]) * per_tile * wpack.shape[4] * itemsize(wpack.dtype)
    data_bytes = math.prod(data.shape) * itemsize(data.dtype)
    choices = [k for k in KBLOCK_CHOICES if k == 1 or (channels % k == 0 and channels // k >= 2)]
    return choices, default_kblocks(tile_weights, data_bytes, rows_outer, choices, target)


def default_kblocks(tile_weights: int, data_bytes: int, rows_outer: int, choices: list[int], target: Target) -> int:
    """1 where the weights one tile multiplies (all input channels, all taps, its channel blocks) fit in a quarter
    of L2, where they stay while the tiles sweep the rows, and the input is read once or fits in L2. Beyond
    (DeepLab's atrous head: 2048 channels x 9 taps x two output blocks, 2.3 MiB; its 2048 -> 512 on 28 x 28,
    256 KiB beside 6.4 MiB of input), each tile would read its weights again from L3, slower than its
    multiply-adds; and where the channel blocks run outside the rows over an input past L2 (DeepLab's 1024 -> 2048
    on 28 x 28: 3.2 MiB of input, 8 MiB of weights), every block of output channels reads the whole input again
    from L3, in short runs per channel block, where a partition is one contiguous run. So: the fewest partitions in
    which a partition's weights and input together fit in half of L2 (`accumulate_partitions`; the measurements:
    docs/passes.md, "Regions of an atrous convolution")."""
    if tile_weights < target.l2_bytes // 4 and (rows_outer or data_bytes <= target.l2_bytes):
        return 1
    fitting = [k for k in choices if tile_weights + data_bytes <= k * target.l2_bytes // 2]
    return fitting[0] if fitting else choices[-1]


def accumulate_partitions(sch: Schedule, acc: str, kblocks: int, per_tile: int, wr, target: Target,
                           knobs: Knobs) -> None:
    """Reduction `acc` over its input channels in `kblocks` contiguous partitions (rfactor of the split's outer
    part), summed in place: `acc` at the root, its tiles' partition loop outside its rows, each partition's
    partial sums computed in a register tile per output tile and added to the output there. A partition's weights
    then stay in cache while its tiles sweep the rows, and the output, read and written once per partition,
    stays in L2 (GotoBLAS's kc, as ONNX Runtime's NCHWc kernels block the input channels)."""
    st = sch.state.stage(acc)
    work = reduction_work(sch, acc) * math.prod(extent(st, a.name) for a in st.op.axes[2:]) * per_tile
    part, _ = sch.split(acc, st.op.reduce_axes[0].name, nparts=kblocks)
    partial = sch.rfactor(acc, part)
    if sch.state.stage(acc).scope != "global":
        sch.set_scope(acc, "global")
    n, cb, h, w, ci, p = sch.loops(acc)
    w0, w1 = sch.split(acc, w, wr)
    cb1 = []
    if per_tile > 1:
        cb, inner = sch.split(acc, cb, per_tile)
        cb1 = [inner]
        sch.unroll(acc, inner)
    sch.reorder(acc, n, cb, p, h, w0, *cb1, w1, ci)
    parallel_grain(sch, sch.state.stage(acc), [n, cb], None, target, work, knobs)
    sch.vectorize(acc, ci)
    sch.set_scope(partial, "local")
    sch.compute_at(partial, acc, w0)
    _tile_reduction(sch, partial, per_tile, knobs)


def default_rows_outer(sch: Schedule, acc: str, target: Target) -> int:
    """1 (output rows outside the channel blocks) where the convolution's input outgrows half of L2 (and, with
    32 vector registers, outweighs its weights): each row's input is then read once, from L1 and L2 across all
    the blocks, and the weights once per row in one contiguous stream, which the prefetchers follow. With the
    blocks outside (0), the whole input is read again for each block of output channels: from L2 where it fits
    (then that order is as fast, and measured faster on MobileNetV2's small layers), else from L3 in one short
    run per channel block and tile (a few lines, then a jump of a channel block's plane), which the prefetchers
    do not follow: `perf annotate` puts the tile's stalls on the broadcasts that open a new line. On AVX2 (16
    registers, the 1 x 1 tiles along the pixels) that holds where the weights outweigh the input too (ResNet-50's
    1 x 1 convolutions on 14 x 14 and 7 x 7, DeepLab's 1024 -> 2048 on 28 x 28: docs/benchmarks.md, "Machine A,
    sixteenth session"); with 32 registers the weights-heavier layers keep the blocks outside, as measured there
    (docs/passes.md, "Layout"). On an Intel Xeon more layers run the rows outside (`intel_rows_outer`)."""
    data, weights = (sch.state.stage(acc).op.inputs[k] for k in (0, 1))
    nbytes = [math.prod(t.shape) * itemsize(t.dtype) for t in (data, weights)]
    floor = target.l2_bytes // 2 if target.vector_registers < 32 else max(nbytes[1], target.l2_bytes // 2)
    intel = target.vector_registers >= 32 and target.vendor == "GenuineIntel"
    return int(nbytes[0] > floor or intel and intel_rows_outer(*nbytes, target))


def intel_rows_outer(data_bytes: int, weight_bytes: int, target: Target) -> bool:
    """Whether the rows run outside on an Intel Xeon with AVX-512 where `default_rows_outer`'s rule keeps them
    inside: where the input outgrows a quarter of L2 and the weights fit in half of it. Read again per block, such
    an input comes from L2 in a short run per channel block and tile; read again per row, the weights come from L2
    in one stream that the prefetch lowering runs ahead of (loop/prefetch.py). On ResNet-50's layers
    (docs/benchmarks.md, machine E) the rows outside ran faster wherever both held, and slower where a smaller
    input stays in L2 across the blocks or where weights past half of L2 come again per row from L3."""
    return data_bytes > target.l2_bytes // 4 and weight_bytes <= target.l2_bytes // 2


MIN_CHAINS = 8  # accumulators that cover the FMA latency on two ports (4 cycles x 2)
PAIRED_ACCUMULATORS = 14  # a two-block tile's accumulators with 32 vector registers: 2 x 7 (docs/benchmarks.md)
INTEL_PAIRED_ACCUMULATORS = 28  # on Intel's AVX-512 cores: 2 x 14 (`paired_accumulators`)
TWO_BLOCK_FILL = 0.9  # on AVX2, two blocks x 6 columns where the tiles fill at least this share of a row (28, 56,
# 112 columns: 0.93-0.98; not 7: 0.58, nor 14, whose 5 + 5 + 4 columns measured slower than one tile of 14)
TWO_BLOCK_DEPTH = 128  # and sum at least this many steps: a 3 x 3 stem over 3 (8) input channels (27 or 72 steps)
# ran 1.45-1.7x slower in two blocks, gcc reading each FMA's weight from memory; 147-4608 steps ran 1.0-1.2x faster


def default_flat(target: Target) -> int:
    """1 (a pointwise convolution's register tiles run along its pixels as one row) with 16 vector registers:
    there its tile is two channel blocks x 6 pixels (each broadcast feeds two FMAs), and 6 divides none of
    ResNet's rows (7, 14, 28, 56) where it leaves one tail in all the pixels (docs/benchmarks.md, "Machine A,
    fourteenth session"). With 32, 0: two blocks of 7 columns fit those rows already."""
    return int(target.vector_registers < 32)


def default_blocks(width: int, block: int, blocks: int, target: Target, strided_1x1: bool = False,
                   flat: bool = False, depth: int = 0, one_row: bool = False, dynamic_width: bool = False) -> int:
    """Channel blocks per tile by default. With 32 vector registers and one-vector blocks (AVX-512), two wherever
    the two-block tile keeps MIN_CHAINS accumulators, without a guarded tail where one block's tile has none (a
    9-wide row runs as one tile of 9, not 5 + 4): each broadcast input then feeds two FMAs from one register
    instead of being loaded again for each (faster than one block of 14 or 28 columns on ResNet-50's
    convolutions: docs/benchmarks.md, machine D). Otherwise (AVX2) two only where
    one block's tile has too few columns to keep MIN_CHAINS accumulators (a 7- or 5-wide row) and two blocks'
    fit in the registers with the columns kept, where the convolution is 1 x 1 and strided (ResNet's
    projections): each broadcast there comes from its own cache line, half of which the stride skips and no other
    tap reads, so feeding two blocks from it halves what the tile reads per FMA (docs/benchmarks.md, machine A,
    twelfth session), where the tiles run along the pixels (`flat`), and where the two-block tiles hold all the
    columns the registers allow, fill at least TWO_BLOCK_FILL of a row and sum at least TWO_BLOCK_DEPTH steps
    (`depth`, the reduction's length): a broadcast then feeds two FMAs (8 loads per 12 FMAs, where one block x
    14 columns loads 15 per 14); but not on an image of one row (`one_row`, a 1-D convolution), whose tiles share
    no input rows and stream their weights, all input channels x taps, from L2 for every tile: one block's 14
    columns share each weight vector where two blocks' 6 do (docs/benchmarks.md, machine A, nineteenth session);
    else one. A `dynamic_width` (an image of any size, specialised at `width`) counts the fill its tiles have on
    average over the widths from half to twice it: how the tiles divide the one width it is specialised at says
    nothing of the others."""
    if blocks % 2:
        return 1
    vectors = -(-block // target.vector_lanes)
    one, two = tile_columns(width, block, target, 1), tile_columns(width, block, target, 2)
    if target.vector_registers >= 32 and vectors == 1:
        return 2 if pairs_pay(width, one, two) else 1
    if one * vectors < MIN_CHAINS and two == one:
        return 2
    fill = expected_fill(width, two) if dynamic_width else rows_filled(width, two)
    full = two == _column_budget(block, target, 2) and fill >= TWO_BLOCK_FILL
    full = full and depth >= TWO_BLOCK_DEPTH and not one_row
    return 2 if vectors == 1 and (strided_1x1 or flat or full) else 1


def rows_filled(width: int, columns: int) -> float:
    """The share of a row's tiles of `columns` that falls on the row: 1 where they divide it, less the guarded
    tail's idle columns otherwise."""
    return width / (-(-width // columns) * columns)


def expected_fill(width: int, columns: int) -> float:
    """`rows_filled` on average over the widths from half to twice `width`."""
    widths = range(max(1, width // 2), 2 * width + 1)
    return sum(rows_filled(v, columns) for v in widths) / len(widths)


def strided_pointwise(attrs: dict) -> bool:
    """Whether a convolution (its op's attributes) is 1 x 1 with a stride (`default_blocks`)."""
    return tuple(attrs.get("kernel", ())) == (1, 1) and max(attrs.get("stride", (1,))) > 1


def pairs_pay(width: int, one: int, two: int) -> bool:
    """Whether a tile of two channel blocks x `two` columns beats one block x `one` on a row of `width` (with
    32 registers): it keeps MIN_CHAINS accumulators and adds no guarded tail that the one-block tile avoids."""
    return 2 * two >= MIN_CHAINS and (width % two == 0 or width % one != 0)


def tile_columns(width: int, block: int, target: Target, per_tile: int = 1) -> int:
    """Output columns in the register tile of `per_tile` channel blocks: the fewest tiles per row, then the least
    padding (`row_tile`: a divisor of the width where one does as well; else the last tile runs guarded), of at
    most the columns `_column_budget` allows; a tile of several blocks with 32 registers holds at most
    `paired_accumulators`."""
    budget = _column_budget(block, target, per_tile)
    if per_tile > 1 and target.vector_registers >= 32:
        budget = min(budget, max(1, paired_accumulators(target) // (-(-block // target.vector_lanes) * per_tile)))
    return row_tile(width, budget)


def paired_accumulators(target: Target) -> int:
    """The accumulators of a tile of several channel blocks with 32 registers. The two AVX-512 machines measured
    disagree (docs/benchmarks.md, machines D and E): on AMD's Zen 5, two blocks x 14 columns ran slower than
    2 x 7 on ResNet-50's convolutions; on an Intel Xeon they ran faster, in the model and in a C harness of the tile
    with its weights streamed from L2. Neither gcc's code (no spill in either) nor the loads per FMA explains the
    Zen 5 figure, so the vendor decides: 28 on Intel, else PAIRED_ACCUMULATORS."""
    return INTEL_PAIRED_ACCUMULATORS if target.vendor == "GenuineIntel" else PAIRED_ACCUMULATORS


def _column_budget(block: int, target: Target, per_tile: int) -> int:
    """The most columns whose accumulators (for `per_tile` channel blocks) leave a register for each weight vector
    a step multiplies and one for the broadcast input: a tile of more spills accumulators to the stack, each
    multiply-add then a load and a store (AVX2's two-block 2 x 7 tile on a 7-wide row did: docs/benchmarks.md)."""
    vectors = -(-block // target.vector_lanes) * per_tile
    return max(1, (target.vector_registers - vectors - 1) // vectors)


def _accumulator(sch: Schedule, s: Stage, anchor: Anchor) -> str:
    """The name of the reduction stage to compute inside `s`'s tile: the anchor's accumulator in a fused group, a
    local copy of `s` when `s` is the reduction itself, else the reduction `s` adds its bias to (or divides, for
    an average), with the stages between inlined."""
    if anchor.accumulator is None and s.op.reduce_axes:
        return sch.cache_write(s.name)
    acc = anchor.accumulator or next(p.name for p in sch.state.stages
                                     if p.op.reduce_axes and p.op.tag == anchor.tag and p.attach is None)
    for p in list(sch.state.stages):
        if p is not s and p.name != acc and p.attach is None and not p.op.reduce_axes and p.op.tag in WINDOW_TAGS:
            sch.compute_inline(p.name)
    return acc
