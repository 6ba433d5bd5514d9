"""The attention pass: the chains PyTorch exports (legacy and dynamo exporters, SDPA and hand-written attention,
masks by Add or Where, causal) become one attention kernel each and keep ONNX Runtime's numbers; the chains it
must leave alone are left alone with a reason."""

from __future__ import annotations

import importlib.util
import io
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tilegrad.executor import compile_graph
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.attention import form_attention
from tilegrad.passes.memory_plan import kernel_count
from tilegrad.passes.context import PassContext

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_spec = importlib.util.spec_from_file_location("benchmark_models", _BENCHMARKS / "models.py")
models = sys.modules.setdefault("benchmark_models", importlib.util.module_from_spec(_spec))
sys.path.insert(0, str(_BENCHMARKS))  # models.py imports timing.py beside it
try:
    _spec.loader.exec_module(models)
finally:
    sys.path.remove(str(_BENCHMARKS))


def _export(module, args, dynamo=False) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, f, dynamo=dynamo, opset_version=18 if dynamo else 17)
    return f.getvalue()


def _check_model(model: bytes, args, attentions: int, causal: int = 0):
    """The model optimised: `attentions` attention nodes (`causal` of them causal), no softmax left, fewer
    kernels than without the pass by the attention's other kernels, and ONNX Runtime's numbers."""
    g = import_onnx(model)
    formed, report = optimize(g)
    without, _ = optimize(g, disable=["attention"])
    found = [n for n in formed.nodes if n.op == "attention"]
    assert len(found) == attentions, report.format()
    assert sum(n.attrs["causal"] for n in found) == causal
    assert not any("softmax" in n.op or "exp" in [m.op for m in n.attrs["body"].nodes]
                   for n in formed.nodes if n.op in ("softmax", "fused"))
    assert kernel_count(formed) <= kernel_count(without) - 2 * attentions, (kernel_count(formed),
                                                                            kernel_count(without))
    sess = ort.InferenceSession(model)
    feeds = [x.numpy() for x in args]
    want = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), feeds)})
    got = compile_graph(formed)(*feeds)
    for w, o in zip(want, got if isinstance(got, list) else [got]):
        np.testing.assert_allclose(o, w, atol=1e-4, rtol=1e-4)
    return formed, report


class Sdpa(nn.Module):
    def __init__(self, causal=False, scale=None):
        super().__init__()
        self.causal, self.scale = causal, scale

    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None, is_causal=self.causal,
                                              scale=self.scale)


def _qkv(lq=5, lk=7, d=8, dv=4):
    torch.manual_seed(0)
    return torch.randn(2, 3, lq, d), torch.randn(2, 3, lk, d), torch.randn(2, 3, lk, dv)


@pytest.mark.parametrize("dynamo", [False, pytest.param(True, marks=pytest.mark.slow)])  # dynamo: ~10 s to start
def test_sdpa_with_a_float_mask_is_one_attention(dynamo):
    args = (*_qkv(), torch.randn(2, 1, 5, 7))
    _, report = _check_model(_export(Sdpa(scale=0.3), args, dynamo), args, 1)
    assert "attention (5, 7) x 4 (masked, scale 0.3)" in report.format()


def test_sdpa_without_a_mask_and_causal_are_one_attention_each():
    args = _qkv(lq=6, lk=6)
    _check_model(_export(Sdpa(), args), args, 1)
    _check_model(_export(Sdpa(causal=True), args), args, 1, causal=1)


@pytest.mark.parametrize("dynamo", [False, pytest.param(True, marks=pytest.mark.slow)])  # dynamo: ~10 s to start
def test_hand_written_causal_attention_with_where_is_one_attention(dynamo):
    layer, x = models.EncoderLayer(16, 2, causal=True), torch.randn(1, 9, 16)
    _check_model(_export(layer, (x,), dynamo), (x,), 1, causal=1)


def test_multihead_attention_with_a_mask_is_one_attention():
    class Mha(nn.Module):
        def __init__(self):
            super().__init__()
            self.attend = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, x, mask):
            return self.attend(x, x, x, need_weights=False, attn_mask=mask)[0]

    torch.manual_seed(0)
    args = (torch.randn(2, 7, 16), torch.triu(torch.ones(7, 7, dtype=torch.bool), 1))
    f = io.BytesIO()
    with warnings.catch_warnings():  # with grad: the exportable path, not the fused one
        warnings.simplefilter("ignore")
        torch.onnx.export(Mha().eval(), args, f, dynamo=False, opset_version=17)
    _check_model(f.getvalue(), args, 1)


def test_a_padding_mask_built_in_the_graph_is_kept_as_the_additive_mask():
    """BERT-style: (1 - mask) * lowest added to the scores scaled before the mask."""
    class Padded(nn.Module):
        def forward(self, q, k, v, keep):
            bias = (1.0 - keep[:, None, None, :]) * torch.finfo(torch.float32).min
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
            return scores.softmax(-1) @ v

    q, k, v = _qkv()
    keep = torch.ones(2, 7)
    keep[0, 5:] = 0
    _check_model(_export(Padded(), (q, k, v, keep)), (q, k, v, keep), 1)


