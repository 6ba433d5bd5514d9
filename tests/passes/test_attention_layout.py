"""The attention pass reading Q, K, V in the projections' layout and writing its output in it: the head-split
transposes (and a fused QKV projection's split) and the head-merge transpose become no kernels, with the numbers
of ONNX Runtime on BERT-, GPT-2- and ViT-like encoders exported from torch, and of the graph's reference on
small hand-built chains; the chains that do not have the projections' layout keep the (B, H, S, D) form."""

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
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tilegrad.executor import compile_graph
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.ir.registry import OUT_FUSABLE, lookup
from tilegrad.passes import optimize
from tilegrad.passes.attention import form_attention
from tilegrad.passes.memory_plan import intermediates_of, plan_memory
from tilegrad.passes.context import PassContext

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_spec = importlib.util.spec_from_file_location("benchmark_models", _BENCHMARKS / "models.py")
models = sys.modules.setdefault("benchmark_models", importlib.util.module_from_spec(_spec))
if not hasattr(models, "EncoderLayer"):
    sys.path.insert(0, str(_BENCHMARKS))  # models.py imports timing.py beside it
    try:
        _spec.loader.exec_module(models)
    finally:
        sys.path.remove(str(_BENCHMARKS))


# -- encoders exported from torch ----------------------------------------------------------------------------------

class BertSelfAttention(nn.Module):
    """Hugging Face's BERT (and ViT) self-attention: separate query, key and value projections, heads split by
    view + permute, the padding mask added as (1 - mask) * lowest, heads merged by permute + view."""

    def __init__(self, d=32, heads=2):
        super().__init__()
        self.heads, self.size = heads, d // heads
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.dense, self.norm = nn.Linear(d, d), nn.LayerNorm(d)

    def _split(self, x):
        return x.view(*x.shape[:2], self.heads, self.size).permute(0, 2, 1, 3)

    def forward(self, x, keep):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.size)
        scores = scores + (1.0 - keep[:, None, None, :]) * torch.finfo(torch.float32).min
        context = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).contiguous()
        return self.norm(x + self.dense(context.view(*x.shape)))


class Gpt2Attention(nn.Module):
    """Hugging Face's GPT-2 attention: one fused projection (Conv1D: addmm on the flattened tokens) split into
    query, key and value along its last axis, a causal `where` with the lowest float, the heads merged back."""

    def __init__(self, d=32, heads=2, seq=9):
        super().__init__()
        self.heads, self.size = heads, d // heads
        self.weight, self.bias = nn.Parameter(torch.randn(d, 3 * d) * 0.1), nn.Parameter(torch.randn(3 * d))
        self.proj = nn.Linear(d, d)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x):
        b, t, d = x.shape
        qkv = torch.addmm(self.bias, x.view(-1, d), self.weight).view(b, t, 3 * d)
        q, k, v = (z.view(b, t, self.heads, self.size).permute(0, 2, 1, 3) for z in qkv.split(d, dim=2))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.size)
        scores = torch.where(self.causal[:t, :t], scores, torch.finfo(torch.float32).min)
        out = torch.matmul(scores.softmax(-1), v).permute(0, 2, 1, 3).contiguous().view(b, t, d)
        return self.proj(out)


def _export(module, args) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, f, dynamo=False, opset_version=17)
    return f.getvalue()


def _kernel_producer(g, v):
    """The node that computes `v` in a kernel, looking through views (reshapes); None for a graph input."""
    producers = g.producers()
    node = producers.get(id(v))
    while node is not None and lookup(node.op).view:
        node = producers.get(id(node.inputs[0]))
    return node


def _is_product(node) -> bool:
    """Whether a kernel is a matrix product (with its epilogue, if fused)."""
    ops = node.attrs["body"].nodes if node.op == "fused" else [node]
    return any(lookup(m.op).kind == OUT_FUSABLE for m in ops)


def _check_encoder(module, args, layout: str, causal: bool, layers: int = 1):
    """Optimised with the attention pass: `layers` attentions reading `layout` and writing bshd, fed by the
    projections and feeding one, with only views between; and ONNX Runtime's numbers."""
    torch.manual_seed(0)
    model = _export(module, args)
    g, _ = optimize(import_onnx(model), enable=["attention"])
    found = [n for n in g.nodes if n.op == "attention"]
    assert [(n.attrs["qkv_layout"], n.attrs["out_layout"], n.attrs["causal"]) for n in found] == [
        (layout, "bshd", causal)] * layers
    kernels = plan_memory(g, intermediates_of(g)).kernel_nodes(g)
    for n in found:
        made_by = [_kernel_producer(g, v) for v in n.inputs[:3]]
        assert len({m.name for m in made_by}) == (1 if layout == "bs3hd" else 3)  # one fused projection, or three
        assert all(_is_product(m) for m in made_by)
        readers = [m for m in kernels if any(_kernel_producer(g, v) is n for v in m.inputs)]
        assert len(readers) == 1 and _is_product(readers[0])
    assert not any(n.op in ("transpose", "slice") for n in kernels)
    sess = ort.InferenceSession(model)
    feeds = [x.numpy() for x in args]
    want = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), feeds)})
    got = compile_graph(g)(*feeds)
    np.testing.assert_allclose(got[0] if isinstance(got, list) else got, want[0], atol=1e-4, rtol=1e-4)


def test_bert_like_attention_reads_three_projections_and_writes_the_merged_heads():
    torch.manual_seed(0)
    keep = torch.ones(2, 7)
    keep[1, 4:] = 0
    _check_encoder(BertSelfAttention(), (torch.randn(2, 7, 32), keep), "bshd", causal=False)


