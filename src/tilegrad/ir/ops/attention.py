"""`attention`: scaled dot-product attention, softmax(q k^T * scale + mask) v, made by the recognise_attention
pass from the matmul, scale, mask, softmax, matmul chains that PyTorch and Hugging Face export. It is one kernel
(te/nn/attention.py, scheduled per block of query rows), so the score matrix is never written to memory.

q is (..., Lq, D), k (..., Lk, D) (not transposed), v (..., Lk, Dv); the leading axes broadcast as in matmul. The
optional fourth input is an additive mask that broadcasts to the scores (..., Lq, Lk). Those are the logical
shapes: `qkv_layout` "bshd" reads q, k, v as (B, L, H, D), "bs3hd" as (B, L, 3, H, D) (a fused QKV projection,
passed as all three), and `out_layout` "bshd" writes (B, Lq, H, Dv), the layouts of the projections around the
attention, whose head split and merge then cost no kernel (te/nn/attention_layout.py). `scale` None means
1/sqrt(D); `causal` hides the keys after each query's position (key j > query i + Lk - Lq); a query whose every
key is hidden gives zeros (ONNX's Attention), not NaN. Half-precision
operands are computed in float32 and rounded once, as the matmuls they replace accumulate. `form` picks the
kernel's softmax, the same result either way: "two_pass" holds whole rows of scores per block of query rows
(te/nn/attention.py), "blockwise" merges per-key-block softmaxes of `key_block` keys, the online softmax in
FlashDecoding's split form (te/nn/attention_blockwise.py).
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te import nn
from ...te.nn import attention_layout as layouts
from ..registry import OPAQUE, Sample, TensorType, declare
from .operands import float_dtype, widened


def _attention_type(q, k, v, mask=None, *, scale, causal, qkv_layout, out_layout, **_):
    dtype = float_dtype(q, k, v, mask)
    logical = [layouts.logical_shape(x.shape, qkv_layout, label) for x, label in zip((q, k, v), "qkv")]
    batch, (lq, _), (_, dv) = nn.attention_shape(*logical, None if mask is None else mask.shape)
    return [TensorType(layouts.output_shape((*batch, lq, dv), out_layout), dtype)]


def _logical(x: np.ndarray, layout: str, slot: int) -> np.ndarray:
    """Operand `slot` (0 for q, 1 for k, 2 for v) given in `layout`, in its logical form (..., L, D)."""
    if layout == "bs3hd":
        x = x[:, :, slot]
    return x if layout == "bhsd" else x.swapaxes(1, 2)


def _attention_ref(q, k, v, mask=None, *, scale, causal, qkv_layout, out_layout, **_):
    dtype = q.dtype
    q, k, v = (_logical(x, qkv_layout, slot) for slot, x in enumerate((q, k, v)))
    wide = [None if x is None else x.astype(np.float64) for x in (q, k, v, mask)]
    factor = q.shape[-1] ** -0.5 if scale is None else scale
    logits = np.matmul(wide[0], np.swapaxes(wide[1], -1, -2)) * factor
    if mask is not None:
        logits = logits + wide[3]
    lq, lk = logits.shape[-2:]
    if causal:
        hidden = np.arange(lk)[None, :] > np.arange(lq)[:, None] + (lk - lq)
        logits = np.where(hidden, -np.inf, logits)
    top = logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits - np.where(np.isneginf(top), 0, top))
    sums = weights.sum(axis=-1, keepdims=True)
    weights = np.divide(weights, sums, out=np.zeros_like(weights), where=sums > 0)
    out = np.matmul(weights, wide[2]).astype(dtype)
    return out.swapaxes(1, 2) if out_layout == "bshd" else out


def _attention_te(q, k, v, mask=None, *, scale, causal, form="two_pass", key_block=nn.DEFAULT_KEY_BLOCK, **layout):
    if form == "blockwise":
        return nn.attention_blockwise(q, k, v, mask, scale=scale, causal=causal, key_block=key_block, **layout)
    if form != "two_pass":
        raise ShapeError(f"attention: form must be 'two_pass' or 'blockwise', got {form!r}")
    return nn.attention(q, k, v, mask, scale=scale, causal=causal, **layout)


def _attention_flops(ins, outs, *, qkv_layout, **_) -> int:
    """Two products: Lq x Lk x D multiply-adds for the scores, Lq x Lk x Dv for the weighted values (the output's
    elements are the query rows times Dv, in either layout)."""
    *rows, dv = outs[0].shape
    d, lk = ins[0].shape[-1], layouts.logical_shape(ins[1].shape, qkv_layout, "k")[-2]
    return 2 * int(np.prod(rows, dtype=np.int64)) * lk * (d + dv)


declare("attention", kind=OPAQUE,
        attrs={"scale": None, "causal": False, "qkv_layout": "bhsd", "out_layout": "bhsd", "form": "two_pass",
               "key_block": nn.DEFAULT_KEY_BLOCK}, infer=_attention_type,
        reference=_attention_ref, compute=widened(_attention_te), num_inputs=(3, 4), flops=_attention_flops,
        samples=(Sample((((1, 2, 7, 8), "float32"), ((1, 2, 5, 8), "float32"), ((1, 2, 5, 6), "float32"))),
                 Sample((((2, 3, 9, 16), "float32"), ((2, 3, 9, 16), "float32"), ((2, 3, 9, 16), "float32"),
                         ((2, 1, 1, 9), "float32")), {"scale": 0.3}),
                 Sample((((4, 17, 8), "float32"), ((4, 17, 8), "float32"), ((4, 17, 8), "float32")),
                        {"causal": True}),
                 Sample((((2, 7, 3, 8), "float32"), ((2, 5, 3, 8), "float32"), ((2, 5, 3, 6), "float32"),
                         ((2, 1, 1, 5), "float32")), {"qkv_layout": "bshd", "out_layout": "bshd"}),
                 Sample((((1, 9, 3, 2, 8), "float32"),) * 3, {"qkv_layout": "bs3hd", "out_layout": "bshd",
                                                              "causal": True}),
                 Sample((((1, 9, 3, 2, 8), "float32"),) * 3, {"qkv_layout": "bs3hd"})))
