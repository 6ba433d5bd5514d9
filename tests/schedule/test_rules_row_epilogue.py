"""The default schedule of a packed GEMM whose epilogue normalises its rows (schedule/rules_row_epilogue.py):
GEMM + bias + residual + layer norm (and RMS norm, softmax over N) compiled as one kernel against NumPy, with and
without the pre-norm rows as a second output, over odd shapes; and a small BERT-like ONNX model against ONNX
Runtime."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilegrad.executor import compile_graph
from tilegrad.ir.compute import node_compute
from tilegrad.ir.graph import GraphBuilder
from tilegrad.loop.lower import lower
from tilegrad.loop.printer import format_kernel
from tilegrad.passes import optimize
from tilegrad.passes.conv_algorithm import matmul_panel, matmul_tile_rows
from tilegrad.passes.memory_plan import kernel_count
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import host

EPS = 1e-5


def _graph(m, k, n, norm="layer_norm", later_reader=False, seed=0):
    """norm(x @ w + bias + r) over the N columns, and with `later_reader` also exp(x @ w + bias + r); returns the
    graph and its inputs and constants for the NumPy reference."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype("float32")
    bias = rng.standard_normal(n).astype("float32")
    gamma, beta = np.linspace(0.5, 1.5, n, dtype="float32"), np.linspace(-1, 1, n, dtype="float32")
    b = GraphBuilder()
    x, r = b.input("x", (m, k)), b.input("r", (m, n))
    h = b.op("add", b.op("add", b.op("matmul", x, b.const(w, "w")), b.const(bias, "bias")), r, name="h")
    if norm == "layer_norm":
        y = b.op("layer_norm", h, b.const(gamma, "gamma"), b.const(beta, "beta"), axis=-1, epsilon=EPS)
    elif norm == "rms_norm":
        mean_square = b.op("reduce_mean", b.op("mul", h, h), axes=(1,), keepdims=1)
        scale = b.op("sqrt", b.op("add", mean_square, b.const(np.float32(EPS), "eps")))
        y = b.op("mul", b.op("div", h, scale), b.const(gamma, "gamma"))
    else:
        y = b.op("softmax", h, axis=-1)
    g = b.build([y, b.op("exp", h, name="later")] if later_reader else [y])
    return g, (w, bias, gamma, beta)


def _numpy(x, r, consts, norm):
    w, bias, gamma, beta = (c.astype(np.float64) for c in consts)
    h = x.astype(np.float64) @ w + bias + r
    if norm == "layer_norm":
        centred = h - h.mean(-1, keepdims=True)
        y = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + EPS) * gamma + beta
    elif norm == "rms_norm":
        y = h / np.sqrt((h ** 2).mean(-1, keepdims=True) + EPS) * gamma
    else:
        e = np.exp(h - h.max(-1, keepdims=True))
        y = e / e.sum(-1, keepdims=True)
    return h, y


def _check(m, k, n, norm="layer_norm", later_reader=False):
    g, consts = _graph(m, k, n, norm, later_reader)
    fused, _ = optimize(g, 2, options={"fusion": "stitch"})
    kernel = next(node for node in fused.nodes if node.op == "fused")
    assert kernel.attrs["body"].nodes[0].op == "panel_matmul"
    assert kernel_count(fused) == 1 + later_reader
    assert len(kernel.outputs) == 1 + later_reader
    rng = np.random.default_rng(m * 1000 + n)
    x, r = rng.uniform(-1, 1, (m, k)).astype("float32"), rng.uniform(-1, 1, (m, n)).astype("float32")
    outs = compile_graph(fused)(x, r)
    outs = outs if isinstance(outs, list) else [outs]
    h, y = _numpy(x, r, consts, norm)
    np.testing.assert_allclose(outs[0], y, rtol=1e-4, atol=1e-4)
    if later_reader:
        np.testing.assert_allclose(outs[1], np.exp(h), rtol=1e-4, atol=1e-4)
    return kernel


def _loops(kernel) -> tuple[str, str]:
    """The default schedule's trace and loop IR of a fused node, for a host of 4 cores."""
    _, outs = node_compute(kernel)
    sch = default_schedule(outs, dataclasses.replace(host(), cores=4))
    return str(sch.trace), format_kernel(lower(sch.state, "k"))


@settings(max_examples=8, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.sampled_from([5, 16, 24, 33, 40, 70]),
       later_reader=st.booleans())
def test_gemm_bias_residual_layer_norm_matches_numpy(m, k, n, later_reader):
    _check(m, k, n, later_reader=later_reader)


@pytest.mark.parametrize("norm", ["rms_norm", "softmax"])
def test_other_row_normalisations_match_numpy(norm):
    _check(13, 20, 48, norm)


