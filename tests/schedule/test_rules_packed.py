"""The packed convolution's rule: a row whose input does not fit in L2 runs in chunks outside the channel blocks,
with the same numbers as the reference whether or not the chunks divide the row; a 2-D window reaching one pixel
past each edge reads its input in place, a 1-D or wider one a padded copy."""

import dataclasses

import numpy as np
import pytest

from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.schedule.rules_packed import default_packed_pad_in_place
from tilegrad.target import host

RNG = np.random.default_rng(0)


def _conv1d(length: int, channels: int, stride: int):
    b = GraphBuilder()
    x = b.input("x", (1, channels, length))
    w = b.const((RNG.standard_normal((40, channels, 3)) / 3).astype("float32"))
    y = b.op("conv", x, w, b.const(RNG.standard_normal(40).astype("float32")), name="conv1d", strides=(stride,),
             pads=(1, 1))
    return b.build(y)


@pytest.mark.parametrize("l2_kib, stride", [(512, 1), (16, 1), (16, 2), (4, 2)])
def test_a_long_1d_convolution_in_chunks_of_its_row_keeps_the_numbers(l2_kib, stride):
    """8 input channels x 303 padded columns: 9.5 KiB of input per output row, whole under a 512 KiB L2, in
    chunks under a 16 KiB one (18 tiles of 7 columns, the last chunk of 7) or a 4 KiB one (2 strided tiles)."""
    target = dataclasses.replace(host(), l2_bytes=l2_kib * 1024)
    g = _conv1d(301, 8, stride)
    xs = RNG.standard_normal((1, 8, 301)).astype("float32")
    out, _ = optimize(g, 2, target=target)
    np.testing.assert_allclose(compile_graph(out, target=target)(xs), run_reference(g, [xs])[0], rtol=1e-4,
                               atol=1e-4)



@pytest.mark.parametrize("kernel, pad, stride, in_place", [((3, 3), 1, 2, 1), ((3, 3), 1, 1, 1), ((7, 7), 3, 2, 0),
                                                           ((1, 3), 1, 1, 0)])
def test_a_2d_window_one_pixel_past_the_edges_reads_in_place(kernel, pad, stride, in_place):
    pads = ((pad if kernel[0] > 1 else 0,) * 2, (pad,) * 2)
    attrs = {"kernel": kernel, "padding": pads, "dilation": (1, 1), "stride": (stride, stride)}
    assert default_packed_pad_in_place(attrs) == in_place
    b = GraphBuilder()
    x = b.input("x", (1, 3, 13, 12))
    w = b.const((RNG.standard_normal((20, 3, *kernel)) / 3).astype("float32"))
    g = b.build(b.op("conv", x, w, strides=(stride, stride), pads=(pads[0][0], pads[1][0]) * 2))
    xs = RNG.standard_normal((1, 3, 13, 12)).astype("float32")
    out, _ = optimize(g, 2)
    np.testing.assert_allclose(compile_graph(out)(xs), run_reference(g, [xs])[0], rtol=1e-4, atol=1e-4)
