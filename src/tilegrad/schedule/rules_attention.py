"""The default schedule of the attention compute (te/nn/attention.py): every stage per block of query rows, the two
products as register tiles.

The output's loops are the batch axes, blocks of `rows` query rows, and inside a block tiles of `mr` rows by `nr`
columns of Dv. Inside a block, every stage is computed into a local buffer of that block (compute_at the block
loop), so the score matrix never reaches memory, and both products are GEMM micro-kernels whose accumulators stay
in registers across their reduction:
- the scores: tiles of `mr` query rows by `nr` keys accumulated over D (cache_write, computed at the tile loop of
  the block's scores, into which each tile is copied out);
- the row maxima and sums: vectors of partial results (rfactor over the vector lanes), which the keys' padding to
  whole vectors allows;
- the weighted values: the output's tiles of `mr` rows by `nr` of Dv accumulated over the keys, normalised as
  they are written out.
K^T (scaled) and the contiguous copy of V are computed once per (batch, head), at the last batch loop, when the batch axes alone give the
threads enough work; otherwise the blocks run in parallel too, and K^T is computed for every head before them,
in parallel: a copy per block transposed D x Lk elements for every block of rows, as much time as the block's
products (docs/passes.md, "Attention", has the measurement).

The blockwise form (te/nn/attention_blockwise.py, op attribute form="blockwise") gets the same blocks, tiles and
K^T; inside a block each stage runs key block by key block (m_b, the exponentials, l_b, acc_b as the scores'
register tiles of `mr` rows by `nr` of Dv), then M, the scales and the denominator per row, and the merge
sum_b exp(m_b - M) acc_b as the output's register tile.
"""

from __future__ import annotations

import math

from ..target import Target
from .knobs import Knobs
from .parallel import parallel_grain, parallel_outer
from .rules import Anchor, rule
from .schedule import Schedule
from .state import Stage
from .tiling import extent, values

ROWS_PER_BLOCK = 16  # query rows per block: the block's buffers hold this many rows of scores
TILE_ROWS = 8  # query rows of a register tile (faster than 4 rows x 2 vectors on BERT's shape, as for batch_matmul)
# Vectors of columns (keys, or Dv) in both products' tiles, the first that divides them: two give 16 FMAs for 8
# broadcasts and 2 loads a step, where one gave 8 for 9 loads (docs/benchmarks.md, machine E, thirtieth
# session); a width that leaves a partial tile (ViT's 197 keys, padded to 13 vectors) is slower than one vector.
TILE_VECTORS = (2, 1)
# With 16 vector registers (AVX2) the scores' tile is 6 query rows x 2 vectors of keys (12 accumulators, 2 vectors
# of K^T and a broadcast: 8 loads per 12 FMAs, where 8 x 1 loads 9 per 8) in blocks of 24 rows, whole tiles
# (docs/benchmarks.md, "Machine A, thirteenth session").
NARROW_SCORES_TILE = (6, 2)
NARROW_ROWS_PER_BLOCK = 24
HEADS_PER_THREAD = 4  # batch iterations per core from which K^T is computed per head and the blocks run serially
KEYS_PER_BLOCK, KEYS_PER_HEAD, KEYS_ONCE = 0, 1, 2  # where K^T is computed: in each block, per head, before all


