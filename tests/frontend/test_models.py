"""Small models of the common families (MobileNetV2, BERT, GPT, DCGAN, 3-D conv, ViT), seeded, exported from
PyTorch with the legacy exporter at opset 17, compiled natively by `tilegrad.compile` and compared with ONNX
Runtime."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import onnx
import pytest

import tilegrad

from .conftest import run_onnxruntime

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


def _export(module, args, names):
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, f, dynamo=False, opset_version=17, input_names=list(names))
    return onnx.load_from_string(f.getvalue())


def _randomize_norms(module):
    """Running statistics away from (0, 1), so that batch norms are not identities."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return module


def _check(module, args, names):
    """Export, compile natively and compare every output with ONNX Runtime's."""
    model = _export(_randomize_norms(module), args, names)
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    want = run_onnxruntime(model, feeds)
    got = tilegrad.compile(model)(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.isfinite(w).all()
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


# ---- MobileNetV2 inverted residual ----

class InvertedResidual(nn.Module):
    def __init__(self, channels: int, expand: int, stride: int, out_channels: int):
        super().__init__()
        hidden = channels * expand
        self.residual = stride == 1 and channels == out_channels
        self.body = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


@pytest.mark.parametrize("stride,out_channels", [(1, 8), (2, 12)])
def test_mobilenet_v2_block(stride, out_channels):
    torch.manual_seed(0)
    _check(InvertedResidual(8, 4, stride, out_channels), (torch.randn(1, 8, 10, 10),), ["x"])


# ---- BERT encoder layer ----

class EncoderLayer(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, ffn: int = 64):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-12), nn.LayerNorm(dim, eps=1e-12)
        self.up, self.down = nn.Linear(dim, ffn), nn.Linear(ffn, dim)

    def split_heads(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, hidden, mask):
        b, s, d = hidden.shape
        q, k, v = (self.split_heads(f(hidden)) for f in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + mask
        context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        hidden = self.norm1(hidden + self.o(context))
        return self.norm2(hidden + self.down(F.gelu(self.up(hidden))))


def test_bert_encoder_layer():
    torch.manual_seed(1)
    hidden = torch.randn(2, 6, 32)
    keep = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.float32)
    mask = ((1.0 - keep) * -10000.0)[:, None, None, :]
    _check(EncoderLayer(), (hidden, mask), ["hidden", "mask"])


# ---- GPT decoder block ----

class DecoderBlock(nn.Module):
    def __init__(self, vocab: int = 50, context: int = 16, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Parameter(torch.randn(context, dim) * 0.1)
        self.norm1, self.norm2, self.norm_out = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("causal", torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1))

    def forward(self, ids):
        b, s = ids.shape
        x = self.tokens(ids) + self.positions[:s]
        q, k, v = self.qkv(self.norm1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores.masked_fill(self.causal[:s, :s], float("-inf"))
        context = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, -1)
        x = x + self.proj(context)
        x = x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))
        return self.head(self.norm_out(x))


def test_gpt_decoder_block():
    torch.manual_seed(2)
    ids = torch.randint(0, 50, (2, 8), dtype=torch.int64)
    _check(DecoderBlock(), (ids,), ["ids"])


class PaddedDecoder(nn.Module):
    """Masks built inside the graph from an int64 attention mask: positions from a cumulative sum, a causal mask
    from torch.triu combined with the padding mask, attention products written as einsums."""

    def __init__(self, vocab: int = 40, context: int = 16, dim: int = 16):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, vocab)

    def forward(self, ids, attention_mask):
        s = ids.shape[1]
        positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
        x = self.tokens(ids) + self.positions(positions)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        blocked = causal | (attention_mask == 0)[:, None, :]
        scores = torch.einsum("bqd,bkd->bqk", q, k).masked_fill(blocked, torch.finfo(torch.float32).min)
        context = torch.einsum("bqk,bkd->bqd", torch.softmax(scores, dim=-1), v)
        return self.out(x + context)


def test_gpt_with_masks_built_in_the_graph():
    torch.manual_seed(6)
    ids = torch.randint(1, 40, (2, 7), dtype=torch.int64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]], dtype=torch.int64)
    _check(PaddedDecoder(), (ids, mask), ["ids", "attention_mask"])


# ---- DCGAN generator tail ----

def test_dcgan_generator_tail():
    torch.manual_seed(3)
    m = nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.ConvTranspose2d(8, 3, 4, 2, 1, bias=False), nn.Tanh())
    _check(m, (torch.randn(2, 16, 4, 4),), ["z"])


# ---- 3-D conv block ----

def test_conv3d_block():
    torch.manual_seed(4)
    m = nn.Sequential(nn.Conv3d(3, 8, 3, padding=1), nn.BatchNorm3d(8), nn.ReLU(), nn.MaxPool3d(2))
    _check(m, (torch.randn(1, 3, 6, 8, 8),), ["x"])


# ---- ViT: patch embedding and one encoder layer ----

class ViT(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, dim: int = 32):
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
        self.positions = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.1)
        self.encoder = EncoderLayer(dim)

    def forward(self, x):
        patches = self.embed(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(x.shape[0], -1, -1), patches], dim=1) + self.positions
        return self.encoder(tokens, torch.zeros(1, 1, 1, tokens.shape[1]))


def test_vit():
    torch.manual_seed(5)
    _check(ViT(), (torch.randn(2, 3, 16, 16),), ["x"])


# ---- the ops these exports introduced, in the forms other opsets and exporters write ----

def _single_node(op_type, inputs, outputs, opset, initializers=(), **attrs):
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers]
    graph = helper.make_graph([helper.make_node(op_type, ["x", *inputs], outputs, **attrs)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 10])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


@pytest.mark.parametrize("model", [
    _single_node("Split", [], ["a", "b", "c"], 11, axis=1, split=[2, 3, 5]),
    _single_node("Split", [], ["a", "b"], 11, axis=-1),
    _single_node("Split", ["s"], ["a", "b"], 13, [("s", np.array([1, 3], "int64"))]),
    _single_node("Split", [], ["a", "b", "c"], 18, axis=1, num_outputs=3),
    _single_node("Einsum", ["x"], ["y"], 17, equation="ij,kj->ik"),
    _single_node("Einsum", [], ["y"], 17, equation="ij->j"),
    _single_node("CumSum", ["a"], ["y"], 17, [("a", np.array(1, "int64"))], exclusive=1, reverse=1),
    _single_node("Trilu", ["k"], ["y"], 17, [("k", np.array(2, "int64"))], upper=0),
    _single_node("Trilu", [], ["y"], 17),
], ids=["split11", "split11_even", "split13", "split18", "einsum_abt", "einsum_sum", "cumsum", "tril", "triu"])
def test_op_forms_match_onnxruntime(model):
    x = np.random.default_rng(0).standard_normal((4, 10)).astype("float32")
    want = run_onnxruntime(model, {"x": x})
    got = tilegrad.compile(model)(x)
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
