"""The attention kernel reading Q, K, V in the projections' layouts (bshd, the fused bs3hd) and writing its output
as bshd (te/nn/attention_layout.py), against PyTorch's scaled_dot_product_attention on the logical form: odd
sequence lengths, one to three heads, masked or not, causal or not; and the layouts' shape errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import kernel
from tilegrad.errors import ShapeError
from tilegrad.ir.registry import lookup
from tilegrad.loop import ir as L
from tilegrad.schedule.rules_attention import rows_per_block
from tilegrad.target import host
from tilegrad.te import tensor as te
from tilegrad.te.nn import attention_layout as layouts


def _logical(x: np.ndarray, layout: str, slot: int) -> torch.Tensor:
    """An operand as SDPA takes it, (B, H, L, D)."""
    if layout == "bs3hd":
        x = x[:, :, slot]
    return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1, 3) if layout != "bhsd" else x))


def _sdpa(arrays, layout, out_layout, causal):
    q, k, v = (_logical(x, layout, slot) for slot, x in enumerate(arrays[:3]))
    mask = torch.from_numpy(arrays[3]) if len(arrays) > 3 else None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal).numpy()
    return out.transpose(0, 2, 1, 3) if out_layout == "bshd" else out


def _built(shapes, **attrs):
    ins = [te.placeholder(s, "float32", name) for s, name in zip(shapes, ("q", "k", "v", "mask"))]
    out = lookup("attention").compute(*ins, scale=None, **attrs)
    return out, kernel.build((ins, [out]), name="attention")


@settings(max_examples=12, deadline=None)
@given(batch=st.integers(1, 2), lq=st.sampled_from([1, 3, 7, 17]), lk=st.sampled_from([1, 5, 9, 33]),
       heads=st.integers(1, 3), d=st.sampled_from([1, 4, 8, 16]), layout=st.sampled_from(["bshd", "bs3hd"]),
       out_layout=st.sampled_from(["bhsd", "bshd"]), masked=st.booleans(), causal=st.booleans())
def test_layouts_match_torch(batch, lq, lk, heads, d, layout, out_layout, masked, causal):
    if layout == "bs3hd" or causal:
        lk = lq  # one fused projection gives as many keys as queries; SDPA's causal mask is square
    if layout == "bs3hd":
        shapes = [(batch, lq, 3, heads, d)] * 3
    else:
        shapes = [(batch, lq, heads, d), (batch, lk, heads, d), (batch, lk, heads, d + 1)]
    if masked:
        shapes.append((batch, 1, 1, lk))
    rng = np.random.default_rng(lq * lk + heads)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    out, k = _built(shapes, causal=causal and not masked, qkv_layout=layout, out_layout=out_layout)
    want = _sdpa(arrays, layout, out_layout, causal and not masked)
    assert tuple(out.shape) == want.shape
    np.testing.assert_allclose(k.run(*arrays), want, atol=1e-5, rtol=1e-4)


def test_a_fused_projection_passed_three_times_reads_its_three_slots():
    x = np.random.default_rng(3).standard_normal((2, 11, 3, 2, 8)).astype(np.float32)
    _, k = _built([x.shape] * 3, causal=True, qkv_layout="bs3hd", out_layout="bshd")
    np.testing.assert_allclose(k.run(x, x, x), _sdpa([x] * 3, "bs3hd", "bshd", True), atol=1e-5, rtol=1e-4)


def test_heads_of_keys_and_values_broadcast_over_the_query_heads():
    shapes = [(1, 6, 4, 8), (1, 9, 1, 8), (1, 9, 1, 8)]
    arrays = [np.random.default_rng(4).standard_normal(s).astype(np.float32) for s in shapes]
    _, k = _built(shapes, causal=False, qkv_layout="bshd", out_layout="bshd")
    wide = [arrays[0]] + [np.repeat(a, 4, axis=2) for a in arrays[1:]]
    np.testing.assert_allclose(k.run(*arrays), _sdpa(wide, "bshd", "bshd", False), atol=1e-5, rtol=1e-4)


def _local_shape(stmt, name):
    """The shape of the buffer `name` allocated in a loop-IR statement, if it is local; else None."""
    if isinstance(stmt, L.Allocate) and stmt.buffer.name == name:
        return [int(d.value) for d in stmt.buffer.shape] if stmt.buffer.scope == "local" else None
    children = {L.For: lambda s: [s.body], L.Allocate: lambda s: [s.body], L.Seq: lambda s: s.stmts,
                L.IfThenElse: lambda s: [s.then, s.orelse]}.get(type(stmt), lambda s: [])(stmt)
    return next((found for c in children if c is not None and (found := _local_shape(c, name)) is not None), None)


def test_the_output_written_as_bshd_keeps_the_scores_of_a_head_and_row_block_local():
    """The heads run outside the blocks of query rows, so a block's scores are one head's rows of a block."""
    _, k = _built([(1, 197, 3, 12, 64)] * 3, causal=False, qkv_layout="bs3hd", out_layout="bshd")
    assert [p.name for p in k.loop.params] == ["q", "k", "v", "attention"]  # nothing else goes to memory
    rows = rows_per_block(host())
    assert _local_shape(k.loop.body, "attention_scores") == [1, 1, rows, 208]  # 197 keys padded to 16 floats
    assert k.source.index("tg_loop_begin(tg, ") < k.source.index("attention_scores[")


@pytest.mark.parametrize("shape, layout, message", [
    ((2, 5, 3), "bshd", "q in layout 'bshd' must be (B, L, H, D), got shape (2, 5, 3)"),
    ((2, 5, 2, 3, 4), "bs3hd", "q in layout 'bs3hd' must be (B, L, 3, H, D), got shape (2, 5, 2, 3, 4)"),
    ((2, 5, 3, 4), "bhds", "qkv_layout must be one of bhsd, bshd, bs3hd, got 'bhds'"),
])
def test_an_operand_off_its_layout_is_a_shape_error(shape, layout, message):
    with pytest.raises(ShapeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        layouts.logical_shape(shape, layout, "q")


def test_an_output_without_a_head_axis_cannot_be_written_as_bshd():
    ins = [te.placeholder((4, 7, 8), "float32", n) for n in "qkv"]
    with pytest.raises(ShapeError, match="out_layout 'bshd' needs one batch and one head axis"):
        lookup("attention").compute(*ins, scale=None, causal=False, out_layout="bshd")
