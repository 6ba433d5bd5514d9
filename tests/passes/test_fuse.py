"""The fusion pass: which nodes group, that no group makes a cycle, and that fused graphs compute the same values,
both through the NumPy references and compiled."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilegrad.executor import compile_graph
from tilegrad.passes.memory_plan import kernel_count
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.fuse import fuse
from tilegrad.passes.context import PassContext


def _fused(g, **options):
    return fuse(g, PassContext(options=options))


def _bodies(g):
    return [[m.op for m in n.attrs["body"].nodes] for n in g.nodes if n.op == "fused"]


def _inputs(g, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs]


def _check_same(before, after, inputs=None, compiled=False, rtol=1e-5, atol=1e-5):
    inputs = inputs or _inputs(before)
    want = run_reference(before, inputs)
    for got, w in zip(run_reference(after, inputs), want):
        np.testing.assert_allclose(got, w, rtol=rtol, atol=atol)
    if compiled:
        outs = compile_graph(after)(*inputs)
        outs = outs if isinstance(outs, list) else [outs]
        for got, w in zip(outs, want):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4)


def test_conv_takes_its_bias_residual_and_activation():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 10, 10))
    skip = b.input("skip", (1, 16, 10, 10))
    w = b.const(np.random.default_rng(1).standard_normal((16, 8, 3, 3)).astype("float32"), "w")
    y = b.op("conv", x, w, strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), group=1)
    y = b.op("add", y, b.const(np.ones((16, 1, 1), "float32"), "bias"))
    y = b.op("relu", b.op("add", y, skip))
    g = b.build(y)
    fused = _fused(g)
    assert [n.op for n in fused.nodes] == ["fused"]
    assert _bodies(fused) == [["conv", "add", "add", "relu"]]
    _check_same(g, fused, compiled=True)


def test_a_conv_output_read_twice_keeps_its_epilogue_out():
    b = GraphBuilder()
    x = b.input("x", (1, 4, 6, 6))
    w = b.const(np.ones((4, 4, 1, 1), "float32"), "w")
    y = b.op("conv", x, w, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1)
    g = b.build([b.op("relu", y), b.op("sigmoid", y)])
    fused = _fused(g)
    assert "conv" in [n.op for n in fused.nodes]  # the conv stays alone; its two readers may group together
    _check_same(g, fused, compiled=True)


def test_injective_chains_fuse_and_reductions_take_their_producers():
    b = GraphBuilder()
    x = b.input("x", (6, 5, 7))
    t = b.op("transpose", b.op("exp", x), perm=(1, 0, 2))
    s = b.op("reduce_sum", b.op("mul", t, t), axes=(2,), keepdims=1)
    g = b.build(s)
    fused = _fused(g)
    assert _bodies(fused) == [["exp", "transpose", "mul", "reduce_sum"]]
    _check_same(g, fused, compiled=True)


@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_an_expanded_row_op_is_stitched_back_into_one_kernel(op):
    b = GraphBuilder()
    x = b.input("x", (2, 9, 40))
    if op == "softmax":
        y = b.op("softmax", x, axis=-1)
    else:
        y = b.op("layer_norm", x, b.const(np.full(40, 1.5, "float32"), "gamma"),
                 b.const(np.full(40, 0.25, "float32"), "beta"), axis=-1)
    g = b.build(y)
    expanded, _ = optimize(g, 2, disable=["fuse"])
    assert len(expanded.nodes) > 3
    fused, _ = optimize(g, 2)
    assert [n.op for n in fused.nodes] == ["fused"]
    _check_same(g, fused, compiled=True)


def test_a_merge_that_would_make_a_cycle_is_refused():
    """A -> B -> C and A -> C: C may not join A's group while B (which cannot join) sits between them."""
    b = GraphBuilder()
    x = b.input("x", (4, 16))
    a = b.op("reduce_sum", x, axes=(1,), keepdims=1)  # A: a row reduction, (4, 1)
    mid = b.op("cumsum", a, axis=0)  # B: a reduction that fuses with nothing
    c = b.op("add", a, mid)  # C: element-wise over A's rows, would stitch onto A
    g = b.build(c)
    fused = _fused(g)
    fused.verify()  # every value defined before it is read: no cycle
    groups = {n.name: [m.op for m in n.attrs["body"].nodes] for n in fused.nodes if n.op == "fused"}
    assert not any("reduce_sum" in ops and "add" in ops for ops in groups.values())
    _check_same(g, fused, compiled=True)


