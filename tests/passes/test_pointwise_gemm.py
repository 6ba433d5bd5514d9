"""A 1 x 1 convolution left in NCHW after the layout pass, over a short reduction, runs as a GEMM of its output
channels by the pixels; the graph keeps its meaning (the reference interpreter and the compiled module)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.target import Target

RNG = np.random.default_rng(0)
EIGHT = Target.with_lanes(8)  # a short reduction: up to 32 input channels


def _conv(b, x, out_channels, kernel=1):
    w = b.const((RNG.standard_normal((out_channels, x.type.shape[1], kernel, kernel)) * 0.3).astype("float32"))
    bias = b.const(RNG.standard_normal(out_channels).astype("float32"))
    return b.op("conv", x, w, bias, pads=[kernel // 2] * 4)


def _lone(channels, kernel=1):
    b = GraphBuilder()
    x = b.input("x", (1, channels, 9, 11))
    return b.build(b.op("relu", _conv(b, x, 20, kernel)), ["y"])


def _ops(g):
    return [n.op for n in g.nodes] + [m.op for n in g.nodes if n.op == "fused" for m in n.attrs["body"].nodes]


def _check(g, out):
    x = [RNG.standard_normal(v.shape).astype(v.dtype) for v in g.inputs]
    np.testing.assert_allclose(compile_graph(out, target=EIGHT)(*x), run_reference(g, x)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels, kernel, gemm", [(32, 1, True), (3, 1, True), (33, 1, False), (16, 3, False)])
def test_a_lone_pointwise_convolution_over_a_short_reduction_runs_as_a_gemm(channels, kernel, gemm):
    g = _lone(channels, kernel)
    out, _ = optimize(g, 2, target=EIGHT)
    assert ("im2col_conv" in _ops(out)) == gemm
    _check(g, out)


def test_a_chain_of_convolutions_stays_blocked():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 9, 11))
    g = b.build(_conv(b, b.op("relu", _conv(b, x, 16)), 8), ["y"])
    out, _ = optimize(g, 2, target=EIGHT)
    assert "im2col_conv" not in _ops(out) and "conv_nchwc" in _ops(out)
    _check(g, out)


def test_an_algorithm_asked_for_is_kept():
    g = _lone(16)
    out, _ = optimize(g, 2, target=EIGHT, options={"conv_algorithm": "direct"})
    assert "im2col_conv" not in _ops(out)
