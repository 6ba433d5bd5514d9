"""The default schedule of the int8 GEMM (te.nn.quantized_matmul): the packed GEMM's structure (rules_packed.py)
with its reduction in k groups of 4.

Each mr x nr register tile of int32 sums is computed at the output's row-tile loop over all k groups, then
requantized and copied out. Inside a k group the tile's loops are rows (unrolled), then the nr columns, then
the 4 values of the group: the nest loop/dot4.py gives to the target's u8 x s8 dot-product instruction
(`Target.int8_dot`), one instruction per row and vector of columns. Without one, the 4 values go outside the
columns, so the compiler vectorises the columns. The parameters (knobs) are the rows per block `mb`, the column
panels per parallel chunk, the loop order, the parallel grain and the unrolling of the tile's rows.
"""

from __future__ import annotations

import math

from ..target import Target
from .defaults import _extent, _parallel_outer, parallel_grain, reduction_work, rule
from .knobs import Knobs
from .rules_packed import MAX_BLOCK_TILES, _stage_tagged
from .schedule import Schedule
from .state import Stage


@rule("packed_int8_matmul")
def schedule_int8_matmul(sch: Schedule, s: Stage, target: Target, anchor, knobs: Knobs,
                         tiles_per_block: int = 8) -> None:
    """The tiles of `packed_int8_tiles` at the output's row tiles; blocks of rows and column panels in
    parallel; the packing of a in parallel at the root."""
    mr, nr = anchor.attrs["mr"], anchor.attrs["nr"]
    padded = _stage_tagged(sch, "packed_int8_tiles")
    tiles = sch.state.stage(padded).tensor.shape[0] // mr
    mb_d = mr * max(d for d in range(1, tiles_per_block + 1) if tiles % d == 0)
    mb = knobs.choice(f"{s.name}_mb", tuple(mr * t for t in range(1, min(tiles, MAX_BLOCK_TILES) + 1)), mb_d)
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
        columns, inner = [(j00, -(-panels // nc))], [j01]
    else:
        columns, inner = [(j0, panels)], []
    outer = columns + blocks if order == 0 else blocks + columns
    sch.reorder(s.name, *[lp for lp, _ in outer], *inner, i10, i11, j1)
    parallel_grain(sch, s, [lp for lp, _ in outer], [e for _, e in outer], target,
                   mb_d * nr * nc * reduction_work(sch, padded), knobs)
    sch.vectorize(s.name, j1)
    sch.compute_at(padded, s.name, i10)
    pi, pj, *groups, pg = sch.loops(padded)  # the k groups (one loop, or a convolution's tap row, column, channels)
    if target.int8_dot == "scalar":
        sch.reorder(padded, *groups, pi, pg, pj)
        sch.vectorize(padded, pj)
    else:
        sch.reorder(padded, *groups, pi, pj, pg)
    if knobs.pick(f"{padded}_unroll", (0, 1), 1):
        sch.unroll(padded, pi)
    for st in [st for st in sch.state.stages if st.op.tag == "pack" and st.attach is None]:
        _parallel_outer(sch, st, [sch.loops(st.name)[0]], target, math.prod(st.tensor.shape[1:]))
