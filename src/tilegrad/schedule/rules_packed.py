"""Default schedules for the packed GEMM and the packed convolution (te/nn/linalg.py, te/nn/packed_conv.py).

Both computes lay their operands out in panels (the GEMM's A in panels of mr rows and B in panels of nr columns,
the convolution's weights in blocks of output channels), so the register tile is the compute's layout and not a
parameter here; the rules' other degrees of freedom (rows per block, k blocking, panel grouping, loop and
reduction order, parallel grain, unrolling) come from the knobs, with the hand-written values as defaults.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..target import Target
from ..te import expr as E
from .defaults import (
    Anchor,
    _extent,
    _largest_divisor,
    _parallel_outer,
    parallel_grain,
    reduction_order,
    reduction_work,
    rule,
)
from .knobs import Knobs
from .schedule import Schedule
from .state import Stage

MAX_BLOCK_TILES = 16  # rows per block of the packed GEMM, in register tiles


class _Tile(NamedTuple):
    """The packed GEMM's register tile (mr x nr, the layout's) and rows per block: `mb` as the rule has it (a Var
    in a sketch), `mb_default` its hand-written value, which the defaults derived from it use."""

    mr: int
    nr: int
    mb: int | E.Var
    mb_default: int


@rule("packed_matmul")
def schedule_packed_matmul(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs,
                            tiles_per_block: int = 9) -> None:
    """The packed GEMM (te.nn.packed_matmul): each mr x nr register tile of the padded product accumulates over
    all of k inside the output's loops and is copied out (the only guarded part); blocks of output rows and column
    panels run in parallel; the packing stages run in parallel at the root.

    mr and nr are not parameters here: the compute packs A in panels of mr rows and B in panels of nr columns, so
    they are fixed by its layout (the TE graph). The parameters are the rows per block `mb` (whole tiles, by
    default the largest divisor of the tile count up to `tiles_per_block`; one that does not divide leaves a
    guarded tail block), the k blocking (`kblocks`: 1 keeps the whole of k in each tile, more computes the product
    at the root in that many blocks of k, `_k_blocked_tiles`), and then the column panels per parallel chunk `nc`,
    the loop order (panels or row blocks outermost), the parallel grain, and whether the tile's rows are
    unrolled."""
    mr, nr = anchor.attrs["mr"], anchor.attrs["nr"]
    padded = _stage_tagged(sch, "packed_matmul_tiles")
    mb, mb_d = row_blocks(sch, s, padded, mr, tiles_per_block, knobs)
    depth = reduction_work(sch, padded)
    kblocks = knobs.pick(f"{padded}_kblocks", [b for b in (1, 2, 4, 8) if b == 1 or 16 * b <= depth], 1)
    if kblocks > 1:
        _k_blocked_tiles(sch, s, padded, _Tile(mr, nr, mb, mb_d), kblocks, target, knobs)
    else:
        _tiles_at_output(sch, s, padded, _Tile(mr, nr, mb, mb_d), target, knobs)
    stages = {st.name for st in sch.state.stages}
    for pack in [t.name for t in sch.state.stage(padded).op.inputs if t.name in stages]:  # not a prepacked input
        outer, _, inner = sch.loops(pack)
        _parallel_outer(sch, sch.state.stage(pack), [outer], target, math.prod(sch.state.stage(pack).tensor.shape[1:]))
        sch.vectorize(pack, inner)


def _tiles_at_output(sch: Schedule, s: Stage, padded: str, tile: _Tile, target: Target, knobs: Knobs) -> None:
    """Each register tile computed over all of k at the output's row-tile loop, then copied out."""
    tile_output_loops(sch, s, padded, tile, target, knobs)
    pi, pj, pk = sch.loops(padded)
    sch.reorder(padded, pk, pi, pj)
    if knobs.pick(f"{padded}_unroll", (0, 1), 1):
        sch.unroll(padded, pi)
    sch.vectorize(padded, pj)


def row_blocks(sch: Schedule, s: Stage, padded: str, mr: int, tiles_per_block: int, knobs: Knobs) -> tuple:
    """The rows per block `mb` as a parameter (whole tiles of mr rows) and its default `mb_d`, the largest divisor
    of the tile count up to `tiles_per_block` tiles."""
    tiles = sch.state.stage(padded).tensor.shape[0] // mr
    mb_d = mr * max(d for d in range(1, tiles_per_block + 1) if tiles % d == 0)
    return knobs.choice(f"{s.name}_mb", tuple(mr * t for t in range(1, min(tiles, MAX_BLOCK_TILES) + 1)), mb_d), mb_d