@pytest.mark.parametrize("name, make, attentions, causal", [
    ("bert", lambda: models.Bert(layers=2, d=32, heads=2, vocab=50, seq=12), 2, 0),
    ("gpt2", lambda: models.Gpt2(layers=2, d=32, heads=2, vocab=50, seq=12), 2, 2),
    ("vit", lambda: models.Vit(layers=2, d=32, heads=2, patch=8, image=24), 2, 0),
])
def test_benchmark_models_have_one_attention_kernel_per_layer(name, make, attentions, causal):
    torch.manual_seed(0)
    module = make()
    args = (torch.randn(1, 3, 24, 24),) if name == "vit" else (torch.randint(0, 50, (1, 12)),)
    _check_model(_export(module, args), args, attentions, causal)



@pytest.mark.slow  # dynamo: ~10 s to start
def test_sdpa_with_a_boolean_mask_behind_the_nan_guard_is_one_attention():
    """The dynamo exporter writes SDPA with a boolean mask as softmax, then where(isnan(p), 0, p) (torch's safe
    softmax): a row whose every key is hidden gives zeros, as the attention kernel's does; here batch 1's third
    query sees no key."""
    q, k, v = _qkv()
    keep = torch.rand(2, 1, 5, 7) > 0.3
    keep[1, 0, 2] = False
    formed, _ = _check_model(_export(Sdpa(), (q, k, v, keep), dynamo=True), (q, k, v, keep), 1)
    assert not any(n.op == "is_nan" for n in formed.nodes)


# -- chains left alone --------------------------------------------------------------------------------------------

def _chain(b, axis=-1, fill=None, scale_after_mask=False):
    q, k, v = b.input("q", (2, 5, 8)), b.input("k", (2, 7, 8)), b.input("v", (2, 7, 4))
    scores = b.op("matmul", q, b.op("transpose", k, perm=(0, 2, 1)))
    mask = b.input("mask", (2, 5, 7))
    if fill is not None:
        scores = b.op("where", b.input("hide", (5, 7), "bool"), b.const(np.float32(fill)), scores)
    elif scale_after_mask:
        scores = b.op("mul", b.op("add", scores, mask), b.const(np.float32(0.5)))
    else:
        scores = b.op("add", b.op("mul", scores, b.const(np.float32(0.5))), mask)
    return b.op("softmax", scores, axis=axis), v


def _formed(g):
    ctx = PassContext()
    out = form_attention(g, ctx)
    return out, ctx.notes


def _same_numbers(before, after):
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(v.shape).astype(v.dtype) if v.dtype != "bool" else rng.random(v.shape) < 0.3
              for v in before.inputs]
    for got, want in zip(run_reference(after, inputs), run_reference(before, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs, reason", [
    ({"axis": 1}, "softmax over axis 1, not over the keys"),
    ({"fill": 0.0}, "fills with 0, which does not hide a key"),
    ({"scale_after_mask": True}, "scaled or masked in an unsupported order"),
])
def test_chains_that_are_not_attention_are_left_with_a_reason(kwargs, reason):
    b = GraphBuilder()
    p, v = _chain(b, **kwargs)
    g = b.build(b.op("matmul", p, v))
    after, notes = _formed(g)
    assert after.nodes == g.nodes
    assert len(notes) == 1 and reason in notes[0], notes


def test_probabilities_read_elsewhere_are_left_with_a_reason():
    b = GraphBuilder()
    p, v = _chain(b)
    g = b.build([b.op("matmul", p, v), p])
    after, notes = _formed(g)
    assert not any(n.op == "attention" for n in after.nodes)
    assert "probabilities" in notes[0] and "graph output" in notes[0]


def _guarded(b, p):
    """torch's safe-softmax guard as the dynamo exporter writes it."""
    return b.op("where", b.op("is_nan", p), b.const(np.float32(0.0)), p)


