"""Default schedules for the packed GEMM and the packed convolution (te/nn/linalg.py, te/nn/packed_conv.py).

Both computes lay their operands out in panels (the GEMM's A in panels of mr rows and B in panels of nr columns,
the convolution's weights in blocks of output channels), so the register tile is the compute's layout and not a
parameter here; the rules' other degrees of freedom (rows per block, k blocking, panel grouping, loop and
reduction order, parallel grain, unrolling) come from the knobs, with the hand-written values as defaults.
"""

from __future__ import annotations

import math

from ..dtype import itemsize
from ..target import Target
from ..te.tiling import row_tile
from .knobs import Knobs
from .packed_gemm import Tile, row_blocks, stage_tagged, tile_output_loops
from .parallel import parallel_grain, parallel_outer
from .reductions import reduction_order, reduction_work, unroll_tap_row, window_pads
from .rules import Anchor, rule
from .rules_nchwc import default_pad_in_place, pairs_pay, read_in_place
from .schedule import Schedule
from .state import Stage
from .tiling import extent


@rule("packed_matmul")
def schedule_packed_matmul(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs,
                            tiles_per_block: int = 9) -> None:
    """The packed GEMM (te.nn.packed_matmul): each mr x nr register tile of the padded product accumulates over
    all of k inside the output's loops and is copied out (the only guarded part); blocks of output rows and column
    panels run in parallel. Each tile reads its mr rows of A where they lie, the rows past A's end repeating its
    last (te.nn.panel_matmul), with no copy and no barrier: a product of a single row tile (6 rows or fewer: a
    decoding step has one) always, any other by default (`{name}_apack_in_place`, else the packing stage runs in
    parallel at the root): packing A copied it in a transposing gather that cost more than the tiles' reads of
    A's rows in place (docs/benchmarks.md, machine E).

    mr and nr are not parameters here: the compute packs A in panels of mr rows and B in panels of nr columns, so
    they are fixed by its layout (the TE graph). The parameters are the rows per block `mb` (whole tiles, by
    default the largest divisor of the tile count up to `tiles_per_block`; one that does not divide leaves a
    guarded tail block), the k blocking (`kblocks`: 1 keeps the whole of k in each tile, more computes each row
    block of a panel in that many blocks of k, packed_gemm.k_blocks_in_block), and then the column panels per
    parallel chunk `nc`, the loop order (panels or row blocks outermost), the parallel grain, and whether the
    tile's rows are unrolled."""
    mr, nr = anchor.attrs["mr"], anchor.attrs["nr"]
    padded = stage_tagged(sch, "packed_matmul_tiles")
    mb, mb_d = row_blocks(sch, s, padded, mr, tiles_per_block, knobs)
    depth = reduction_work(sch, padded)
    stages = {st.name for st in sch.state.stages}
    packs = [t.name for t in sch.state.stage(padded).op.inputs if t.name in stages]  # not a prepacked input
    kblocks = knobs.pick(f"{padded}_kblocks", [b for b in (1, 2, 4, 8) if b == 1 or 16 * b <= depth], 1)
    _tiles_at_output(sch, s, padded, Tile(mr, nr, mb, mb_d), kblocks, target, knobs)
    rows = sch.state.stage(padded).tensor.shape[0]
    for pack in packs:
        # 0 first: records from before this choice measured A packed (TaskSpace.from_origin)
        if rows == mr or pack.endswith("_apack") and knobs.pick(f"{pack}_in_place", (0, 1), 1):
            sch.compute_inline(pack)  # read A where it lies: no copy, no barrier
            continue
        outer, _, inner = sch.loops(pack)
        parallel_outer(sch, sch.state.stage(pack), [outer], target, math.prod(sch.state.stage(pack).tensor.shape[1:]))
        sch.vectorize(pack, inner)