def tile_output_loops(sch: Schedule, s: Stage, padded: str, tile: _Tile, target: Target, knobs: Knobs) -> None:
    """The output's loops around a register tile: column panels of nr and row blocks of mb outermost (their order
    and the panels per chunk `nc` are parameters) and in parallel, the tile's rows and vectorised columns inside,
    and the padded product's tile computed at the tile-row loop (its own loops are the caller's)."""
    mr, nr, mb, mb_d = tile
    i, j = [a.name for a in s.op.axes]
    m, panels = _extent(s, i), -(-_extent(s, j) // nr)
    j0, j1 = sch.split(s.name, j, nr)
    i0, i1 = sch.split(s.name, i, mb)
    i10, i11 = sch.split(s.name, i1, mr)
    nc = knobs.pick(f"{s.name}_nc", [v for v in (1, 2, 4, 8) if v == 1 or v < panels], 1)
    order = knobs.pick(f"{s.name}_order", (0, 1), 0)  # 0: column panels outside row blocks; 1: the other way
    blocks = [(i0, -(-m // mb_d))]
    if nc > 1:
        j00, j01 = sch.split(s.name, j0, nc)
        columns = [(j00, -(-panels // nc))]
        inner = [j01]
    else:
        columns, inner = [(j0, panels)], []
    outer = columns + blocks if order == 0 else blocks + columns
    sch.reorder(s.name, *[lp for lp, _ in outer], *inner, i10, i11, j1)
    parallel_grain(sch, s, [lp for lp, _ in outer], [e for _, e in outer], target,
                   mb_d * nr * nc * reduction_work(sch, padded), knobs)
    sch.vectorize(s.name, j1)
    sch.compute_at(padded, s.name, i10)


def _k_blocked_tiles(sch: Schedule, s: Stage, padded: str, tile: _Tile, kblocks: int, target: Target,
                     knobs: Knobs) -> None:
    """GotoBLAS's kc: the padded product computed at the root, column panels and row blocks outermost (in
    parallel), then k in `kblocks` blocks (the last may be short), each block accumulating into every mr x nr
    tile of the row block, so a block of the packed panels is read while it is in cache; the output is copied
    out of the product in parallel rows."""
    mr, nr, mb, mb_d = tile
    pst = sch.state.stage(padded)
    rows, cols = pst.tensor.shape[:2]
    pi, pj, pk = sch.loops(padded)
    j0, j1 = sch.split(padded, pj, nr)
    i0, i1 = sch.split(padded, pi, mb)
    i10, i11 = sch.split(padded, i1, mr)
    k0, k1 = sch.split(padded, pk, nparts=kblocks)
    sch.reorder(padded, j0, i0, k0, i10, k1, i11, j1)
    parallel_grain(sch, pst, [j0, i0], [cols // nr, -(-rows // mb_d)], target, mb_d * nr * reduction_work(sch, padded),
                   knobs)
    if knobs.pick(f"{padded}_unroll", (0, 1), 1):
        sch.unroll(padded, i11)
    sch.vectorize(padded, j1)
    i, j = [a.name for a in s.op.axes]
    j0, j1 = sch.split(s.name, j, nr)
    _parallel_outer(sch, s, [i], target, _extent(s, j))
    sch.vectorize(s.name, j1)


@rule("packed_conv2d")
def schedule_packed_conv(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs,
                          accumulators: int = 14) -> None:
    """te.nn.packed_conv2d: a register tile of wr output columns x one or two blocks of output channels
    (vectorised) accumulates over input channels and taps; images, channel blocks and rows run in parallel; the
    tile is copied out to NCHW. The block is the compute's layout; the parameters are the channel blocks per tile,
    wr (up to the accumulators the registers hold; one that does not divide the row leaves a guarded tail, by
    default the largest divisor), the order of the reduction (input channels outside or inside the taps), the
    parallel grain and whether the tile's columns are unrolled."""
    block = anchor.attrs["block"]
    blocked = _stage_tagged(sch, "packed_conv2d_tiles")
    n, c, h, w = [a.name for a in s.op.axes]
    vectors = -(-block // target.vector_lanes)
    channel_blocks = sch.state.stage(blocked).tensor.shape[1]
    per_tile = knobs.pick(f"{s.name}_blocks", (1, 2) if channel_blocks > 1 else (1,), 1)
    width = _extent(s, w)
    budget = max(1, accumulators // (vectors * per_tile))
    wr = knobs.choice(f"{s.name}_wr", range(1, min(width, budget) + 1), _largest_divisor(width, budget))
    c0, c1 = sch.split(s.name, c, block * per_tile)
    channels = [c1] if per_tile == 1 else list(sch.split(s.name, c1, block))
    w0, w1 = sch.split(s.name, w, wr)
    sch.reorder(s.name, n, c0, h, w0, *channels, w1)
    work = width * block * per_tile * reduction_work(sch, blocked)
    parallel_grain(sch, s, [n, c0, h], [_extent(s, n), _extent(s, c0), _extent(s, h)], target, work, knobs)
    sch.compute_at(blocked, s.name, w0)
    bn, bc, bh, bw, bb, *reduce = sch.loops(blocked)
    reduce = reduction_order(knobs, blocked, reduce)
    if per_tile == 1:
        sch.reorder(blocked, bn, bc, bh, *reduce, bw, bb)
    else:
        sch.reorder(blocked, bn, bh, *reduce, bc, bw, bb)
        sch.unroll(blocked, bc)
    if knobs.pick(f"{blocked}_unroll", (0, 1), 1):
        sch.unroll(blocked, bw)
    sch.vectorize(blocked, bb)


def _stage_tagged(sch: Schedule, tag: str) -> str:
    return next(st.name for st in sch.state.stages if st.op.tag == tag)