def test_the_pre_norm_rows_stay_in_a_block_buffer():
    trace, ir = _loops(_check(120, 24, 64))
    assert "parallel for" in ir and "compute_with" not in trace
    block = ir.index("parallel for")
    panel = matmul_panel(host(), 64)
    rows = matmul_tile_rows(120, host(), panel // host().vector_lanes)
    kept = re.search(r"allocate add: float32\[(\d+), 64\] local", ir[block:])  # a block of whole tiles, not all rows
    assert kept and int(kept[1]) % rows == 0 and int(kept[1]) < 120
    assert ir.index(f"allocate gemm_padded: float32[{rows}, {panel}] local") > block  # a register tile inside it


def test_the_second_output_is_written_in_the_block_it_is_computed_in():
    trace, ir = _loops(_check(120, 24, 64, later_reader=True))
    assert "compute_with(add, " in trace
    block = ir.index("parallel for")
    assert ir.index("allocate gemm_padded") > block and ir.index("  add[") > block
    assert "allocate add:" not in ir  # the kernel's output, not a buffer of its own


def _bert_like_onnx(seq=16, hidden=32, inner=64, seed=0):
    """Post-LN encoder layer without attention: LN(x + x W1 + b1), then LN(y + gelu(y W2 + b2) W3 + b3)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def const(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype("float32"), name)

    weights = [const("w1", hidden, hidden), const("b1", hidden), const("w2", hidden, inner), const("b2", inner),
               const("w3", inner, hidden), const("b3", hidden), const("g1", hidden), const("e1", hidden),
               const("g2", hidden), const("e2", hidden)]
    weights += [numpy_helper.from_array(np.array(v, "float32"), name)
                for name, v in (("sqrt2", np.sqrt(2)), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["p1"]), helper.make_node("Add", ["p1", "b1"], ["q1"]),
             helper.make_node("Add", ["q1", "x"], ["s1"]),
             helper.make_node("LayerNormalization", ["s1", "g1", "e1"], ["y1"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["y1", "w2"], ["p2"]), helper.make_node("Add", ["p2", "b2"], ["q2"]),
             helper.make_node("Div", ["q2", "sqrt2"], ["d2"]), helper.make_node("Erf", ["d2"], ["e2_"]),
             helper.make_node("Add", ["e2_", "one"], ["f2"]), helper.make_node("Mul", ["q2", "f2"], ["g2_"]),
             helper.make_node("Mul", ["g2_", "half"], ["a2"]),  # GELU as BERT's export spells it
             helper.make_node("MatMul", ["a2", "w3"], ["p3"]), helper.make_node("Add", ["p3", "b3"], ["q3"]),
             helper.make_node("Add", ["q3", "y1"], ["s3"]),
             helper.make_node("LayerNormalization", ["s3", "g2", "e2"], ["y"], axis=-1, epsilon=1e-5)]
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_a_bert_like_layer_matches_onnx_runtime():
    import onnxruntime as ort

    from tilegrad.api import compile_with_report
    from tilegrad.frontend.onnx import import_onnx

    proto = _bert_like_onnx()
    x = np.random.default_rng(1).standard_normal((1, 16, 32)).astype("float32")
    want = ort.InferenceSession(proto).run(["y"], {"x": x})[0]
    stitched = compile_with_report(proto, fusion="stitch")
    np.testing.assert_allclose(stitched.module(x=x), want, rtol=1e-4, atol=1e-4)
    rules, _ = optimize(import_onnx(proto), 2)
    assert stitched.kernels == kernel_count(rules) - 2  # both layer norms in their products' kernels


@pytest.mark.parametrize("later_reader", [False, True])
def test_the_default_sketchs_points_match_the_reference(later_reader):
    """The rule's knobs (rows per block, parallel grain, the tile's unrolling) as a tuning space: sampled points
    give the same kernel outputs."""
    import random

    from tilegrad.ir.registry import lookup
    from tilegrad.kernel import build
    from tilegrad.schedule.sketch import generate_sketches

    g, _ = _graph(40, 24, 33, later_reader=later_reader)
    fused, _ = optimize(g, 2, options={"fusion": "stitch"})
    node = next(n for n in fused.nodes if n.op == "fused")
    inputs, outputs = node_compute(node)
    sketch = generate_sketches(lambda: node_compute(node)[1])[0]
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, t.shape).astype(t.dtype) for t in inputs]
    want = lookup("fused").reference(*arrays, body=node.attrs["body"])
    want = want if isinstance(want, tuple) else (want,)
    seen = set()
    for seed in range(4):
        params = sketch.sample(random.Random(seed))
        seen.add(tuple(sorted((k, v) for k, v in params.items() if k.endswith("_mb"))))
        got = [np.empty(t.shape, t.dtype) for t in outputs]
        build(node, sketch.bind(params))(*arrays, *got)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert len(seen) > 1