def test_the_nan_guard_is_part_of_the_chain_and_a_hidden_row_gives_zeros():
    b = GraphBuilder()
    q, k, v = b.input("q", (2, 5, 8)), b.input("k", (2, 7, 8)), b.input("v", (2, 7, 4))
    scores = b.op("mul", b.op("matmul", q, b.op("transpose", k, perm=(0, 2, 1))), b.const(np.float32(0.5)))
    logits = b.op("where", b.input("keep", (2, 5, 7), "bool"), scores, b.const(np.float32(-np.inf)))
    g = b.build(b.op("matmul", _guarded(b, b.op("softmax", logits)), v))
    after, notes = _formed(g)
    assert [n.op for n in after.nodes] == ["where", "attention"], notes
    rng = np.random.default_rng(0)
    keep = rng.random((2, 5, 7)) < 0.5
    keep[1, 3] = False
    inputs = [rng.standard_normal(x.shape).astype(np.float32) for x in g.inputs[:3]] + [keep]
    (want,), (got,) = run_reference(g, inputs), run_reference(after, inputs)
    assert np.all(want[1, 3] == 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_probabilities_read_beside_their_nan_guard_are_left_with_a_reason():
    b = GraphBuilder()
    p, v = _chain(b)
    g = b.build([b.op("matmul", _guarded(b, p), v), b.op("relu", p, name="other")])
    after, notes = _formed(g)
    assert after.nodes == g.nodes and "read outside their NaN guard" in notes[0], notes


def test_a_mask_that_does_not_cover_the_keys_is_left_with_a_reason():
    b = GraphBuilder()
    q, k, v = b.input("q", (2, 5, 8)), b.input("k", (2, 8, 7)), b.input("v", (2, 7, 4))
    scores = b.op("add", b.op("matmul", q, k), b.input("mask", (2, 5, 1)))
    g = b.build(b.op("matmul", b.op("softmax", scores), v))
    after, notes = _formed(g)
    assert after.nodes == g.nodes and "does not broadcast to the scores" in notes[0]


def test_a_where_mask_and_the_expanded_softmax_are_recognised():
    """The softmax written out (reduce_max, sub, exp, reduce_sum, div), a mask chosen by Where from a bool input,
    and K^T given as it is (the pass transposes it back)."""
    b = GraphBuilder()
    q, kt, v = b.input("q", (2, 5, 8)), b.input("kt", (2, 8, 7)), b.input("v", (2, 7, 4))
    scores = b.op("div", b.op("matmul", q, kt), b.const(np.float32(3.0)))
    logits = b.op("where", b.input("keep", (1, 7), "bool"), scores, b.const(np.float32(-np.inf)))
    exps = b.op("exp", b.op("sub", logits, b.op("reduce_max", logits, axes=(2,), keepdims=1)))
    p = b.op("div", exps, b.op("reduce_sum", exps, axes=(2,), keepdims=1))
    g = b.build(b.op("matmul", p, v))
    after, notes = _formed(g)
    assert [n.op for n in after.nodes] == ["transpose", "where", "attention"], notes
    assert after.nodes[-1].attrs["scale"] == pytest.approx(1 / 3)
    _same_numbers(g, after)


def test_scores_read_by_another_node_are_left_with_a_reason():
    b = GraphBuilder()
    q, k, v = b.input("q", (2, 5, 8)), b.input("k", (2, 7, 8)), b.input("v", (2, 7, 4))
    scores = b.op("matmul", q, b.op("transpose", k, perm=(0, 2, 1)), name="scores")
    g = b.build([b.op("matmul", b.op("softmax", scores), v), b.op("relu", scores, name="other")])
    after, notes = _formed(g)
    assert after.nodes == g.nodes
    assert "'scores' is read by 2 nodes" in notes[0] and "other" in notes[0], notes


@pytest.mark.parametrize("fill, causal", [(float("-inf"), 1), (torch.finfo(torch.float32).min, 0)])
def test_a_causal_where_and_a_padding_mask_make_one_masked_attention(fill, causal):
    """GPT-2 in Hugging Face's eager form: the causal Where, then the padding mask added. With a -inf fill the
    Where becomes `causal`; with the lowest float, hidden keys that are also padded overflow to -inf, so only
    the sum of both masks as one additive mask is exact (here with rows whose keys are all hidden)."""
    class Decoder(nn.Module):
        def forward(self, q, k, v, keep):
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            hidden = torch.triu(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool), 1)
            scores = scores.masked_fill(hidden, fill)
            scores = scores + (1.0 - keep[:, None, None, :]) * torch.finfo(torch.float32).min
            return scores.softmax(-1) @ v

    q, k, v = _qkv(lq=7)
    keep = torch.ones(2, 7)
    keep[1, 5:] = 0
    if not causal:
        keep[0, :2] = 0
    formed, _ = _check_model(_export(Decoder(), (q, k, v, keep)), (q, k, v, keep), 1, causal=causal)
    assert len(next(n for n in formed.nodes if n.op == "attention").inputs) == 4  # and the padding mask


def test_two_masks_none_causal_are_left_with_a_reason():
    b = GraphBuilder()
    q, k, v = b.input("q", (2, 5, 8)), b.input("k", (2, 7, 8)), b.input("v", (2, 7, 4))
    scores = b.op("matmul", q, b.op("transpose", k, perm=(0, 2, 1)))
    scores = b.op("add", b.op("add", scores, b.input("m1", (2, 1, 7))), b.input("m2", (1, 5, 7)))
    g = b.build(b.op("matmul", b.op("softmax", scores), v))
    after, notes = _formed(g)
    assert after.nodes == g.nodes and "two masks, not one causal and one other" in notes[0], notes


@pytest.mark.parametrize("opt_level, disable, formed", [(1, (), False), (2, (), True), (2, ("attention",), False),
                                                        (3, (), True)])
def test_the_pass_runs_by_default(opt_level, disable, formed):
    """On by default (opt level 2): the attention kernel measures faster than the separate kernels
    (docs/fusion.md)."""
    b = GraphBuilder()
    p, v = _chain(b)
    after, _ = optimize(b.build(b.op("matmul", p, v)), opt_level, disable=disable)
    assert any(n.op == "attention" for n in after.nodes) == formed