@rule("attention")
def schedule_attention(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """Blocks of query rows, each computing its whole chain in local buffers, both products register-tiled."""
    producers = {p.op.tag: p.name for p in sch.state.stages if p.attach is None and p.name != s.name}
    block, tile, columns = _row_blocks(sch, s, producers, target, knobs)
    _scores_tiles(sch, producers["attention_scores"], s.name, block, target, knobs)
    sch.compute_at(producers["attention_exp"], s.name, block)
    sch.vectorize(producers["attention_exp"], sch.loops(producers["attention_exp"])[-1])
    for p in [st.name for st in sch.state.stages if st.attach is None and st.op.tag == "reduce"]:  # max, sum
        sch.compute_at(p, s.name, block)
        _vector_partials(sch, p, target.vector_lanes)
    _weighted_values_tiles(sch, producers["attention_pv"], s.name, tile)
    sch.vectorize(s.name, columns)


@rule("attention_blockwise")
def schedule_attention_blockwise(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """The blockwise form (te/nn/attention_blockwise.py) on the same blocks of query rows. Inside a block, m_b,
    l_b and acc_b run as one loop over the key blocks (compute_with), so that the scores and exponentials are
    computed at that loop and only one key block of them is held; the scores and acc_b are the two-pass form's
    register tiles. Then M, the scales and the denominator per row, and the merge sum_b exp(m_b - M) acc_b as
    the output's register tile."""
    producers = {p.op.tag: p.name for p in sch.state.stages if p.attach is None and p.name != s.name}
    block, tile, columns = _row_blocks(sch, s, producers, target, knobs)
    statistics = [st.name for st in sch.state.stages if st.attach is None and st.op.tag == "reduce"]  # m_b, l_b
    acc = producers["attention_pv"]
    _scores_tiles(sch, acc, s.name, block, target, knobs)  # acc_b: rows x Dv per key block
    per_block = sorted([*statistics, acc], key=[st.name for st in sch.state.stages].index)
    last = per_block[-1]  # the nest they share is the last one's; the others run first in each of its iterations
    sch.compute_at(last, s.name, block)
    key_block = sch.loops(last)[len(sch.state.stage(acc).op.axes) - 3]  # after the batch axes, in every one
    for p in per_block[:-1]:
        sch.compute_with(p, last, key_block)
    _scores_tiles(sch, producers["attention_scores"], last, key_block, target, knobs)
    sch.compute_at(producers["attention_exp"], last, key_block)
    sch.vectorize(producers["attention_exp"], sch.loops(producers["attention_exp"])[-1])
    for p in statistics:
        _vector_partials(sch, p, target.vector_lanes)
    for p in [st.name for st in sch.state.stages if st.attach is None and st.op.tag == "attention_merge"]:
        sch.compute_at(p, s.name, block)  # M, exp(m_b - M), the denominator: a few floats per row
    _weighted_values_tiles(sch, producers["attention_merge_pv"], s.name, tile)
    sch.vectorize(s.name, columns)


def _row_blocks(sch: Schedule, s: Stage, producers: dict[str, str], target: Target,
                knobs: Knobs) -> tuple[str, str, str]:
    """Split the output into blocks of query rows and register tiles, make the blocks (or the heads) parallel and
    compute K^T per head or per block, inline the masked logits; returns the block loop, the tile loop and the
    tile's vector of columns. `producers` names the unattached producers by tag."""
    keys = producers["attention_keys"]
    axes = [a.name for a in s.op.axes]
    if s.op.attrs.get("out_layout") == "bshd":  # (B, Lq, H, Dv): the heads run outside the blocks of query rows
        b, i, h, e = axes
        batch = [b, h]
    else:
        *batch, i, e = axes
    lq, dv, lanes = extent(s, i), extent(s, e), target.vector_lanes
    *_, d, lk = sch.state.stage(keys).tensor.shape  # K^T: (..., D, Lk padded)
    # A dynamic Lq, scheduled at a representative length that may be short, gets the long lengths' whole blocks,
    # which its register tiles divide (docs/dynamic.md); the rows past Lq are skipped.
    rows_d = rows_per_block(target) if s.op.attrs.get("dynamic_queries") else min(lq, rows_per_block(target))
    rows = knobs.choice(f"{s.name}_rows", values(rows_d, (1, 2, 4, 8, 16, 32, 64), lq), rows_d)
    mr_d, nr_d = min(rows_d, TILE_ROWS), min(dv, lanes if _narrow(target) else _tile_columns(dv, lanes))
    mr = knobs.choice(f"{s.name}_mr", values(mr_d, range(1, 9), rows_d), mr_d)
    nr = knobs.choice(f"{s.name}_nr", values(nr_d, (lanes * k for k in (1, 2, 3, 4)), -(-dv // lanes) * lanes), nr_d)
    i0, i1 = sch.split(s.name, i, rows)
    i10, i11 = sch.split(s.name, i1, mr)
    e0, e1 = sch.split(s.name, e, nr)
    sch.reorder(s.name, *batch, i0, i10, e0, i11, e1)
    batch_extents = [extent(s, b) for b in batch]
    keys_d = KEYS_PER_HEAD if batch and math.prod(batch_extents) >= HEADS_PER_THREAD * target.cores else KEYS_ONCE
    keys_at = knobs.pick(f"{s.name}_keys_at", (KEYS_PER_BLOCK, KEYS_PER_HEAD, KEYS_ONCE) if batch else
                         (KEYS_PER_BLOCK, KEYS_ONCE), keys_d)
    per_head = keys_at == KEYS_PER_HEAD
    parallel = batch if per_head else [*batch, i0]
    extents = batch_extents + ([] if per_head else [-(-lq // rows_d)])
    parallel_grain(sch, s, parallel, extents, target, rows_d * lk * (d + dv), knobs)
    loops = sch.loops(s.name)
    block = loops[loops.index(i10) - 1]  # i0, or the parallel loop it was fused into
    for copy, inner in ((keys, lk), (producers["attention_values"], dv)):  # K^T and V, where keys_at says
        if keys_at == KEYS_ONCE:
            parallel_outer(sch, sch.state.stage(copy), sch.loops(copy)[:-1], target, inner)
        else:
            sch.compute_at(copy, s.name, loops[loops.index(block) - 1] if per_head else block)
        *_, outer, contiguous = sch.loops(copy)
        if copy == keys and keys_at != KEYS_ONCE and inner % lanes == 0 and inner > lanes:
            # K^T is a transpose: a vector of keys reads that many rows of K, each on its own pages; a vector's
            # keys outside D keep those few rows' pages in the TLB (all of Lk's rows were hundreds of pages)
            blocks, contiguous = sch.split(copy, contiguous, lanes)
            sch.reorder(copy, blocks, outer, contiguous)
        sch.vectorize(copy, contiguous)
    if "attention_logits" in producers:  # the mask's add and the -inf selects, recomputed by their readers
        sch.compute_inline(producers["attention_logits"])
    return block, e0, e1


def _scores_tiles(sch: Schedule, scores: str, out: str, block: str, target: Target, knobs: Knobs) -> None:
    """The block's scores as tiles of `mr` query rows by `nr` keys, each accumulated in registers over D (a
    cache_write computed at the tile loop) and copied into the block's buffer."""
    lanes = target.vector_lanes
    local = sch.cache_write(scores)
    sch.compute_at(scores, out, block)
    st = sch.state.stage(scores)
    *outer, i, j = [a.name for a in st.op.axes]
    rows, keys = extent(st, i), extent(st, j)
    mr_d, nr_d = min(rows, TILE_ROWS), min(keys, _tile_columns(keys, lanes))
    if _narrow(target) and keys >= NARROW_SCORES_TILE[1] * lanes:
        mr_d, nr_d = min(rows, NARROW_SCORES_TILE[0]), NARROW_SCORES_TILE[1] * lanes
    mr = knobs.choice(f"{scores}_mr", values(mr_d, range(1, 9), rows), mr_d)
    nr = knobs.choice(f"{scores}_nr", values(nr_d, (lanes * k for k in (1, 2, 3, 4)), keys), nr_d)
    i0, i1 = sch.split(scores, i, mr)
    j0, j1 = sch.split(scores, j, nr)
    sch.reorder(scores, *outer, i0, j0, i1, j1)
    sch.vectorize(scores, j1)
    sch.compute_at(local, scores, j0)
    lst = sch.state.stage(local)
    *louter, li, lj = [a.name for a in lst.op.axes]
    sch.reorder(local, *louter, *[a.name for a in lst.op.reduce_axes], li, lj)
    sch.unroll(local, li)
    sch.vectorize(local, lj)


def _tile_columns(columns: int, lanes: int) -> int:
    """The columns of a product's register tile: the first of TILE_VECTORS vectors that divides `columns`."""
    return next((k * lanes for k in TILE_VECTORS if columns % (k * lanes) == 0), lanes)


def rows_per_block(target: Target) -> int:
    """The default query rows per block on `target`."""
    return NARROW_ROWS_PER_BLOCK if _narrow(target) else ROWS_PER_BLOCK


def _narrow(target: Target) -> bool:
    """Whether the target has AVX2's 16 vector registers, for which the scores' tile is 6 x 2 vectors."""
    return target.vector_registers <= 16


def _vector_partials(sch: Schedule, p: str, lanes: int) -> None:
    """A row maximum or sum over the (padded) keys as a vector of partial results per row (rfactor over the lanes,
    computed at the row so the lanes are contiguous), then the lanes reduced."""
    *_, k = sch.loops(p)
    if extent(sch.state.stage(p), k) % lanes:  # keys padded to fewer floats than this target's vector
        return
    _, k1 = sch.split(p, k, lanes)
    rf = sch.rfactor(p, k1)
    *_, row, _ = sch.loops(p)
    lane, *rest = sch.loops(rf)
    sch.reorder(rf, *rest, lane)
    sch.vectorize(rf, lane)
    sch.compute_at(rf, p, row)


def _weighted_values_tiles(sch: Schedule, pv: str, out: str, tile: str) -> None:
    """The weighted values as the output's register tile (computed at its tile loop), accumulated over the keys:
    for each key, a row of the tile gains exp(logit) times a vector of V."""
    st = sch.state.stage(pv)
    *outer, i, e = [a.name for a in st.op.axes]
    sch.compute_at(pv, out, tile)
    sch.reorder(pv, *outer, *[a.name for a in st.op.reduce_axes], i, e)
    sch.unroll(pv, i)
    sch.vectorize(pv, e)

