"""The attention kernel (te/nn/attention.py under schedule/rules_attention.py) against PyTorch's
scaled_dot_product_attention and the op's NumPy reference: with and without a mask, causal, odd sizes, every
parameter of the rule (rows per block, both register tiles, K^T per head or per block) at values that do not divide
their loops; and that its scores stay in local buffers of a block of query rows, its products in register tiles."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import kernel
from tilegrad.ir.registry import lookup
from tilegrad.loop import ir as L
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.rules_attention import rows_per_block
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.target import host
from tilegrad.te import tensor as te

from .strategies import DrawnKnobs


def _kernel(shapes, **attrs):
    ins = [te.placeholder(s, "float32", name) for s, name in zip(shapes, ("q", "k", "v", "mask"))]
    out = lookup("attention").compute(*ins, **{"scale": None, "causal": False, **attrs})
    return ins, out, kernel.build((ins, [out]), name="attention")


def random_arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def torch_attention(q, k, v, mask=None, **kw):
    t = [None if x is None else torch.from_numpy(x) for x in (q, k, v, mask)]
    return F.scaled_dot_product_attention(*t[:3], attn_mask=t[3], **kw).numpy()


def test_matches_torch_without_and_with_a_mask():
    shapes = [(2, 3, 9, 16), (2, 3, 11, 16), (2, 3, 11, 8), (2, 1, 9, 11)]
    arrays = random_arrays(shapes)
    _, _, plain = _kernel(shapes[:3])
    np.testing.assert_allclose(plain.run(*arrays[:3]), torch_attention(*arrays[:3]), atol=1e-5, rtol=1e-4)
    _, _, masked = _kernel(shapes, scale=0.3)
    np.testing.assert_allclose(masked.run(*arrays), torch_attention(*arrays, scale=0.3), atol=1e-5, rtol=1e-4)


def test_causal_matches_torch_is_causal():
    shapes = [(1, 2, 13, 8)] * 3
    arrays = random_arrays(shapes)
    _, _, causal = _kernel(shapes, causal=True)
    np.testing.assert_allclose(causal.run(*arrays), torch_attention(*arrays, is_causal=True), atol=1e-5, rtol=1e-4)


def test_batch_axes_broadcast_like_matmul():
    shapes = [(2, 3, 5, 8), (3, 7, 8), (1, 1, 7, 4)]
    arrays = random_arrays(shapes)
    _, _, k = _kernel(shapes)
    want = torch_attention(arrays[0], *(np.broadcast_to(x, (2, 3, *x.shape[-2:])).copy() for x in arrays[1:]))
    np.testing.assert_allclose(k.run(*arrays), want, atol=1e-5, rtol=1e-4)


@settings(max_examples=5)
@given(lq=st.sampled_from([1, 7, 197]), lk=st.sampled_from([1, 7, 197, 1500]), heads=st.integers(1, 3),
       masked=st.booleans())
def test_odd_sizes_match_torch(lq, lk, heads, masked):
    shapes = [(1, heads, lq, 64), (1, heads, lk, 64), (1, heads, lk, 64)] + ([(1, 1, 1, lk)] if masked else [])
    arrays = random_arrays(shapes, seed=lq * lk)
    _, _, k = _kernel(shapes)
    np.testing.assert_allclose(k.run(*arrays), torch_attention(*arrays), atol=1e-5, rtol=1e-4)


def _allocations(stmt, found, loops=()):
    """Every buffer allocated in a loop-IR statement, by name: the buffer and the loops around its allocation."""
    if isinstance(stmt, L.Allocate):
        found[stmt.buffer.name] = (stmt.buffer, loops)
    if isinstance(stmt, L.For):
        loops = (*loops, stmt.var.name)
    for child in _children(stmt):
        _allocations(child, found, loops)
    return found


def _children(stmt):
    """The statements directly inside a loop-IR statement."""
    children = {L.For: lambda s: [s.body], L.Allocate: lambda s: [s.body], L.Seq: lambda s: s.stmts,
                L.IfThenElse: lambda s: [s.then, s.orelse]}.get(type(stmt), lambda s: [])(stmt)
    return [c for c in children if c is not None]


def test_scores_live_in_local_buffers_of_a_row_block():
    shapes = [(1, 12, 197, 64)] * 3
    _, _, k = _kernel(shapes)
    assert [p.name for p in k.loop.params] == ["q", "k", "v", "attention"]  # nothing else goes to memory
    buffers = _allocations(k.loop.body, {})
    scores, block = buffers["attention_scores"]
    assert scores.scope == "local" and _extents(scores) == [1, 1, rows_per_block(host()), 208]  # 197 keys padded to whole vectors
    parallel = k.source.index("tg_loop_begin(tg, ")  # the thread's share of the parallel loop (codegen/team.py)
    assert parallel < k.source.index("attention_scores[")  # the scores are made inside the parallel block loop
    keys, head = buffers["attention_keys"]
    assert _extents(keys) == [1, 1, 64, 208] and block[:len(head)] == head and len(head) < len(block)


def test_with_few_heads_k_transposed_is_computed_once_before_the_blocks():
    """2 heads cannot keep 2 cores busy: the blocks of rows run in parallel, and K^T, all heads of it, is
    computed before them (in parallel too), not again in each block."""
    _, _, k = _kernel([(1, 2, 300, 64)] * 3)
    buffers = _allocations(k.loop.body, {})
    keys, loops = buffers["attention_keys"]
    assert _extents(keys) == [1, 2, 64, 304] and not loops
    assert k.source.index("attention_keys[") < k.source.index("attention_scores[")


def test_products_accumulate_in_register_tiles():
    _, _, k = _kernel([(1, 12, 128, 64)] * 3)
    buffers = _allocations(k.loop.body, {})
    lanes = host().vector_lanes
    narrow = host().vector_registers <= 16  # AVX2: 6 query rows x 2 vectors of keys, else 8 x 2 (they divide 128)
    assert _extents(buffers["attention_scores_local"][0]) == [1, 1, 6 if narrow else 8, 2 * lanes]
    assert _extents(buffers["attention_pv"][0]) == [1, 1, 8, lanes if narrow else 2 * lanes]  # rows x Dv
    assert "float* restrict attention_keys = attention_keys_stack;" in k.source  # K^T read through restrict
    assert _extents(buffers["attention_max_rf"][0]) == [lanes, 1, 1, 1]  # a vector of partial maxima per row


def test_the_transposed_keys_are_copied_a_vector_of_keys_at_a_time_over_d():
    """K^T's copy reads each vector of keys from that many rows of K: the vectors of keys are its outer loop and D
    is inside, so that a few rows' pages are read at a time, not every row's for each of D's values."""
    _, _, k = _kernel([(1, 12, 128, 64)] * 3)
    lanes = host().vector_lanes
    (store,) = [s for s in L.walk(k.loop.body) if isinstance(s, L.Store) and s.buffer.name == "attention_keys"]
    loops = _loops_around(k.loop.body, store)
    assert [int(x.extent.value) for x in loops[-3:]] == [128 // lanes, 64, lanes] and loops[-1].kind == "vectorized"


def _loops_around(stmt, target, loops=()):
    """The loops around `target` inside `stmt`, outermost first; None where it is not there."""
    if stmt is target:
        return loops
    inside = (*loops, stmt) if isinstance(stmt, L.For) else loops
    return next((found for c in _children(stmt) if (found := _loops_around(c, target, inside)) is not None), None)


def _extents(buffer):
    return [int(d.value) for d in buffer.shape]



@settings(max_examples=12, deadline=None)
@given(lq=st.integers(1, 40), lk=st.sampled_from([1, 5, 16, 23, 40, 197]), d=st.sampled_from([1, 5, 8, 13, 64]),
       dv=st.sampled_from([1, 3, 8, 17, 64]), heads=st.integers(1, 3),
       form=st.sampled_from(["plain", "mask", "causal"]), data=st.data())
def test_every_parameter_of_the_rule_matches_numpy_and_torch(lq, lk, d, dv, heads, form, data):
    shapes = [(1, heads, lq, d), (1, heads, lk, d), (1, heads, lk, dv)] + ([(1, 1, lq, lk)] if form == "mask" else [])
    arrays = random_arrays(shapes, seed=lq * 1000 + lk)
    causal = form == "causal"
    ins = [te.placeholder(s, "float32", name) for s, name in zip(shapes, ("q", "k", "v", "mask"))]
    out = lookup("attention").compute(*ins, scale=None, causal=causal)
    knobs = DrawnKnobs(data)
    k = kernel.build((ins, [out]), default_schedule([out], host(), knobs).trace, name="attention")
    got = k.run(*arrays)
    want = lookup("attention").reference(*arrays, scale=None, causal=causal, qkv_layout="bhsd", out_layout="bhsd")
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4, err_msg=str(knobs.drawn))
    if causal and lk != lq:  # torch's is_causal aligns the queries with the first keys, the op with the last
        return
    np.testing.assert_allclose(got, torch_attention(*arrays, is_causal=causal), atol=1e-5, rtol=1e-4, err_msg=str(knobs.drawn))


def test_a_row_with_every_key_hidden_gives_zeros():
    shapes = [(1, 2, 9, 8), (1, 2, 21, 8), (1, 2, 21, 8), (1, 1, 9, 21)]
    arrays = random_arrays(shapes)
    arrays[3][:, :, 4, :] = -np.inf  # query 4 sees no key
    _, _, k = _kernel(shapes)
    got = k.run(*arrays)
    assert not got[:, :, 4].any()
    want = lookup("attention").reference(*arrays, scale=None, causal=False, qkv_layout="bhsd", out_layout="bhsd")
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)


def test_rows_per_block_is_a_parameter_of_the_default_sketch():
    def outputs():
        ins = [te.placeholder((1, 2, 40, 16), "float32", n) for n in "qkv"]
        return [lookup("attention").compute(*ins, scale=None, causal=False)]

    _, space = generate_sketches(outputs)[0].space({})
    rows = next(c for c in space.choices if c.var == "attention_rows")
    assert rows.default == rows_per_block(host()) and {1, 8, 32} <= set(rows.values)