@pytest.mark.parametrize("perms, channels, apart", [([(0, 3, 1, 2)], 16, True), ([(0, 2, 1, 3)], 16, False),
                                                    ([(0, 3, 1, 2), (0, 2, 3, 1)], 16, False),
                                                    ([(0, 3, 1, 2)], 3, False)])
def test_an_overlap_add_stays_apart_from_a_transpose_that_moves_its_last_axis(perms, channels, apart):
    """A transposed convolution's col2im (channels last) then its NCHW transpose: fused, the transpose's loop
    order would read each output's taps one channel at a time. A transpose that keeps the channels last, or one
    moved back by a later transpose (DCGAN's batch norm in NCHW between two layers), or a run of 3 channels (no
    vector) fuses. The stitching explorer's `refusal` says the same."""
    from tilegrad.passes.fusion_rules import GraphIndex, refusal

    b = GraphBuilder()
    cols = b.input("cols", (1, 5, 5, 4, 4, channels))
    h = b.op("col2im", cols, strides=(2, 2), begins=(1, 1), sizes=(10, 10))
    for k, perm in enumerate(perms):
        h = b.op("transpose", h, perm=perm)
        if k == 0:
            h = b.op("relu", h)
    g = b.build(h)
    fused = _fused(g)
    together = [ops for ops in _bodies(fused) if "col2im" in ops and "transpose" in ops]
    assert bool(together) != apart
    reason = refusal(GraphIndex(g), frozenset(range(len(g.nodes))))
    assert (reason is not None and "moves the last axis" in reason) == apart
    _check_same(g, fused, compiled=True)


def test_small_independent_element_wise_ops_fuse_horizontally():
    b = GraphBuilder()
    x, y = b.input("x", (8, 8)), b.input("y", (16,))
    g = b.build([b.op("exp", x), b.op("neg", y)])
    fused = _fused(g)
    assert [n.op for n in fused.nodes] == ["fused"] and len(fused.nodes[0].outputs) == 2
    assert [n.op for n in _fused(g, horizontal_fusion=False).nodes] == ["exp", "neg"]
    _check_same(g, fused, compiled=True)


def test_a_reduction_without_rows_takes_producers_only():
    b = GraphBuilder()
    x = b.input("x", (4, 6))
    g = b.build(b.op("relu", b.op("cumsum", b.op("exp", x), axis=1)))
    fused = _fused(g)
    assert [n.op for n in fused.nodes] == ["fused", "relu"] and _bodies(fused) == [["exp", "cumsum"]]
    _check_same(g, fused, compiled=True)


def test_opaque_ops_stand_alone():
    """A fused node is opaque: fusing again changes nothing."""
    b = GraphBuilder()
    x = b.input("x", (4, 6))
    once = _fused(b.build(b.op("relu", b.op("cumsum", b.op("exp", x), axis=1))))
    assert [n.op for n in _fused(once).nodes] == [n.op for n in once.nodes]


# -- structure on real blocks ------------------------------------------------------------------------------------


def _onnx_graph(module, *args):
    import torch

    from tilegrad.frontend.onnx import import_onnx

    f = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, f, dynamo=False, opset_version=17)
    return import_onnx(f.getvalue())


