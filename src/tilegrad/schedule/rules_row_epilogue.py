"""The default schedule of a packed GEMM whose fused epilogue ends in a row-wise normalisation (GEMM + bias +
residual + layer norm, RMS norm or softmax over the N columns; `passes/fusion_rules.py` says when fusion builds
one): FusionStitching's block composition, the normalisation's reductions computed once per block of whole rows.

The output's rows run in parallel blocks of `mb` rows (the packed GEMM's knob; by default as tall as gives each
core a block, up to 16 tiles: a panel of B is reused by every tile row of a block, which matters as k grows).
Inside a block:
- the pre-norm rows (the product, its bias, residual and other element-wise epilogue inlined) as mb x N: a local
  buffer, or, when the kernel also returns them, the second output's rows written at the same block loop
  (compute_with); either way computed by the packed GEMM's register tiles (mr x nr accumulated over all of k at the
  tile-row loop, the tile's rows unrolled by the same knob as the GEMM's own rule);
- each reduction over the block's rows as vector partials (rfactor over the lanes, as `vectorised_row_reduction`),
  and the values that several later stages read (the centred rows of a layer norm) kept per block;
- the normalised rows written out, vectorised along N.
So the pre-norm value never makes a round trip through memory between two kernels. The A panels are packed at the
root first, as in the GEMM's own rule.
"""

from __future__ import annotations

import math

from ..target import Target
from .knobs import Knobs
from .packed_gemm import row_blocks
from .parallel import parallel_grain, parallel_outer
from .reductions import reduction_work, vectorised_row_reduction
from .rules import kernel_rule
from .schedule import Schedule
from .state import Stage

MAX_TILES_PER_BLOCK = 16  # rows per block at most, in register tiles (the GEMM rule's limit)


@kernel_rule
def schedule_row_epilogue(sch: Schedule, target: Target, knobs: Knobs) -> bool:
    """Schedule a normalised product kernel as the module says; False (nothing done) for any other kernel."""
    stages = sch.state.stages
    padded = next((st for st in stages if st.op.tag == "packed_matmul_tiles"), None)
    reductions = [st for st in stages if st.op.reduce_axes and st is not padded]
    if padded is None or not reductions:
        return False
    out = sch.state.stage(sch.state.outputs[-1].name)
    second = [sch.state.stage(t.name) for t in sch.state.outputs[:-1]]
    pre_norm = second[0] if second else _pre_norm(sch, reductions[0])
    _inline(sch, padded, pre_norm)
    mr, nr = padded.op.attrs["mr"], padded.op.attrs["nr"]
    tiles = padded.tensor.shape[0] // mr
    per_block = max(1, min(MAX_TILES_PER_BLOCK, tiles // target.cores))  # a block per core, as tall as that allows
    mb, mb_d = row_blocks(sch, out, padded.name, mr, per_block, knobs)
    *rows, n = out.tensor.shape
    block = _row_blocks(sch, out, mb)
    blocks = math.prod(rows[:-1]) * -(-rows[-1] // mb_d)  # at the default point (mb is a Var in a sketch)
    parallel_grain(sch, out, [block], [blocks], target, mb_d * n * reduction_work(sch, padded.name), knobs)
    if second:
        _row_blocks(sch, pre_norm, mb)
        sch.compute_with(pre_norm.name, out.name, block)
    else:
        sch.compute_at(pre_norm.name, out.name, block)
    _gemm_tiles(sch, pre_norm, padded, mr, nr, knobs)
    for st in [st for st in sch.state.stages if st.attach is None and st.name not in (out.name, pre_norm.name)]:
        if st.op.reduce_axes:
            vectorised_row_reduction(sch, st, out.name, block, target)
        elif st.op.tag == "pack":
            outer, _, inner = sch.loops(st.name)
            parallel_outer(sch, st, [outer], target, math.prod(st.tensor.shape[1:]))
            sch.vectorize(st.name, inner)
        else:  # read by several later stages: kept per block
            sch.compute_at(st.name, out.name, block)
            sch.vectorize(st.name, sch.loops(st.name)[-1])
    sch.vectorize(out.name, sch.loops(out.name)[-1])
    return True


def _inline(sch: Schedule, padded: Stage, pre_norm: Stage) -> None:
    """Inline every element-wise stage but the pre-norm rows and, after the first reduction, those that several
    stages read (the block keeps them); the packing and the products stay."""
    order = [st.name for st in sch.state.stages]
    first_reduction = min(order.index(st.name) for st in sch.state.stages if st.op.reduce_axes and st is not padded)
    outputs = {t.name for t in sch.state.outputs}
    for st in reversed(sch.state.stages):
        if st.op.reduce_axes or st.op.tag == "pack" or st.name in outputs or st is pre_norm:
            continue
        if order.index(st.name) > first_reduction and len(sch.state.readers(st.tensor)) > 1:
            continue
        sch.compute_inline(st.name)


def _pre_norm(sch: Schedule, first_reduction: Stage) -> Stage:
    """The stage the normalisation reads the epilogue through: the last one before the first reduction that all
    the epilogue stages read after it (by the reductions or the stages that follow them) depend on."""
    order = [st.name for st in sch.state.stages]
    cut = order.index(first_reduction.name)
    names = {st.name: st for st in sch.state.stages}
    ancestors: dict[str, set[str]] = {}
    for st in sch.state.stages[:cut]:
        ancestors[st.name] = {st.name}.union(*(ancestors[t.name] for t in st.op.inputs if t.name in ancestors))
    read_after = {t.name for st in sch.state.stages[cut:] for t in st.op.inputs if t.name in ancestors}
    common = set.intersection(*(ancestors[name] for name in read_after))
    chosen = names[max(common, key=order.index)]
    while chosen.op.tag == "injective" and len(chosen.op.inputs) == 1 and chosen.op.inputs[0].name in common:
        chosen = names[chosen.op.inputs[0].name]  # a view's index would hide the tile's columns from the bounds
    return chosen


def _row_blocks(sch: Schedule, s: Stage, mb) -> str:
    """Split the last row axis of `s` into blocks of `mb` rows and fuse the leading row axes of more than one row
    with the blocks (one of extent 1 stays a loop of its own: fused, its index would be a division the bounds of a
    block's region cannot see through); returns the block loop."""
    *rows, _ = [a.name for a in s.op.axes]
    b0, _ = sch.split(s.name, rows[-1], mb)
    wide = [r for r, e in zip(rows[:-1], s.tensor.shape) if e > 1]
    return sch.fuse(s.name, *wide, b0) if wide else b0


def _gemm_tiles(sch: Schedule, pre_norm: Stage, padded: Stage, mr: int, nr: int, knobs: Knobs) -> None:
    """The pre-norm rows of a block as the packed GEMM's mr x nr register tiles, column panels outside the tile
    rows (a panel of B is reused by the block's rows while it is in cache)."""
    *outer, i, j = sch.loops(pre_norm.name)
    i0, i1 = sch.split(pre_norm.name, i, mr)
    j0, j1 = sch.split(pre_norm.name, j, nr)
    sch.reorder(pre_norm.name, *outer, j0, i0, i1, j1)
    sch.vectorize(pre_norm.name, j1)
    sch.compute_at(padded.name, pre_norm.name, i0)
    pi, pj, pk = sch.loops(padded.name)
    sch.reorder(padded.name, pk, pi, pj)
    if knobs.pick(f"{padded.name}_unroll", (0, 1), 1):
        sch.unroll(padded.name, pi)
    sch.vectorize(padded.name, pj)

