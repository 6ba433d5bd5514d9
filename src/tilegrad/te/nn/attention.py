"""Scaled dot-product attention, softmax(Q K^T * scale + mask) V, as one chain of computes that a schedule runs per
block of query rows.

Stages, all over the broadcast batch axes of Q, K, V (and the mask). A fixed keys axis of the score-shaped stages
is padded to whole vectors (`KEYS_PADDED_TO`), the padding keys hidden (logit -inf, exponential 0), so the row
reductions and the scores' register tiles run over whole vectors without tails (a dynamic one is not padded):
- `{name}_keys`: K transposed to (D, Lk padded with zeros) and multiplied by `scale`, so the scores' inner loop
  runs along the keys (contiguous, vectorised) and the scale costs nothing per score;
- `{name}_values`: V copied to (Lk padded with zeros, Dv), contiguous per head: read in place, a projection's V
  has rows several KiB apart (3 x 384 floats in Whisper's fused QKV), whose lines share a few L1 sets and
  evict each other within a block of keys;
- `{name}_scores`: Q K^T over D, one row of scores per query;
- `{name}_logits` (only with a mask, `causal` or padding keys): the scores plus the additive mask, the keys past
  a query's position (and the padding keys) set to -inf;
- `{name}_max`, `{name}_exp` (exp(logit - max)), `{name}_expsum`: the stable softmax's pieces, kept unnormalised;
- `{name}_pv`: the exponentials times the values, summed over the (real) keys;
- the output, `{name}_pv` times the reciprocal of the row's sum (tag "attention"), written in `out_layout`.
Every stage works on the logical form (batch..., L, D); only the reads of Q, K, V and the output's index follow
the layouts in memory (te/nn/attention_layout.py), so a head split or merge costs no kernel of its own.
A row whose every key is hidden (by the mask or `causal`) gives zeros, as ONNX's Attention defines it.
The rule for tag "attention" (schedule/rules_attention.py) computes every stage per block of query rows, so the
scores live only in that block's local buffers and never in memory.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from . import attention_layout as layouts
from ._arguments import check_float, check_same_dtype
from .elementwise import broadcast_index, broadcast_shape

KEYS_PADDED_TO = 16  # floats: two AVX2 vectors, one AVX-512 vector


def attention(q: te.Tensor, k: te.Tensor, v: te.Tensor, mask: te.Tensor | None = None, scale: float | None = None,
              causal: bool = False, name: str = "attention", qkv_layout: str = "bhsd",
              out_layout: str = "bhsd") -> te.Tensor:
    """softmax(q k^T * scale + mask) v over q (..., Lq, D), k (..., Lk, D), v (..., Lk, Dv); the leading axes
    broadcast as in matmul and `mask` broadcasts to (..., Lq, Lk). `scale` defaults to 1/sqrt(D); `causal` hides
    the keys after each query's position (key j > query i + Lk - Lq). Q, K, V are read in `qkv_layout` and the
    output written in `out_layout` (te/nn/attention_layout.py); the shapes above are the logical ones."""
    logical = [layouts.logical_shape(t.shape, qkv_layout, label) for t, label in zip((q, k, v), "qkv")]
    batch, (lq, d), (lk, dv) = attention_shape(*logical, None if mask is None else mask.shape)
    out_shape = layouts.output_shape((*batch, lq, dv), out_layout)
    check_float(q, "attention")
    check_same_dtype([t for t in (q, k, v, mask) if t is not None], "attention")
    factor = E.const(d ** -0.5 if scale is None else float(scale), q.dtype)
    nb = len(batch)

    def at(t: te.Tensor, slot: int, lead, row, col):  # slot: 0 for Q, 1 for K, 2 for V
        return t[layouts.element(qkv_layout, slot, broadcast_index(logical[slot][:-2], lead), row, col)]

    # A dynamic Lk is not padded: its select and clamped reads would sit in every element of the hot loops (a
    # clamped index is no longer contiguous to the compiler); its last partial vector is a tail of the loops.
    dynamic = isinstance(lk, E.Expr)
    lkp = lk if dynamic else -(-lk // KEYS_PADDED_TO) * KEYS_PADDED_TO
    padded = not dynamic and lkp != lk
    lowest = E.const(float("-inf"), q.dtype)
    zero = E.const(0.0, q.dtype)

    def key(j):  # a padding key reads the last real one, so that no read leaves K (or the mask)
        return E.minimum(j, lk - 1) if padded else j

    def scaled_key(*i):
        x = at(k, 1, i[:nb], key(i[nb + 1]), i[nb]) * factor
        return E.select(i[nb + 1] < lk, x, zero) if padded else x
    keys = te.compute((*batch, d, lkp), scaled_key, name=f"{name}_keys", tag="attention_keys")
    values = packed_values(v, at, batch, lk, lkp, dv, name)
    r = te.reduce_axis(d, "r")
    scores = te.compute((*batch, lq, lkp), lambda *i: te.sum(at(q, 0, i[:nb], i[nb], r) * keys[(*i[:nb], r, i[nb + 1])],
                                                             axis=r), name=f"{name}_scores", tag="attention_scores")
    logits = scores
    if mask is not None or causal or padded:
        def masked(*i):
            x = scores[i]
            if mask is not None:
                x = x + mask[broadcast_index(mask.shape, (*i[:-1], key(i[-1])))]
            if causal:  # hides the padding keys too: j >= Lk > i + Lk - Lq
                x = E.select(i[nb + 1] > i[nb] + (lk - lq), lowest, x)
            elif padded:
                x = E.select(i[nb + 1] < lk, x, lowest)
            return x
        logits = te.compute(scores.shape, masked, name=f"{name}_logits", tag="attention_logits")
    j = te.reduce_axis(lkp, "j")
    maxes = te.compute((*batch, lq), lambda *i: te.max(logits[(*i, j)], axis=j), name=f"{name}_max", tag="reduce")
    hiding = mask is not None or causal  # padding alone hides no row: every row has a real key

    def shift(*i):  # a row whose every key is hidden shifts by 0, so its exponentials are 0, not NaN
        m = maxes[i[:-1]]
        return logits[i] - (E.select(m.eq(lowest), zero, m) if hiding else m)
    exps = te.compute(scores.shape, lambda *i: E.exp(shift(*i)), name=f"{name}_exp", tag="attention_exp")
    js = te.reduce_axis(lkp, "j")
    sums = te.compute((*batch, lq), lambda *i: te.sum(exps[(*i, js)], axis=js), name=f"{name}_expsum", tag="reduce")
    jv = te.reduce_axis(lk, "j")
    pv = te.compute((*batch, lq, dv), lambda *i: te.sum(exps[(*i[:-1], jv)] * values[(*i[:nb], jv, i[-1])], axis=jv),
                    name=f"{name}_pv", tag="attention_pv")
    one = E.const(1.0, q.dtype)

    def normalised(*i):  # a row whose every key is hidden sums to 0 and gives 0, as ONNX's Attention does
        inverse = one / sums[i[:-1]]
        return pv[i] * (E.select(sums[i[:-1]].eq(zero), zero, inverse) if hiding else inverse)
    return te.compute(out_shape, lambda *i: normalised(*layouts.output_element(out_layout, i)), name=name,
                      tag="attention", attrs={"causal": causal, "masked": mask is not None, "out_layout": out_layout,
                                             "dynamic_queries": isinstance(lq, E.Expr)})


def packed_values(v: te.Tensor, at, batch: tuple, lk: int, rows: int, dv: int, name: str) -> te.Tensor:
    """V as (batch..., `rows`, Dv), its rows past the `lk` keys zero: the `{name}_values` stage. `at(v, 2, lead,
    row, col)` reads V in its layout."""
    nb = len(batch)

    def value(*i):
        if rows == lk:
            return at(v, 2, i[:nb], i[nb], i[nb + 1])
        x = at(v, 2, i[:nb], E.minimum(i[nb], lk - 1), i[nb + 1])  # no read leaves V
        return E.select(i[nb] < lk, x, E.const(0.0, v.dtype))
    return te.compute((*batch, rows, dv), value, name=f"{name}_values", tag="attention_values")


def attention_shape(q: tuple, k: tuple, v: tuple, mask: tuple | None) -> tuple[tuple, tuple, tuple]:
    """(batch, (Lq, D), (Lk, Dv)) of an attention over these shapes; a ShapeError says which operand is off."""
    for label, shape in (("q", q), ("k", k), ("v", v)):
        if len(shape) < 2:
            raise ShapeError(f"attention: {label} needs at least 2 dimensions (..., L, D), got shape {shape}")
    (lq, d), (lk, dk), (lv, dv) = q[-2:], k[-2:], v[-2:]
    if dk != d:
        raise ShapeError(f"attention: q and k must share their last extent (D), got shapes {q} and {k}")
    if lv != lk:
        raise ShapeError(f"attention: k and v must have as many rows (keys), got shapes {k} and {v}")
    batch = broadcast_shape(broadcast_shape(q[:-2], k[:-2]), v[:-2])
    if mask is not None:
        full = (*batch, lq, lk)
        if len(mask) > len(full) or broadcast_shape(mask, full) != full:
            raise ShapeError(f"attention: the mask of shape {mask} does not broadcast to the scores {full}")
    return tuple(batch), (lq, d), (lk, dv)
