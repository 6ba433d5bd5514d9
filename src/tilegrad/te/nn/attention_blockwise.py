"""Scaled dot-product attention in the blockwise form of the online softmax (FlashDecoding's split-KV): the keys
split into blocks of `key_block`, a softmax per (query row, key block) kept unnormalised, and the blocks merged
per query row by rescaling each with exp(m_b - M). It is the online recurrence's algebra merged in two levels,
written without loop-carried state so that tensor expressions can hold it. Only m_b, l_b and acc_b outlive a key
block. A schedule could keep one block's scores at a time only if one stage made all three (a stage computed at
another's loop is read inside that loop only); schedule/rules_attention.py keeps every key block's scores of a
block of query rows, as the two-pass form does.

Stages, over the broadcast batch axes, with the keys padded to whole blocks (the padding keys hidden, as in
te/nn/attention.py) and indexed (block b, query row i, key in block jj), the blocks outermost so that a
schedule runs each stage block by block:
- `{name}_keys`: K transposed to (D, blocks x key_block) and scaled, and `{name}_values`: V copied to
  (blocks x key_block, Dv), contiguous, as in the two-pass form;
- `{name}_scores` (b, i, jj): Q K^T over D; `{name}_logits`: plus the mask, hidden keys -inf;
- `{name}_bmax` (b, i): m_b, the block's largest logit; `{name}_exp` (b, i, jj): exp(logit - m_b);
- `{name}_bsum` (b, i): l_b, the block's sum of exponentials; `{name}_bacc` (b, i, Dv): acc_b, the block's
  exponentials times V;
- `{name}_max` (i): M = max_b m_b; `{name}_scale` (b, i): exp(m_b - M);
- `{name}_den` (i): sum_b exp(m_b - M) l_b (tag "attention_merge", as M and the scales); `{name}_num` (i, Dv):
  sum_b exp(m_b - M) acc_b (tag "attention_merge_pv");
- the output, num / den (tag "attention_blockwise"), written in `out_layout`.
A block whose every key is hidden has m_b = -inf and shifts by 0 (its exponentials, l_b and acc_b are 0); a row
whose every key is hidden gives zeros, as in the two-pass form.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from . import attention_layout as layouts
from ._arguments import check_float, check_same_dtype
from .attention import attention_shape, packed_values
from .elementwise import broadcast_index

DEFAULT_KEY_BLOCK = 64  # keys per block: a block's scores tile (16 rows x 64 keys, 4 KiB) stays in L1


def attention_blockwise(q: te.Tensor, k: te.Tensor, v: te.Tensor, mask: te.Tensor | None = None,
                        scale: float | None = None, causal: bool = False, name: str = "attention",
                        qkv_layout: str = "bhsd", out_layout: str = "bhsd",
                        key_block: int = DEFAULT_KEY_BLOCK) -> te.Tensor:
    """The same attention as te/nn/attention.attention (same operands, layouts and result), its softmax merged
    from blocks of `key_block` keys."""
    logical = [layouts.logical_shape(t.shape, qkv_layout, label) for t, label in zip((q, k, v), "qkv")]
    batch, (lq, d), (lk, dv) = attention_shape(*logical, None if mask is None else mask.shape)
    out_shape = layouts.output_shape((*batch, lq, dv), out_layout)
    check_float(q, "attention")
    check_same_dtype([t for t in (q, k, v, mask) if t is not None], "attention")
    if key_block < 1:
        raise ShapeError(f"attention: key_block must be at least 1, got {key_block}")
    factor = E.const(d ** -0.5 if scale is None else float(scale), q.dtype)
    nb, blocks = len(batch), -(-lk // key_block)
    padded = blocks * key_block != lk
    lowest, zero = E.const(float("-inf"), q.dtype), E.const(0.0, q.dtype)

    def at(t: te.Tensor, slot: int, lead, row, col):  # slot: 0 for Q, 1 for K, 2 for V
        return t[layouts.element(qkv_layout, slot, broadcast_index(logical[slot][:-2], lead), row, col)]

    def key(j):  # a padding key reads the last real one, so that no read leaves K (or the mask)
        return E.minimum(j, lk - 1) if padded else j

    def scaled_key(*i):
        x = at(k, 1, i[:nb], key(i[nb + 1]), i[nb]) * factor
        return E.select(i[nb + 1] < lk, x, zero) if padded else x
    keys = te.compute((*batch, d, blocks * key_block), scaled_key, name=f"{name}_keys", tag="attention_keys")
    values = packed_values(v, at, batch, lk, blocks * key_block, dv, name)
    tile = (*batch, blocks, lq, key_block)
    r = te.reduce_axis(d, "r")
    scores = te.compute(tile, lambda *i: te.sum(at(q, 0, i[:nb], i[nb + 1], r) * keys[(*i[:nb], r, i[nb] * key_block + i[-1])],
                                                axis=r), name=f"{name}_scores", tag="attention_scores")
    logits = scores
    if mask is not None or causal or padded:
        def masked(*i):
            x, j = scores[i], i[nb] * key_block + i[-1]
            if mask is not None:
                x = x + mask[broadcast_index(mask.shape, (*i[:nb], i[nb + 1], key(j)))]
            if causal:  # hides the padding keys too: j >= Lk > i + Lk - Lq
                x = E.select(j > i[nb + 1] + (lk - lq), lowest, x)
            elif padded:
                x = E.select(j < lk, x, lowest)
            return x
        logits = te.compute(tile, masked, name=f"{name}_logits", tag="attention_logits")
    hiding = mask is not None or causal or padded  # a block may be all hidden; padding alone hides no row

    def shifted(x, m):  # x - m, where an all-hidden m (-inf) shifts by 0 so that exp gives 0, not NaN
        return x - (E.select(m.eq(lowest), zero, m) if hiding else m)
    jm = te.reduce_axis(key_block, "jj")
    bmax = te.compute(tile[:-1], lambda *i: te.max(logits[(*i, jm)], axis=jm), name=f"{name}_bmax", tag="reduce")
    exps = te.compute(tile, lambda *i: E.exp(shifted(logits[i], bmax[i[:-1]])), name=f"{name}_exp",
                      tag="attention_exp")
    js = te.reduce_axis(key_block, "jj")
    bsum = te.compute(tile[:-1], lambda *i: te.sum(exps[(*i, js)], axis=js), name=f"{name}_bsum", tag="reduce")
    ja = te.reduce_axis(key_block, "jj")
    bacc = te.compute((*tile[:-1], dv), lambda *i: te.sum(
        exps[(*i[:-1], ja)] * values[(*i[:nb], i[nb] * key_block + ja, i[-1])], axis=ja),
        name=f"{name}_bacc", tag="attention_pv")
    rows = (*batch, lq)

    def per_block(t: te.Tensor, i, b):  # element (b, row) of a per-block stage, for row index i = (batch..., row)
        return t[(*i[:nb], b, i[nb])]
    bm = te.reduce_axis(blocks, "b")
    row_max = te.compute(rows, lambda *i: te.max(per_block(bmax, i, bm), axis=bm), name=f"{name}_max",
                         tag="attention_merge")
    weights = te.compute(tile[:-1], lambda *i: E.exp(shifted(bmax[i], row_max[(*i[:nb], i[nb + 1])])),
                         name=f"{name}_scale", tag="attention_merge")
    bd = te.reduce_axis(blocks, "b")
    den = te.compute(rows, lambda *i: te.sum(per_block(weights, i, bd) * per_block(bsum, i, bd), axis=bd),
                     name=f"{name}_den", tag="attention_merge")
    bn = te.reduce_axis(blocks, "b")
    num = te.compute((*rows, dv), lambda *i: te.sum(per_block(weights, i, bn) * bacc[(*i[:nb], bn, *i[nb:])], axis=bn),
                     name=f"{name}_num", tag="attention_merge_pv")
    one = E.const(1.0, q.dtype)

    def normalised(*i):  # a row whose every key is hidden sums to 0 and gives 0, as ONNX's Attention does
        inverse = one / den[i[:-1]]
        return num[i] * (E.select(den[i[:-1]].eq(zero), zero, inverse) if mask is not None or causal else inverse)
    return te.compute(out_shape, lambda *i: normalised(*layouts.output_element(out_layout, i)), name=name,
                      tag="attention_blockwise", attrs={"causal": causal, "masked": mask is not None,
                                                        "out_layout": out_layout, "key_block": key_block,
                                                        "dynamic_queries": isinstance(lq, E.Expr)})
