"""The packed GEMM's loop structure, shared by the rules of every packed product (rules_packed.py for float,
rules_int8.py, rules_row_epilogue.py): its register tile, the output's row blocks, and the output's loops around
the tile."""

from __future__ import annotations

from typing import NamedTuple

from ..target import Target
from ..te import expr as E
from .knobs import Knobs
from .parallel import parallel_grain
from .reductions import reduction_work
from .schedule import Schedule
from .state import Stage
from .tiling import extent

MAX_BLOCK_TILES = 16  # rows per block of the packed GEMM, in register tiles


class Tile(NamedTuple):
    """The packed GEMM's register tile (mr x nr, the layout's) and rows per block: `mb` as the rule has it (a Var
    in a sketch), `mb_default` its hand-written value, which the defaults derived from it use."""

    mr: int
    nr: int
    mb: int | E.Var
    mb_default: int


def stage_tagged(sch: Schedule, tag: str) -> str:
    """The name of the (first) stage tagged `tag`: a packed compute's padded product or blocked tiles."""
    return next(st.name for st in sch.state.stages if st.op.tag == tag)


def row_blocks(sch: Schedule, s: Stage, padded: str, mr: int, tiles_per_block: int, knobs: Knobs) -> tuple:
    """The rows per block `mb` as a parameter (whole tiles of mr rows) and its default `mb_d`, the largest divisor
    of the tile count up to `tiles_per_block` tiles."""
    tiles = sch.state.stage(padded).tensor.shape[0] // mr
    mb_d = mr * max(d for d in range(1, tiles_per_block + 1) if tiles % d == 0)
    return knobs.choice(f"{s.name}_mb", tuple(mr * t for t in range(1, min(tiles, MAX_BLOCK_TILES) + 1)), mb_d), mb_d


def tile_output_loops(sch: Schedule, s: Stage, padded: str, tile: Tile, target: Target, knobs: Knobs,
                      wide: bool = False, row_span: int | None = None, kblocks: int = 1) -> int:
    """The output's loops around a register tile: column panels of nr and row blocks of mb outermost (their order
    and the panels per chunk `nc` are parameters) and in parallel, the tile's rows and vectorised columns inside,
    and the padded product's tile computed at the tile-row loop (its own loops are the caller's). With `wide`,
    the tile may span several panels (`tile_panels`), as it must to keep enough FMA chains in flight when it has
    few rows. With `row_span`, it spans by default as many panels as keep at most that many accumulators, and the
    output's row runs over all of them in one vectorised loop (an epilogue that narrows to bytes: gcc sizes a
    loop's vectors by its narrowest type, so 16 columns of bytes ran on 16-byte vectors), the tile's rows
    unrolled so that their epilogues' long chains interleave. Returns the panels per tile."""
    mr, nr, mb, mb_d = tile
    i, j = sch.loops(s.name)[-2:]  # the rows (fused, where the output has more axes) and the columns
    m, panels = extent(s, i), -(-extent(s, j) // nr)
    spans = [v for v in (1, 2, 4, 8) if panels % v == 0] if (wide or row_span) and kblocks == 1 else [1]
    if row_span:
        fitting = max(v for v in spans if mr * v * -(-nr // target.vector_lanes) <= row_span or v == 1)
    else:
        fitting = max(v for v in spans if v == 1 or _chains(mr, nr, v, target))
    per_tile = knobs.pick(f"{s.name}_tile_panels", spans, fitting)
    j0, j1 = sch.split(s.name, j, nr)
    i0, i1 = sch.split(s.name, i, mb)
    i10, i11 = sch.split(s.name, i1, mr)
    tile_panels = []  # the tile's panels, stepped through inside its rows
    if per_tile > 1:
        j0, jt = sch.split(s.name, j0, per_tile)
        tile_panels = [jt]
    nc = 1 if tile_panels else knobs.pick(f"{s.name}_nc", [v for v in (1, 2, 4, 8) if v == 1 or v < panels], 1)
    order = knobs.pick(f"{s.name}_order", (0, 1), 0)  # 0: column panels outside row blocks; 1: the other way
    blocks = [(i0, -(-m // mb_d))]
    if nc > 1:
        j00, j01 = sch.split(s.name, j0, nc)
        columns = [(j00, -(-panels // nc))]
        inner = [j01]
    else:
        columns, inner = [(j0, panels // per_tile)], []
    outer = columns + blocks if order == 0 else blocks + columns
    rows = [i11, *tile_panels, j1] if row_span else [*tile_panels, i11, j1]
    sch.reorder(s.name, *[lp for lp, _ in outer], *inner, i10, *rows)
    parallel_grain(sch, s, [lp for lp, _ in outer], [e for _, e in outer], target,
                   mb_d * nr * nc * per_tile * reduction_work(sch, padded), knobs)
    sch.vectorize(s.name, sch.fuse(s.name, *tile_panels, j1) if row_span and tile_panels else j1)
    if row_span:
        sch.unroll(s.name, i11)
    if kblocks > 1:
        loops = sch.loops(s.name)  # the parallel grain may have fused the outer loops
        sch.compute_at(padded, s.name, loops[loops.index(i10) - 1])
        k_blocks_in_block(sch, padded, mr, kblocks, knobs)
    else:
        sch.compute_at(padded, s.name, i10)
    return per_tile


def k_blocks_in_block(sch: Schedule, padded: str, mr: int, kblocks: int, knobs: Knobs) -> None:
    """GotoBLAS's kc inside one row block x panel of the padded product (computed there, in L1): k in `kblocks`
    blocks outside the block's register tiles, each tile summing one block of k in registers (the rfactor of the
    split's outer part, computed per tile) and adding it to the block. Every tile of the row block then reads the
    same block of the B panel from L1, where with all of k per tile each tile streams the whole panel from L2."""
    part, _ = sch.split(padded, sch.loops(padded)[2], nparts=kblocks)
    partial = sch.rfactor(padded, part)
    pi, pj, p = sch.loops(padded)
    i0, i1 = sch.split(padded, pi, mr)
    sch.reorder(padded, p, i0, i1, pj)
    sch.unroll(padded, i1)
    sch.vectorize(padded, pj)
    sch.set_scope(partial, "local")
    sch.compute_at(partial, padded, i0)
    _, ri, rj, rk = sch.loops(partial)
    sch.reorder(partial, rk, ri, rj)
    if knobs.pick(f"{padded}_unroll", (0, 1), 1):
        sch.unroll(partial, ri)
    sch.vectorize(partial, rj)


WIDE_TILE_CHAINS = 8  # accumulators a tile of few rows spreads over panels to reach: two FMA ports x 4 cycles


def _chains(mr: int, nr: int, panels: int, target: Target) -> bool:
    """Whether a tile of `mr` rows across `panels` panels keeps at most WIDE_TILE_CHAINS accumulators."""
    return mr * panels * -(-nr // target.vector_lanes) <= WIDE_TILE_CHAINS
