"""ONNX's own `Attention` (opset 23) as the chain that the attention pass recognises (matmul, scale, mask,
softmax, matmul), so that the pass decides, as for exported models, whether it runs as one attention kernel.
Covered: 4-D (batch, heads, length, head size) and 3-D (batch, length, heads x head size) operands, group-query
heads (`q_num_heads` a multiple of `kv_num_heads`) by broadcasting each key/value head over its group of query
heads (no copies), `scale`, `is_causal`, a boolean or additive `attn_mask`, and the key/value cache (`past_key`,
`past_value`, the `present_*` outputs). The rest (`softcap`, the `qk_matmul_output` output, opset 24's
`nonpad_kv_seqlen`, opset 25's windows) goes through ONNX's function body (frontend/onnx_functions.py), as every
Attention did before. The reader (`onnx.py`) imports this module, which registers it."""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_functions import expand_function
from .onnx_op_table import onnx_op


@onnx_op("Attention")
def _attention(b: B, name, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, *,
               is_causal=0, kv_num_heads=None, q_num_heads=None, qk_matmul_output_mode=0, scale=None, softcap=0.0,
               softmax_precision=None, left_window_size=-1, right_window_size=-1):
    windowed = left_window_size >= 0 or right_window_size >= 0
    if softcap or windowed or b.node_outputs > 3 or nonpad_kv_seqlen is not None:  # no kernel: the function body
        given = {"is_causal": is_causal, "kv_num_heads": kv_num_heads, "q_num_heads": q_num_heads,
                 "qk_matmul_output_mode": qk_matmul_output_mode, "scale": scale, "softcap": softcap,
                 "softmax_precision": softmax_precision}
        if windowed:
            given.update(left_window_size=left_window_size, right_window_size=right_window_size)
        inputs = (q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen)
        return expand_function(b, name, "Attention", inputs, {a: x for a, x in given.items() if x is not None})
    if scale is not None and scale <= 0:
        raise UnsupportedFeatureError(f"node {name!r}: Attention scale={scale} is not supported (ONNX scales Q and K "
                                      f"by its square root; only a positive scale has one)")
    if (past_key is None) != (past_value is None):
        raise ShapeError(f"node {name!r}: Attention takes past_key and past_value together, got only one")
    flat = len(q.shape) == 3
    if flat:
        if not (q_num_heads and kv_num_heads):
            raise ShapeError(f"node {name!r}: 3-D Attention operands need q_num_heads and kv_num_heads")
        q, k, v = (_split_heads(b, f"{name}_{label}", x, heads)
                   for label, x, heads in (("q", q, q_num_heads), ("k", k, kv_num_heads), ("v", v, kv_num_heads)))
    if past_key is not None:
        k = b.op("concat", past_key, k, name=f"{name}_present_key", axis=2)
        v = b.op("concat", past_value, v, name=f"{name}_present_value", axis=2)
    (batch, hq, lq, _), (_, hkv, lk, _) = q.shape, k.shape
    if hq % hkv:
        raise ShapeError(f"node {name!r}: Attention's {hq} query heads are not a multiple of its {hkv} key heads")
    past = 0 if past_key is None else past_key.shape[2]
    bias = _additive_mask(b, name, attn_mask, is_causal, past, (lq, lk), q.dtype)
    group = hq // hkv
    if group > 1:  # (B, Hkv, G, L, D) queries against (B, Hkv, 1, L, D) keys: each key head serves its group
        q = b.op("reshape", q, name=f"{name}_q_groups", shape=(batch, hkv, group, lq, q.shape[-1]))
        k = b.op("reshape", k, name=f"{name}_k_groups", shape=(batch, hkv, 1, lk, k.shape[-1]))
        v = b.op("reshape", v, name=f"{name}_v_groups", shape=(batch, hkv, 1, lk, v.shape[-1]))
        if bias is not None:
            bias = _grouped_mask(b, name, bias, hkv, group)
    y = _chain(b, name if not (flat or group > 1) else f"{name}_heads", q, k, v, bias,
               q.shape[-1] ** -0.5 if scale is None else float(scale), attn_mask is not None)
    if group > 1:
        y = b.op("reshape", y, name=name if not flat else f"{name}_heads_merged", shape=(batch, hq, lq, v.shape[-1]))
    if flat:
        y = _merge_heads(b, name, y)
    if b.node_outputs == 1:
        return y
    present = (k, v) if group == 1 else tuple(
        b.op("reshape", x, name=f"{name}_present_{label}_heads", shape=(batch, hkv, lk, x.shape[-1]))
        for label, x in (("key", k), ("value", v)))
    return (y, *present)[:b.node_outputs]