def default_packed_blocks(width: int, vectors: int, channel_blocks: int, accumulators: int, target: Target) -> int:
    """Two channel blocks per tile where rules_nchwc's rule takes two (32 vector registers, one-vector blocks, an
    even count of blocks, `pairs_pay`): each broadcast input feeds both blocks (docs/benchmarks.md, machine D);
    else one."""
    if channel_blocks % 2 or vectors != 1 or target.vector_registers < 32:
        return 1
    one, two = row_tile(width, accumulators), row_tile(width, max(1, accumulators // 2))
    return 2 if pairs_pay(width, one, two) else 1


def _tiles_at_output(sch: Schedule, s: Stage, padded: str, tile: Tile, kblocks: int, target: Target,
                     knobs: Knobs) -> None:
    """Each register tile computed over all of k at the output's row-tile loop, then copied out; a tile of
    several panels steps through them inside each row. With `kblocks` > 1, each row block of a panel is computed
    at once, k in that many blocks outside its tiles (packed_gemm.k_blocks_in_block)."""
    per_tile = tile_output_loops(sch, s, padded, tile, target, knobs, wide=True, kblocks=kblocks)
    if kblocks > 1:
        return
    pi, pj, pk = sch.loops(padded)
    panels = []
    if per_tile > 1:
        pp, pj = sch.split(padded, pj, tile.nr)
        panels = [pp]
    sch.reorder(padded, pk, pi, *panels, pj)
    if knobs.pick(f"{padded}_unroll", (0, 1), 1):
        sch.unroll(padded, pi)
    for pp in panels:
        sch.unroll(padded, pp)
    sch.vectorize(padded, pj)


@rule("packed_conv2d")
def schedule_packed_conv(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs,
                          accumulators: int = 14) -> None:
    """te.nn.packed_conv2d: a register tile of wr output columns x one or two blocks of output channels
    (vectorised) accumulates over input channels and taps; images, channel blocks and rows run in parallel; the
    tile is copied out to NCHW. The block is the compute's layout; the parameters are the channel blocks per tile,
    wr (up to the accumulators the registers hold; one that does not divide the row leaves a guarded tail, by
    default `row_tile`'s), the order of the reduction (input channels outside or inside the taps), the
    parallel grain and whether the tile's columns are unrolled. `accumulators` stays 14 on AVX-512 too: the
    register budget there (30) measured slower on Sapphire Rapids (DCGAN, 1x1 and strided 1-D convolutions);
    with AVX-512 the 14 are two blocks of 7 columns by default, as in the NCHWc rule (`default_packed_blocks`)."""
    block = anchor.attrs["block"]
    blocked = stage_tagged(sch, "packed_conv2d_tiles")
    n, c, h, w = [a.name for a in s.op.axes]
    vectors = -(-block // target.vector_lanes)
    channel_blocks = sch.state.stage(blocked).tensor.shape[1]
    width = extent(s, w)
    per_tile = knobs.pick(f"{s.name}_blocks", (1, 2) if channel_blocks > 1 else (1,),
                          default_packed_blocks(width, vectors, channel_blocks, accumulators, target))
    budget = max(1, accumulators // (vectors * per_tile))
    wr_d = row_tile(width, budget)
    wr = knobs.choice(f"{s.name}_wr", range(1, min(width, budget) + 1), wr_d)
    c0, c1 = sch.split(s.name, c, block * per_tile)
    channels = [c1] if per_tile == 1 else list(sch.split(s.name, c1, block))
    w0, w1 = sch.split(s.name, w, wr)
    tiles = -(-width // wr_d)  # at the default point: wr may be a sketch's parameter
    chunk = _chunk_tiles(sch, blocked, tiles, target)
    if chunk < tiles and knobs.pick(f"{s.name}_chunked", (0, 1), 1):
        # chunks of the row outside the channel blocks, which share each chunk's input in cache
        wc, w0 = sch.split(s.name, w0, chunk)
        sch.reorder(s.name, n, h, wc, c0, w0, *channels, w1)
        outer = [n, h, wc, c0]
        extents = [extent(s, n), extent(s, h), -(-tiles // chunk), extent(s, c0)]
        work = chunk * wr_d * block * per_tile * reduction_work(sch, blocked)
    else:
        sch.reorder(s.name, n, c0, h, w0, *channels, w1)
        outer, extents = [n, c0, h], [extent(s, n), extent(s, c0), extent(s, h)]
        work = width * block * per_tile * reduction_work(sch, blocked)
    parallel_grain(sch, s, outer, extents, target, work, knobs)
    sch.compute_at(blocked, s.name, w0)
    padded = window_pads(sch, sch.state.stage(blocked), blocked)
    if padded and knobs.pick(f"{s.name}_pad_in_place", (0, 1), default_packed_pad_in_place(anchor.attrs)):
        read_in_place(sch, sch.state.stage(blocked), blocked)
    bn, bc, bh, bw, bb, *reduce = sch.loops(blocked)
    reduce = reduction_order(knobs, blocked, reduce)
    if per_tile == 1:
        sch.reorder(blocked, bn, bc, bh, *reduce, bw, bb)
    else:
        sch.reorder(blocked, bn, bh, *reduce, bw, bc, bb)
        sch.unroll(blocked, bc)
    if knobs.pick(f"{blocked}_unroll", (0, 1), 1):
        sch.unroll(blocked, bw)
    unroll_tap_row(sch, blocked, reduce, knobs)
    sch.vectorize(blocked, bb)


def default_packed_pad_in_place(attrs: dict) -> int:
    """1 (the packed convolution reads its NCHW input in place, the tiles that reach the padding guarded, as the
    NCHWc rule's `default_pad_in_place` says) for a 2-D window; 0 (a padded copy first) for a 1-D one, a row of
    height 1 (Whisper's k3: in place, gcc took the weights from memory at every multiply-add of the interior
    tiles; docs/benchmarks.md, "Machine F, thirty-fifth session")."""
    return int(attrs["kernel"][0] > 1 and default_pad_in_place(attrs))


def _chunk_tiles(sch: Schedule, blocked: str, tiles: int, target: Target) -> int:
    """Register tiles per chunk of an output row: the whole row while the input it reads (every input channel's
    rows under the window) fits in half of L2, else chunks whose input takes a quarter of it. A 1-D
    convolution's row of 3000 reads 80 x 3000 floats, a line of each of 80 rows per step of tiles, more streams
    than the prefetchers follow: each channel block swept the whole row, waiting on L3."""
    st = sch.state.stage(blocked)
    data = next(t for t in st.op.inputs if t.ndim == 4)  # x or its padded copy, (N, C, H, W)
    row_bytes = data.shape[1] * st.op.attrs["kernel"][0] * data.shape[3] * itemsize(data.dtype)
    if row_bytes <= target.l2_bytes // 2:
        return tiles
    return max(1, min(tiles, (target.l2_bytes // 4) * tiles // row_bytes))
