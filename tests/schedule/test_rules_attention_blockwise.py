"""The blockwise attention kernel (te/nn/attention_blockwise.py under schedule/rules_attention.py's
attention_blockwise rule) against the op's NumPy reference and PyTorch's scaled_dot_product_attention: odd sizes,
key blocks that do not divide the keys, masked, causal, rows and key blocks whose every key is hidden, every
layout, every parameter of the rule; and that its per-key-block state lives in local buffers of a row block."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import kernel
from tilegrad.errors import ShapeError
from tilegrad.ir.registry import lookup
from tilegrad.loop import ir as L
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.rules_attention import rows_per_block
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.target import host
from tilegrad.te import tensor as te

from .strategies import DrawnKnobs
from .test_rules_attention import random_arrays, torch_attention

LAYOUT = {"qkv_layout": "bhsd", "out_layout": "bhsd"}


def _placeholders(shapes):
    return [te.placeholder(s, "float32", name) for s, name in zip(shapes, ("q", "k", "v", "mask"))]


def _build(shapes, key_block, knobs=None, **attrs):
    ins = _placeholders(shapes)
    attrs = {"scale": None, "causal": False, **LAYOUT, **attrs}
    out = lookup("attention").compute(*ins, form="blockwise", key_block=key_block, **attrs)
    trace = None if knobs is None else default_schedule([out], host(), knobs).trace
    return out, kernel.build((ins, [out]), trace, name="attention"), attrs


def _reference(arrays, attrs):
    return lookup("attention").reference(*arrays, **attrs)


def test_the_form_attribute_picks_the_blockwise_compute():
    out, _, _ = _build([(1, 2, 9, 8)] * 3, 4)
    assert out.op.tag == "attention_blockwise" and out.op.attrs["key_block"] == 4
    ins = _placeholders([(1, 2, 9, 8)] * 3)
    assert lookup("attention").compute(*ins, scale=None, causal=False, **LAYOUT).op.tag == "attention"
    with pytest.raises(ShapeError, match="form must be"):
        lookup("attention").compute(*ins, scale=None, causal=False, form="online", key_block=4, **LAYOUT)
    with pytest.raises(ShapeError, match="key_block must be at least 1"):
        lookup("attention").compute(*ins, scale=None, causal=False, form="blockwise", key_block=0, **LAYOUT)


@pytest.mark.parametrize("key_block", [1, 5, 16, 21, 64])
def test_matches_torch_with_a_mask_at_key_blocks_that_do_not_divide_the_keys(key_block):
    shapes = [(2, 3, 9, 16), (2, 3, 21, 16), (2, 3, 21, 8), (2, 1, 9, 21)]
    arrays = random_arrays(shapes)
    _, k, _ = _build(shapes, key_block, scale=0.3)
    np.testing.assert_allclose(k.run(*arrays), torch_attention(*arrays, scale=0.3), atol=1e-5, rtol=1e-4)


def test_causal_matches_torch_is_causal():
    shapes = [(1, 2, 37, 8)] * 3
    arrays = random_arrays(shapes)
    _, k, _ = _build(shapes, 16, causal=True)  # the first rows' later key blocks are all hidden
    np.testing.assert_allclose(k.run(*arrays), torch_attention(*arrays, is_causal=True), atol=1e-5, rtol=1e-4)


def test_hidden_rows_give_zeros_and_hidden_key_blocks_count_nothing():
    shapes = [(1, 2, 9, 8), (1, 2, 40, 8), (1, 2, 40, 8), (1, 1, 9, 40)]
    arrays = random_arrays(shapes)
    arrays[3][:, :, 4, :] = -np.inf  # query 4 sees no key
    arrays[3][:, :, :, 8:24] = -np.inf  # with key_block 8, blocks 1 and 2 are hidden for every query
    _, k, attrs = _build(shapes, 8)
    got = k.run(*arrays)
    assert not got[:, :, 4].any() and np.isfinite(got).all()
    np.testing.assert_allclose(got, _reference(arrays, attrs), atol=1e-5, rtol=1e-4)


def test_large_logits_stay_finite():
    shapes = [(1, 1, 5, 4), (1, 1, 30, 4), (1, 1, 30, 3)]
    arrays = random_arrays(shapes)
    arrays[0] *= 40.0  # logits in the hundreds: exp overflows unless each block and the merge are shifted
    _, k, attrs = _build(shapes, 7)
    np.testing.assert_allclose(k.run(*arrays), _reference(arrays, attrs), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("qkv_layout, out_layout, causal", [("bshd", "bshd", False), ("bshd", "bhsd", True),
                                                            ("bs3hd", "bshd", True), ("bs3hd", "bhsd", False)])
def test_every_layout_matches_the_reference(qkv_layout, out_layout, causal):
    if qkv_layout == "bs3hd":
        shapes = [(2, 19, 3, 3, 8)] * 3
    else:
        shapes = [(2, 19, 3, 8), (2, 23, 3, 8), (2, 23, 3, 5), (2, 1, 1, 23)]
    arrays = random_arrays(shapes)
    if qkv_layout == "bs3hd":
        arrays = [arrays[0]] * 3  # one fused QKV tensor passed as all three operands
    _, k, attrs = _build(shapes, 6, causal=causal, qkv_layout=qkv_layout, out_layout=out_layout)
    np.testing.assert_allclose(k.run(*arrays), _reference(arrays, attrs), atol=1e-5, rtol=1e-4)



@settings(max_examples=12, deadline=None)
@given(lq=st.integers(1, 40), lk=st.sampled_from([1, 5, 16, 23, 40, 197]), d=st.sampled_from([1, 5, 8, 13, 64]),
       dv=st.sampled_from([1, 3, 8, 17, 64]), heads=st.integers(1, 3), key_block=st.sampled_from([1, 3, 8, 16, 24, 64]),
       form=st.sampled_from(["plain", "mask", "causal"]), data=st.data())
def test_every_parameter_of_the_rule_matches_numpy_and_torch(lq, lk, d, dv, heads, key_block, form, data):
    shapes = [(1, heads, lq, d), (1, heads, lk, d), (1, heads, lk, dv)] + ([(1, 1, lq, lk)] if form == "mask" else [])
    arrays = random_arrays(shapes, seed=lq * 1000 + lk)
    causal = form == "causal"
    knobs = DrawnKnobs(data)
    _, k, attrs = _build(shapes, key_block, knobs, causal=causal)
    got = k.run(*arrays)
    np.testing.assert_allclose(got, _reference(arrays, attrs), atol=1e-5, rtol=1e-4, err_msg=str(knobs.drawn))
    if causal and lk != lq:  # torch's is_causal aligns the queries with the first keys, the op with the last
        return
    np.testing.assert_allclose(got, torch_attention(*arrays, is_causal=causal), atol=1e-5, rtol=1e-4, err_msg=str(knobs.drawn))


def test_per_block_state_lives_in_local_buffers_of_a_row_block_and_one_key_block_of_scores():
    _, k, _ = _build([(1, 12, 197, 64)] * 3, 64)
    assert [p.name for p in k.loop.params] == ["q", "k", "v", "attention"]  # nothing else goes to memory
    buffers = {n.buffer.name: n.buffer for n in L.walk(k.loop.body) if isinstance(n, L.Allocate)}
    extents = {name: [int(d.value) for d in b.shape] for name, b in buffers.items()}
    assert all(b.scope == "local" for b in buffers.values())
    rows, lanes = rows_per_block(host()), host().vector_lanes
    assert extents["attention_bmax"] == extents["attention_bsum"] == [1, 1, 4, rows]  # 4 key blocks x rows
    assert extents["attention_bacc"] == [1, 1, 4, rows, 64]  # acc_b: key blocks x rows x Dv
    assert extents["attention_scores"] == extents["attention_exp"] == [1, 1, 1, rows, 64]  # one key block at a time
    tile = [6 if host().vector_registers <= 16 else 8, 2 * lanes]  # AVX2's 6 x 2 vectors, else 8 x 2 (of 64)
    assert extents["attention_bacc_local"] == [1, 1, 1, *tile]  # acc_b's register tile
    assert extents["attention_scores_local"] == [1, 1, 1, *tile]  # the scores' register tile
    narrow = host().vector_registers <= 16
    assert extents["attention_num"] == [1, 1, 8, lanes if narrow else 2 * lanes]  # the merge, the output's tile


def test_the_default_sketch_offers_the_rules_parameters():
    def outputs():
        ins = _placeholders([(1, 2, 40, 16)] * 3)
        return [lookup("attention").compute(*ins, scale=None, causal=False, form="blockwise", key_block=16,
                                            **LAYOUT)]

    _, space = generate_sketches(outputs)[0].space({})
    names = {c.var: c for c in space.choices}
    assert names["attention_rows"].default == rows_per_block(host()) and {1, 8, 32} <= set(names["attention_rows"].values)
    assert "attention_bacc_mr" in names and "attention_scores_nr" in names  # both products' register tiles
