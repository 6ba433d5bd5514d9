"""A stride-1 dilated convolution runs as Winograd over its input's phases (passes/conv_phases.py): the same
numbers as the dilated convolution for every dilation, size and pad, chosen where the estimates say so."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from tilegrad.errors import ShapeError
from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.context import PassContext
from tilegrad.passes.conv_algorithm import conv_algorithm
from tilegrad.passes.conv_phases import Phases, phases_of
from tilegrad.target import Target, host

RNG = np.random.default_rng(0)


def _dilated(batch, channels, out, size, dilations, pads, relu=False):
    b = GraphBuilder()
    x = b.input("x", (batch, channels, *size))
    w = b.const((RNG.standard_normal((out, channels, 3, 3)) / (3 * channels)).astype("float32"))
    bias = b.const(RNG.standard_normal(out).astype("float32"))
    y = b.op("conv", x, w, bias, name="conv", pads=pads, dilations=dilations)
    g = b.build(b.op("relu", y) if relu else y)
    return g, RNG.standard_normal(x.shape).astype("float32")


def _run(g, target=None, **options):
    ctx = PassContext(1, target=target or host(), options=options)
    return conv_algorithm(g, ctx), ctx.notes


def test_phases_of_extends_each_side_to_a_multiple_of_its_dilation():
    attrs = {"strides": None, "dilations": [4, 2], "pads": [4, 2, 8, 2]}
    assert phases_of((1, 8, 14, 9), attrs) == Phases((4, 2), (2, 1), (1, 1, 2, 1))
    assert Phases((4, 2), (2, 1), (1, 1, 2, 1)).input_shape((2, 8, 14, 9)) == (16, 8, 4, 5)
    assert phases_of((1, 8, 14, 9), {**attrs, "pads": [2, 2, 2, 2]}) is None  # a pad the rate does not divide
    assert phases_of((1, 8, 14, 9), {**attrs, "strides": [2, 2]}) is None
    assert phases_of((1, 8, 14, 9), {**attrs, "dilations": [1, 1]}) is None


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 2), h=st.integers(3, 13), w=st.integers(3, 13), dh=st.integers(1, 4),
       dw=st.integers(2, 4), sides=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       algorithm=st.sampled_from(["winograd2", "winograd4"]))
def test_winograd_over_the_phases_keeps_the_meaning(batch, h, w, dh, dw, sides, algorithm):
    """Any dilation, size and pads (multiples of the dilation, none too wide for an output)."""
    pads = [k * (dh, dw)[i % 2] for i, k in enumerate(sides)]
    assume(h + pads[0] + pads[2] - 2 * dh >= 1 and w + pads[1] + pads[3] - 2 * dw >= 1)
    g, x = _dilated(batch, 5, 6, (h, w), [dh, dw], pads)
    out, _ = _run(g, conv_algorithm=algorithm)
    assert "winograd_conv" in [n.op for n in out.nodes]
    np.testing.assert_allclose(run_reference(out, [x])[0], run_reference(g, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size,dilation", [(12, 2), (10, 4)])  # the second extended to 12, its outputs cut
def test_the_compiled_model_matches(size, dilation):
    g, x = _dilated(1, 16, 24, (size, size), [dilation] * 2, [dilation] * 4, relu=True)
    out, report = optimize(g, 2, options={"conv_algorithm": "winograd4"})
    assert report.decisions["conv_algorithm"]["conv"].algorithm == "winograd4"
    np.testing.assert_allclose(compile_graph(out)(x), run_reference(g, [x])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("channels,dilation", [(256, 2), (512, 4)])
def test_deeplabs_dilated_blocks_run_winograd_over_their_phases(lanes, channels, dilation):
    """The dilated ResNet's 3 x 3 layers at output stride 8 (28 x 28): phases of 14 x 14 and 7 x 7."""
    g, _ = _dilated(1, channels, channels, (28, 28), [dilation] * 2, [dilation] * 4)
    out, (note,) = _run(g, Target.with_lanes(lanes))
    assert note.startswith("conv: winograd")
    conv = next(n for n in out.nodes if n.op == "winograd_conv")
    assert conv.inputs[0].shape == (dilation ** 2, channels, 28 // dilation, 28 // dilation)


def test_atrous_pyramid_rates_stay_direct():
    """ASPP's rate 12 on 28 x 28 reads half its taps in the padding: its phases of 3 x 3 would compute them all."""
    g, _ = _dilated(1, 512, 256, (28, 28), [12, 12], [12] * 4)
    out, (note,) = _run(g, Target.with_lanes(8))
    assert note.startswith("conv: direct") and [n.op for n in out.nodes] == ["blocked_conv"]


def test_winograd_by_name_on_a_dilation_whose_pads_it_cannot_split_says_why():
    g, _ = _dilated(1, 8, 8, (12, 12), [2, 2], [1] * 4)
    with pytest.raises(ShapeError, match=r"node 'conv': conv_algorithm 'winograd2' was requested, but .*dilation"):
        _run(g, conv_algorithm={"conv": "winograd2"})
