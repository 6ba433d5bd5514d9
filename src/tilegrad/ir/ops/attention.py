"""`attention`: scaled dot-product attention, softmax(q k^T * scale + mask) v, made by the recognise_attention
pass from the matmul, scale, mask, softmax, matmul chains that PyTorch and Hugging Face export. It is one kernel
(te/nn/attention.py, scheduled per block of query rows), so the score matrix is never written to memory.

q is (..., Lq, D), k (..., Lk, D) (not transposed), v (..., Lk, Dv); the leading axes broadcast as in matmul. The
optional fourth input is an additive mask that broadcasts to the scores (..., Lq, Lk). `scale` None means
1/sqrt(D); `causal` hides the keys after each query's position (key j > query i + Lk - Lq); a query whose every
key is hidden gives zeros (ONNX's Attention), not NaN. Half-precision
operands are computed in float32 and rounded once, as the matmuls they replace accumulate.
"""

from __future__ import annotations

import numpy as np

from ...te import nn
from ..registry import OPAQUE, Sample, TensorType, declare
from .operands import float_dtype, widened


def _attention_type(q, k, v, mask=None, *, scale, causal):
    dtype = float_dtype(q, k, v, mask)
    batch, (lq, _), (_, dv) = nn.attention_shape(q.shape, k.shape, v.shape, None if mask is None else mask.shape)
    return [TensorType((*batch, lq, dv), dtype)]


def _attention_ref(q, k, v, mask=None, *, scale, causal):
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
    return np.matmul(weights, wide[2]).astype(q.dtype)


def _attention_te(q, k, v, mask=None, *, scale, causal):
    return nn.attention(q, k, v, mask, scale=scale, causal=causal)


def _attention_flops(ins, outs, **_) -> int:
    """Two products: Lq x Lk x D multiply-adds for the scores, Lq x Lk x Dv for the weighted values."""
    (*batch, lq, dv), d, lk = outs[0].shape, ins[0].shape[-1], ins[1].shape[-2]
    return 2 * int(np.prod(batch, dtype=np.int64)) * lq * lk * (d + dv)


declare("attention", kind=OPAQUE, attrs={"scale": None, "causal": False}, infer=_attention_type,
        reference=_attention_ref, compute=widened(_attention_te), num_inputs=(3, 4), flops=_attention_flops,
        samples=(Sample((((1, 2, 7, 8), "float32"), ((1, 2, 5, 8), "float32"), ((1, 2, 5, 6), "float32"))),
                 Sample((((2, 3, 9, 16), "float32"), ((2, 3, 9, 16), "float32"), ((2, 3, 9, 16), "float32"),
                         ((2, 1, 1, 9), "float32")), {"scale": 0.3}),
                 Sample((((4, 17, 8), "float32"), ((4, 17, 8), "float32"), ((4, 17, 8), "float32")),
                        {"causal": True})))
