"""The conv_regions pass: a padded blocked convolution split into regions that read no padding. The bands are
exact (every tap a region reads is inside the input, every tap it leaves out is not), the split keeps the
graph's numbers (the NumPy oracle, and compiled), and it happens where the estimate says it pays: atrous rates
that read mostly padding, not a pad of one."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad.errors import ShapeError
from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.ir.registry import TensorType, lookup
from tilegrad.passes import conv_regions as regions_module
from tilegrad.passes import optimize
from tilegrad.passes.conv_regions import bands
from tilegrad.te.nn._window import output_extents

DIRECT = {"conv_algorithm": "direct"}


@given(size=st.integers(1, 30), kernel=st.integers(1, 5), stride=st.integers(1, 3), dilation=st.integers(1, 8),
       pads=st.tuples(st.integers(0, 12), st.integers(0, 12)))
def test_bands_are_exactly_the_taps_inside_the_input(size, kernel, stride, dilation, pads):
    before, after = pads
    if size + before + after < dilation * (kernel - 1) + 1:
        return
    (out,) = output_extents("conv", (size,), (kernel,), (stride,), ((before, after),), (dilation,))
    found = bands(size, kernel, stride, before, dilation, out)
    inside = [[0 <= o * stride + j * dilation - before < size for j in range(kernel)] for o in range(out)]
    if found is None:
        assert not all(any(row) for row in inside)
        return
    assert found[0].start == 0 and found[-1].stop == out
    assert all(a.stop == b.start for a, b in zip(found, found[1:]))
    for band in found:
        assert band.before <= 0 and band.after <= 0, "a region never pads"
        extent = output_extents("conv", (size,), (band.last - band.first,), (stride,),
                                ((band.before, band.after),), (dilation,), )
        assert extent == (band.stop - band.start,)
        for o in range(band.start, band.stop):
            assert inside[o] == [band.first <= j < band.last for j in range(kernel)]


def _aspp(size=12, rate=6, channels=32, out=16, pad=None):
    """A 1 x 1 convolution, then a 3 x 3 one at `rate` (padding `rate`, as DeepLab's head), then relu."""
    rng = np.random.default_rng(rate)
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    w1 = b.const((rng.standard_normal((channels, channels, 1, 1)) * 0.2).astype("float32"))
    h = b.op("relu", b.op("conv", x, w1))
    w2 = b.const((rng.standard_normal((out, channels, 3, 3)) * 0.2).astype("float32"))
    bias = b.const(rng.standard_normal(out).astype("float32"))
    pad = rate if pad is None else pad
    y = b.op("relu", b.op("conv", h, w2, bias, pads=[pad] * 4, dilations=[rate, rate]))
    return b.build(y, ["y"])


def _regions(g):
    return [n for n in g.nodes if n.op == "conv_nchwc" and n.attrs["taps"] is not None]


def test_an_atrous_convolution_runs_as_regions_and_keeps_its_numbers():
    """Rate 6 on 12 x 12: rows 0-5 read taps 1-2, rows 6-11 taps 0-1 (and so the columns): four regions of 2 x 2
    taps, 4/9 of the multiply-adds, no padded copy."""
    g = _aspp()
    out, report = optimize(g, 2, options=DIRECT)
    regions = _regions(out)
    assert len(regions) == 4 and all(n.inputs[1].shape[2:4] == (3, 3) for n in regions)
    assert sorted(tuple(n.attrs["taps"]) for n in regions) == [(0, 0, 2, 2), (0, 1, 2, 3), (1, 0, 3, 2),
                                                                (1, 1, 3, 3)]
    assert all(p <= 0 for n in regions for p in n.attrs["pads"])
    assert any("regions reading no padding" in note for r in report.records for note in r.notes)
    x = [np.random.default_rng(1).standard_normal((1, 32, 12, 12)).astype("float32")]
    want = run_reference(g, x)[0]
    np.testing.assert_allclose(run_reference(out, x)[0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(compile_graph(out)(*x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size,rate", [(7, 1), (28, 1), (28, 2), (28, 4)])
def test_convolutions_whose_padding_is_cheap_stay_whole(size, rate):
    """A pad of one leaves one-row border bands; rate 4 on 28 x 28 leaves 4-column bands whose narrow tiles cost
    more than the 18% of multiply-adds they save (measured 0.45x the speed)."""
    out, _ = optimize(_aspp(size, rate), 2, options=DIRECT)
    assert not _regions(out) and not any(n.op == "concat" for n in out.nodes)


@settings(max_examples=6, deadline=None)
@given(size=st.integers(5, 16), rate=st.integers(2, 9), stride=st.integers(1, 2), pad=st.integers(1, 9),
       lanes_of_output=st.sampled_from([8, 24]))
def test_forced_regions_equal_the_whole_convolution(size, rate, stride, pad, lanes_of_output):
    """Any split (the estimate's threshold lifted), with strides, pads other than the rate and output channels
    that do not fill a block, compiled, equals the original graph."""
    rng = np.random.default_rng(size * rate)
    b = GraphBuilder()
    x = b.input("x", (1, 8, size, size))
    w1 = b.const((rng.standard_normal((16, 8, 1, 1)) * 0.3).astype("float32"))
    h = b.op("conv", x, w1)
    w2 = b.const((rng.standard_normal((lanes_of_output, 16, 3, 3)) * 0.3).astype("float32"))
    if size + 2 * pad < 2 * rate + 1:
        return
    y = b.op("conv", h, w2, pads=[pad] * 4, dilations=[rate, rate], strides=[stride, stride])
    g = b.build(b.op("relu", y), ["y"])
    with mock.patch.object(regions_module, "MIN_GAIN", -1e9):
        out, _ = optimize(g, 2, options=DIRECT)
    inputs = [rng.standard_normal((1, 8, size, size)).astype("float32")]
    want = run_reference(g, inputs)[0]
    np.testing.assert_allclose(compile_graph(out)(*inputs), want, rtol=1e-4, atol=1e-4)


def test_negative_pads_crop_only_where_the_compiler_asks():
    """ONNX's Conv keeps refusing a negative pad; the blocked convolution reads it as a crop."""
    x, w = TensorType((1, 4, 9, 9), "float32"), TensorType((4, 4, 3, 3), "float32")
    conv = lookup("conv")
    with pytest.raises(ShapeError, match="at least 0"):
        conv.infer(x, w, **conv.bind_attrs({"pads": [-1, 0, 0, 0]}, "c"))
    blocked = lookup("conv_nchwc")
    xb, wb = TensorType((1, 1, 9, 9, 4), "float32"), TensorType((1, 4, 3, 3, 4), "float32")
    (y,) = blocked.infer(xb, wb, **blocked.bind_attrs({"pads": [-2, 0, -1, 0], "taps": [0, 0, 3, 2]}, "c"))
    assert y.shape == (1, 1, 4, 8, 4)
    with pytest.raises(ShapeError, match="taps"):
        blocked.infer(xb, wb, **blocked.bind_attrs({"taps": [0, 0, 4, 3]}, "c"))