def _split_heads(b: B, name: str, x, heads: int):
    """(B, L, H x D) -> (B, H, L, D)."""
    batch, length, width = x.shape
    if width % heads:
        raise ShapeError(f"node {name!r}: a hidden size of {width} does not split into {heads} heads")
    x = b.op("reshape", x, name=f"{name}_split", shape=(batch, length, heads, width // heads))
    return b.op("transpose", x, name=f"{name}_heads", perm=(0, 2, 1, 3))


def _merge_heads(b: B, name: str, y):
    """(B, H, L, Dv) -> (B, L, H x Dv)."""
    batch, heads, length, dv = y.shape
    y = b.op("transpose", y, name=f"{name}_tokens", perm=(0, 2, 1, 3))
    return b.op("reshape", y, name=name, shape=(batch, length, heads * dv))


def _chain(b: B, name: str, q, k, v, bias, scale: float, guarded: bool):
    """softmax(q k^T * scale + bias) v as the chain models export, which the attention pass makes one kernel where
    that kernel is the faster program; with a mask given, a row whose every key is hidden gives zeros (ONNX's
    rule), not the NaN of a softmax over -inf."""
    rank = len(k.shape)
    root = b.const(np.asarray(math.sqrt(scale), q.dtype), f"{name}_scale_root")  # on Q and K, as ONNX rounds
    kt = b.op("transpose", k, name=f"{name}_keys", perm=(*range(rank - 2), rank - 1, rank - 2))
    logits = b.op("matmul", b.op("mul", q, root, name=f"{name}_q_scaled"),
                  b.op("mul", kt, root, name=f"{name}_keys_scaled"), name=f"{name}_scores")
    if bias is not None:
        logits = b.op("add", logits, bias, name=f"{name}_logits")
    probs = b.op("softmax", logits, name=f"{name}_probs", axis=-1)
    y = b.op("matmul", probs, v, name=f"{name}_weighted" if guarded else name)
    if not guarded:
        return y
    top = b.op("reduce_max", bias, name=f"{name}_bias_max", axes=(-1,), keepdims=1)
    kept = b.op("greater", top, b.const(np.asarray(-np.inf, q.dtype), f"{name}_hidden"), name=f"{name}_row_kept")
    return b.op("where", kept, y, b.const(np.zeros((), q.dtype), f"{name}_zero"), name=name)


def _additive_mask(b: B, name: str, attn_mask, causal: bool, past: int, scores: tuple, dtype: str):
    """The bias added to the scores: a boolean mask as 0 (attend) or -inf (hidden), a float mask as it is, plus
    the causal frontier `key <= query + past` as a constant. None when nothing is added."""
    terms = []
    if attn_mask is not None:
        if attn_mask.dtype == "bool":
            zero = b.const(np.zeros((), dtype), f"{name}_attend")
            hidden = b.const(np.full((), -np.inf, dtype), f"{name}_hidden_key")
            attn_mask = b.op("where", attn_mask, zero, hidden, name=f"{name}_mask_bias")
        elif attn_mask.dtype != dtype:
            attn_mask = b.op("cast", attn_mask, name=f"{name}_mask_cast", to=dtype)
        terms.append(attn_mask)
    if causal:
        lq, lk = scores
        hidden = np.arange(lk)[None, :] > np.arange(lq)[:, None] + past
        terms.append(b.const(np.where(hidden, -np.inf, 0).astype(dtype), f"{name}_causal_bias"))
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else b.op("add", *terms, name=f"{name}_bias")


def _grouped_mask(b: B, name: str, mask, kv_heads: int, group: int):
    """A mask over (B, Hq, Lq, Lk) reshaped to the grouped scores (B, Hkv, G, Lq, Lk)."""
    shape = (1,) * (4 - len(mask.shape)) + tuple(mask.shape)
    heads = (1, 1) if shape[1] == 1 else (kv_heads, group)
    return b.op("reshape", mask, name=f"{name}_mask_groups", shape=(shape[0], *heads, *shape[2:]))