def test_a_resnet_bottleneck_is_three_kernels():
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, c=32, width=8):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(c, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                nn.Conv2d(width, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            return torch.relu(self.body(x) + x)

    torch.manual_seed(0)
    g = _onnx_graph(Bottleneck(), torch.randn(1, 32, 12, 12))
    fused, report = optimize(g, 2, options={"conv_algorithm": "direct"})
    ops = [n.op for n in fused.nodes]
    assert ops.count("fused") == 3 and set(ops) <= {"fused", "layout_to_blocked", "layout_from_blocked"}, str(fused)
    assert [body[1:] for body in _bodies(fused)] == [["relu"], ["relu"], ["add", "relu"]]
    assert "batch_norm" not in str(fused)
    _check_same(g, fused, compiled=True, rtol=1e-4, atol=1e-4)


def test_a_transformer_layer_fuses_to_a_few_kernels():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, d=32, heads=2):
            super().__init__()
            self.h = heads
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).split(d, -1)
            q, k, v = (z.reshape(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
            att = ((q @ k.transpose(-1, -2)) / (d // self.h) ** 0.5).softmax(-1) @ v
            x = self.ln1(x + self.out(att.transpose(1, 2).reshape(b, t, d)))
            return self.ln2(x + self.ff(x))

    torch.manual_seed(0)
    g = _onnx_graph(Layer(), torch.randn(1, 8, 32))
    fused, _ = optimize(g, 2, disable=["attention"])  # rule-based fusion alone (attention: tests/passes/test_attention.py)
    unfused, _ = optimize(g, 2, disable=["fuse", "attention"])
    kinds = [n.op for n in fused.nodes]
    gemms = kinds.count("panel_matmul") + sum(ops.count("panel_matmul") for ops in _bodies(fused))
    assert gemms == 4  # q/k/v, out and the two feed-forward matmuls (bias folded)
    epilogues = [ops for ops in _bodies(fused) if ops[0] == "panel_matmul"]
    assert sorted(ops[-1] for ops in epilogues) == ["add", "add", "mul"]  # residual adds and the GELU
    assert sum(1 for ops in _bodies(fused) if "reduce_mean" in ops) == 2  # each layer norm one kernel
    assert sum(1 for ops in _bodies(fused) if "reduce_max" in ops and "exp" in ops) == 1  # softmax one kernel
    assert kernel_count(fused) <= 12 and kernel_count(unfused) >= 40, (kernel_count(fused), kernel_count(unfused))
    _check_same(g, fused, compiled=True, rtol=1e-4, atol=1e-4)


# -- property: random graphs -------------------------------------------------------------------------------------

UNARY = ["relu", "exp", "neg", "tanh", "sigmoid"]


@st.composite
def random_graphs(draw):
    """Random DAGs over (4, 8, 16) rows: element-wise ops, row reductions broadcast back, transposes, a matmul
    with a constant (an out-fusable anchor), and several outputs."""
    b = GraphBuilder()
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    full = [b.input("x", (4, 8, 16))]
    rows = []
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "rowop", "transpose", "matmul"]))
        x = draw(st.sampled_from(full))
        if kind == "unary":
            full.append(b.op(draw(st.sampled_from(UNARY)), x))
        elif kind == "binary":
            full.append(b.op(draw(st.sampled_from(["add", "mul", "sub"])), x, draw(st.sampled_from(full))))
        elif kind == "reduce":
            rows.append(b.op(draw(st.sampled_from(["reduce_sum", "reduce_max", "reduce_mean"])), x, axes=(2,),
                             keepdims=1))
        elif kind == "rowop" and rows:
            full.append(b.op(draw(st.sampled_from(["sub", "div", "add"])), x, draw(st.sampled_from(rows))))
        elif kind == "transpose":
            full.append(b.op("transpose", b.op("transpose", x, perm=(1, 0, 2)), perm=(1, 0, 2)))
        elif kind == "matmul":
            w = b.const(rng.standard_normal((16, 16)).astype("float32") / 4, "w")
            full.append(b.op("matmul", x, w))
    outs = [full[-1]] + draw(st.lists(st.sampled_from(full[1:] + rows), max_size=2, unique_by=id))
    return b.build(list(dict.fromkeys(outs)) if outs else full[-1])


@settings(max_examples=40, deadline=None)
@given(random_graphs())
def test_fusion_of_random_graphs_keeps_their_values(g):
    fused = _fused(g)
    fused.verify()
    inputs = [np.random.default_rng(0).uniform(-1, 1, v.shape).astype(v.dtype) for v in g.inputs]
    _check_same(g, fused, inputs, rtol=1e-4, atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(random_graphs())
def test_compiled_fused_random_graphs_match_numpy(g):
    inputs = [np.random.default_rng(0).uniform(-1, 1, v.shape).astype(v.dtype) for v in g.inputs]
    _check_same(g, _fused(g), inputs, compiled=True, rtol=1e-4, atol=1e-5)
