"""The default schedule of the attention compute (te/nn/attention.py): every stage per block of query rows.

The output's batch axes and blocks of `rows` query rows run in parallel; inside a block, K^T (scaled), the
scores, the masked logits, the row maxima, the exponentials, their sums and the weighted values are computed into
local buffers of that block (compute_at the block loop), so the score matrix never reaches memory. The two
products accumulate along their contiguous axis as vectors: the scores along the keys (K^T is the block's local
transposed copy), the weighted values along Dv. The rows per block is a parameter, so the tuner can trade the
reuse of K and V across rows against the size of the block's buffers.
"""

from __future__ import annotations

from ..target import Target
from .defaults import Anchor, _extent, _values, parallel_grain, rule
from .knobs import Knobs
from .schedule import Schedule
from .state import Stage

ROWS_PER_BLOCK = 16  # query rows per block: K^T is recopied per block, so fewer rows would repeat it more often


@rule("attention")
def schedule_attention(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """Blocks of query rows in parallel with the batch axes, each computing its whole chain in local buffers."""
    axes = [a.name for a in s.op.axes]
    if s.op.attrs.get("out_layout") == "bshd":  # (B, Lq, H, Dv): the heads run outside the blocks of query rows
        b, i, h, e = axes
        batch = [b, h]
        sch.reorder(s.name, b, h, i, e)
    else:
        *batch, i, e = axes
    lq, dv = _extent(s, i), _extent(s, e)
    rows_d = min(lq, ROWS_PER_BLOCK)
    rows = knobs.choice(f"{s.name}_rows", _values(rows_d, (1, 2, 4, 8, 16, 32, 64), lq), rows_d)
    i0, i1 = sch.split(s.name, i, rows)
    producers = [p for p in sch.state.stages if p.attach is None and p.name != s.name]
    *_, d, lk = _tagged(producers, "attention_keys").tensor.shape  # K^T: (..., D, Lk)
    extents = [_extent(s, b) for b in batch] + [-(-lq // rows_d)]
    parallel_grain(sch, s, [*batch, i0], extents, target, rows_d * lk * (d + dv), knobs)
    sch.vectorize(s.name, e)
    loops = sch.loops(s.name)
    block = loops[loops.index(i1) - 1]  # i0, or the parallel loop it was fused into
    for p in producers:
        sch.compute_at(p.name, s.name, block)
        spatial = [a.name for a in p.op.axes]
        reduce = [a.name for a in p.op.reduce_axes]
        if p.op.tag in ("attention_scores", "attention_pv"):  # accumulate along the contiguous output axis
            sch.reorder(p.name, *spatial[:-1], *reduce, spatial[-1])
            sch.vectorize(p.name, spatial[-1])
        elif not reduce:
            sch.vectorize(p.name, spatial[-1])


def _tagged(stages: list[Stage], tag: str) -> Stage:
    return next(p for p in stages if p.op.tag == tag)