def test_gpt2_like_attention_reads_the_fused_projection_as_bs3hd():
    torch.manual_seed(0)
    _check_encoder(Gpt2Attention(), (torch.randn(1, 9, 32),), "bs3hd", causal=True)


@pytest.mark.parametrize("name, make, args, causal", [
    ("gpt2", lambda: models.Gpt2(layers=2, d=32, heads=2, vocab=50, seq=11), lambda: (torch.randint(0, 50, (1, 11)),),
     True),
    ("vit", lambda: models.Vit(layers=2, d=32, heads=2, patch=16, image=224), lambda: (torch.randn(1, 3, 224, 224),),
     False),  # 197 tokens
])
def test_benchmark_encoders_read_their_fused_projection(name, make, args, causal):
    torch.manual_seed(0)
    _check_encoder(make(), args(), "bs3hd", causal=causal, layers=2)


def test_sdpa_on_tensors_already_split_keeps_the_head_form():
    class Sdpa(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v)

    args = tuple(torch.randn(2, 3, 5, 8) for _ in range(3))
    g, _ = optimize(import_onnx(_export(Sdpa(), args)), enable=["attention"])
    (found,) = [n for n in g.nodes if n.op == "attention"]
    assert (found.attrs["qkv_layout"], found.attrs["out_layout"]) == ("bhsd", "bhsd")


# -- hand-built chains ---------------------------------------------------------------------------------------------

def _chain(b: GraphBuilder, batch, s, h, d, *, fused=True, order=(0, 1, 2), masked=False, k_twice=False,
           merged=True, out_read=False):
    """The exported chain over (batch, s, h * d) projections: split heads, softmax(Q K^T / 2 + mask) V, merge heads.
    `fused`: Q, K, V are parts `order` of one (batch, s, 3 * h * d) input, else three inputs; `k_twice`: K^T
    is the head split then a transpose of the last two axes; `out_read`: the attention's output is also a graph
    output."""
    if fused:
        x = b.input("qkv", (batch, s, 3 * h * d))
        parts = [b.op("slice", x, starts=(i * h * d,), ends=((i + 1) * h * d,), axes=(2,)) for i in order]
    else:
        parts = [b.input(name, (batch, s, h * d)) for name in "qkv"]
    q, k, v = (b.op("reshape", p, shape=(batch, s, h, d)) for p in parts)
    q, v = (b.op("transpose", x, perm=(0, 2, 1, 3)) for x in (q, v))
    if k_twice:
        kt = b.op("transpose", b.op("transpose", k, perm=(0, 2, 1, 3)), perm=(0, 1, 3, 2))
    else:
        kt = b.op("transpose", k, perm=(0, 2, 3, 1))
    scores = b.op("div", b.op("matmul", q, kt), b.const(np.float32(2.0)))
    if masked:
        scores = b.op("add", scores, b.input("mask", (batch, 1, 1, s)))
    out = b.op("matmul", b.op("softmax", scores, axis=-1), v)
    outputs = [b.op("reshape", b.op("transpose", out, perm=(0, 2, 1, 3)), shape=(batch, s, h * d))] if merged else []
    return outputs + ([out] if out_read or not merged else [])


def _formed(**kwargs):
    b = GraphBuilder()
    g = b.build(_chain(b, **kwargs))
    ctx = PassContext()
    after = form_attention(g, ctx)
    (found,) = [n for n in after.nodes if n.op == "attention"]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs]
    for got, want in zip(run_reference(after, inputs), run_reference(g, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return after, found, ctx.notes


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 2), s=st.sampled_from([1, 3, 5, 9, 13]), h=st.integers(1, 3),
       d=st.sampled_from([1, 2, 4, 8]), fused=st.booleans(), masked=st.booleans())
def test_projection_layouts_keep_the_numbers(batch, s, h, d, fused, masked):
    after, found, notes = _formed(batch=batch, s=s, h=h, d=d, fused=fused, masked=masked)
    layout = "bs3hd" if fused else "bshd"
    assert (found.attrs["qkv_layout"], found.attrs["out_layout"]) == (layout, "bshd")
    assert [n.op for n in after.nodes] == ["reshape"] * (1 if fused else 3) + ["attention", "reshape"]
    assert f"reading Q, K, V as {layout} and writing bshd" in notes[0]


def test_keys_transposed_twice_are_read_before_both_transposes():
    after, found, _ = _formed(batch=1, s=5, h=2, d=4, fused=False, k_twice=True)
    assert found.attrs["qkv_layout"] == "bshd" and not any(n.op == "transpose" for n in after.nodes)


def test_parts_of_a_projection_in_another_order_are_read_as_three_tensors():
    """K, Q, V cut in that order: not the bs3hd slots, so the slices stay and the op reads their heads."""
    after, found, _ = _formed(batch=1, s=5, h=2, d=4, order=(1, 0, 2))
    assert found.attrs["qkv_layout"] == "bshd" and [n.op for n in after.nodes].count("slice") == 3


@pytest.mark.parametrize("merged, out_read", [(True, True), (False, False)], ids=["also-returned", "returned"])
def test_an_output_read_in_the_head_form_is_written_in_it(merged, out_read):
    _, found, _ = _formed(batch=1, s=5, h=2, d=4, merged=merged, out_read=out_read)
    assert (found.attrs["qkv_layout"], found.attrs["out_layout"]) == ("bs3hd", "bhsd")
