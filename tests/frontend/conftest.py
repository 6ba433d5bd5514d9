"""Small PyTorch versions of the benchmark families (ResNet, MobileNetV2, BERT, nn.TransformerEncoder, ViT, GPT-2,
DCGAN), seeded, with random weights and batch-norm statistics. A test that takes the `torch_model` fixture runs
once per model and gets `(module in eval mode, example inputs)`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

nn = torch.nn
F = torch.nn.functional


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet():
    stem = [nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    net = nn.Sequential(*stem, Bottleneck(8, 4, 2), Bottleneck(16, 4, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(16, 10))
    return net, (torch.randn(2, 3, 16, 16),)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        self.body = nn.Sequential(
            nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(),
            nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def mobilenet_v2():
    net = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
                        InvertedResidual(8, 8, 1, 4), InvertedResidual(8, 12, 2, 4),
                        nn.Conv2d(12, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(32, 10))
    return net, (torch.randn(1, 3, 16, 16),)


class BertLayer(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(0.1))

    def forward(self, x, extended_mask):
        b, t, d = x.shape
        q, k, v = (f(x).view(b, t, self.heads, d // self.heads).permute(0, 2, 1, 3) for f in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d // self.heads) + extended_mask
        context = torch.matmul(F.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(b, t, d)
        x = self.ln1(x + self.o(context))
        return self.ln2(x + self.ff(x))


class Bert(nn.Module):
    """BERT's embeddings (token, position, segment), encoder layers with an attention mask, and pooler."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2, seq=16):
        super().__init__()
        self.tok, self.pos, self.seg = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads) for _ in range(layers))
        self.pooler = nn.Linear(d, d)

    def forward(self, ids, attention_mask):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(positions) + self.seg(torch.zeros_like(ids)))
        extended = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, extended)
        return x, torch.tanh(self.pooler(x[:, 0]))


def bert():
    ids = torch.randint(0, 64, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, 5:] = 0
    return Bert(), (ids, mask)


class TorchEncoder(nn.Module):
    """nn.TransformerEncoder (post-norm and pre-norm layers) with a key padding mask: PyTorch runs its fused
    inference kernels for these under torch.compile."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        post = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, activation="gelu", batch_first=True)
        pre = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.post = nn.TransformerEncoder(post, 1, enable_nested_tensor=False)
        self.pre = nn.TransformerEncoder(pre, 1, enable_nested_tensor=False)

    def forward(self, x, padding):
        return self.pre(self.post(x, src_key_padding_mask=padding), src_key_padding_mask=padding)


def torch_encoder():
    padding = torch.zeros(2, 8, dtype=torch.bool)
    padding[1, 6:] = True
    return TorchEncoder(), (torch.randn(2, 8, 32), padding)


class VitBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class Vit(nn.Module):
    def __init__(self, d=32, heads=4, patch=4, image=16, classes=10):
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        self.blocks = nn.Sequential(VitBlock(d, heads), VitBlock(d, heads))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


def vit():
    return Vit(), (torch.randn(2, 3, 16, 16),)


class Gpt2Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.attn(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    """GPT-2: token and position embeddings, a block with a causal mask, and the head tied to the embedding."""

    def __init__(self, vocab=64, d=32, heads=4, seq=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.block, self.ln = Gpt2Block(d, heads, seq), nn.LayerNorm(d)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        return F.log_softmax(F.linear(self.ln(self.block(x)), self.tok.weight), dim=-1)


def gpt2():
    return Gpt2(), (torch.randint(0, 64, (1, 8)),)


def dcgan():
    net = nn.Sequential(
        nn.ConvTranspose2d(16, 32, 4, 1, 0, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.ConvTranspose2d(32, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.ConvTranspose2d(16, 3, 4, 2, 1, bias=False), nn.Tanh())
    return net, (torch.randn(2, 16, 1, 1),)


MODELS = {"resnet": resnet, "mobilenet_v2": mobilenet_v2, "bert": bert, "torch_encoder": torch_encoder, "vit": vit,
          "gpt2": gpt2, "dcgan": dcgan}


def randomize_norms(module):
    """Running statistics away from (0, 1), so that batch norms are not identities."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return module


def pytest_generate_tests(metafunc):
    if "torch_model" in metafunc.fixturenames:
        metafunc.parametrize("torch_model", list(MODELS), indirect=True)


@pytest.fixture
def torch_model(request):
    torch.manual_seed(0)
    module, args = MODELS[request.param]()
    return randomize_norms(module).eval(), args



# --- many one-node cases in one model, run by ONNX Runtime and by tilegrad (the op-family tests) ---

def run_onnxruntime(model, feeds):
    """ONNX Runtime's outputs for `model` (a ModelProto) on `feeds` (a dict of arrays), on the CPU."""
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def value_info(name, elem=None, shape=None):
    """A graph input or output of element type `elem` (default float32) and `shape` (None: unknown)."""
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT if elem is None else elem, shape)


def constant_node(name, value):
    """A Constant node whose output `name` holds `value`."""
    from onnx import helper, numpy_helper

    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def cases_model(cases, opset):
    """One model holding every case's node side by side, and the feeds of its non-constant inputs. A case is a
    dict: `op`, `inputs` (arrays, None for an absent optional input), `attrs`, and optionally `consts` (the
    positions of inputs given as initializers: shapes, sizes, axes) and `out_types` (when they differ from the
    first input's type)."""
    from onnx import helper, numpy_helper

    feeds, inputs, inits, nodes, outputs = {}, [], [], [], []
    for k, case in enumerate(cases):
        names = [f"n{k}_in{i}" if a is not None else "" for i, a in enumerate(case["inputs"])]
        for i, (n, a) in enumerate(zip(names, case["inputs"])):
            if i in case.get("consts", ()):
                inits.append(numpy_helper.from_array(np.asarray(a), n))
            elif a is not None:
                feeds[n] = a
                inputs.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                            list(a.shape)))
        first = next(np.asarray(a) for a in case["inputs"] if a is not None)
        types = case.get("out_types") or (helper.np_dtype_to_tensor_dtype(first.dtype),)
        outs = [helper.make_tensor_value_info(f"n{k}_out{j}", t, None) for j, t in enumerate(types)]
        nodes.append(helper.make_node(case["op"], names, [o.name for o in outs], name=f"n{k}",
                                      **case.get("attrs", {})))
        outputs.extend(outs)
    graph = helper.make_graph(nodes, "cases", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10), feeds


def assert_cases_match_onnxruntime(cases, opset=20, rtol=1e-5, atol=1e-5):
    """Each case's outputs from tilegrad equal ONNX Runtime's (dtype, shape, values); one compile for all."""
    import tilegrad

    model, feeds = cases_model(cases, opset)
    want = run_onnxruntime(model, feeds)
    got = tilegrad.compile(model)(*feeds.values())
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for out, g, w in zip(model.graph.output, got, want):
        assert (g.dtype, g.shape) == (w.dtype, w.shape), out.name
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=out.name)


@pytest.fixture
def onnx_cases():
    """`check(cases, opset=20, rtol=1e-5, atol=1e-5)`: the cases (see `cases_model`), compiled as one model, give
    ONNX Runtime's outputs."""
    return assert_cases_match_onnxruntime
