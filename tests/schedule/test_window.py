"""A sliding window in NCHW (depthwise convolution, pooling): the whole row up to 8 vectors as the register tile,
else a divisor of it, with a guarded last tile where no divisor fills a vector (a prime width), the taps unrolled,
the padded input made per plane where the plane fits a quarter of L2 and per output row where it does not; the
results equal the reference interpreter's on every width, stride and window. The blocked depthwise convolution
pads a plane once where it fits, its rows out of the parallel loop."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad.kernel import build
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.rules_nchwc import default_pad_per_row
from tilegrad.schedule.tiling import conv_tile, window_columns
from tilegrad.target import Target
from tilegrad.te import nn
from tilegrad.te import tensor as te
from tilegrad.te.interpret import interpret
from tilegrad.te.nn import nchwc
from tilegrad.tune.autotvm import find_template


def _depthwise(channels, height, width, kernel, stride):
    x = te.placeholder((1, channels, height, width), name="x")
    w = te.placeholder((channels, 1, kernel, kernel), name="w")
    return [x, w], nn.depthwise_conv2d(x, w, stride=stride, padding=kernel // 2, name="y")


def _check(inputs, out, target):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape).astype(np.float32) for t in inputs]
    sch = default_schedule(out, target)
    got = build(sch, args=inputs + [sch.state.outputs[0]]).run(*arrays)
    want = interpret(out, {t.name: a for t, a in zip(inputs, arrays)})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"trace:\n{sch.trace}")
    return sch


def test_a_prime_width_past_two_vectors_takes_whole_vectors():
    """37 columns: one vector twice and a guarded tail of 5, where its largest divisor (1) ran scalar."""
    assert conv_tile(1, 37, 16)[0] == 16
    assert conv_tile(1, 14, 16)[0] == 14 and conv_tile(1, 150, 16)[0] == 30  # a divisor that fills a vector


@pytest.mark.parametrize("width, lanes, columns", [
    (112, 16, 112), (112, 8, 56), (37, 16, 37), (14, 16, 14),  # the whole row, or a divisor, up to 8 vectors
    (150, 16, 75),                                               # the largest divisor within 8 vectors
    (149, 16, 16), (139, 8, 8),                                  # a prime past 8 vectors: one vector and a tail
])
def test_a_window_tile_spans_up_to_eight_vectors_of_its_row(width, lanes, columns):
    assert window_columns(width, lanes) == columns


@settings(max_examples=10, deadline=None)
@given(width=st.integers(1, 41), height=st.integers(1, 9), kernel=st.sampled_from([3, 5]),
       stride=st.integers(1, 2), lanes=st.sampled_from([8, 16]))
def test_depthwise_matches_the_interpreter(width, height, kernel, stride, lanes):
    _check(*_depthwise(3, height, width, kernel, stride), Target.with_lanes(lanes))


def _pad_loop(sch):
    """How many loops of the output, from its innermost, enclose the padding stage (3: a row's tiles and
    lanes and the row itself; 4: the plane's too)."""
    pad = next(s for s in sch.state.stages if s.name.endswith("_pad"))
    return len(sch.loops("y")) - sch.loops("y").index(pad.attach[1])


@pytest.mark.parametrize("channels, cores, l2_kib, enclosing", [
    (8, 2, 1024, 4),   # four planes a thread: the rows stay serial inside each plane, its padding made once
    (64, 2, 4, 3),     # a plane past a quarter of L2: padded per row
    (4, 2, 1024, 3),   # too few planes to share out: the rows run in parallel, each padded alone
])
def test_the_padded_plane_is_made_once_where_it_fits_and_the_planes_share_out(channels, cores, l2_kib, enclosing):
    inputs, out = _depthwise(channels, 20, 37, 3, 1)
    target = dataclasses.replace(Target.with_lanes(16), cores=cores, l2_bytes=l2_kib * 1024)
    assert _pad_loop(_check(inputs, out, target)) == enclosing


def test_a_pool_on_a_prime_width_matches_the_interpreter():
    x = te.placeholder((1, 5, 9, 37), name="x")
    _check([x], nn.max_pool2d(x, 3, stride=1, padding=1, name="y"), Target.with_lanes(16))


def _blocked_depthwise(blocks, size, kernel, lanes):
    x = te.placeholder((1, blocks, size, size, lanes), name="x")
    w = te.placeholder((blocks, kernel, kernel, lanes), name="w")
    return [x, w], nchwc.depthwise_conv2d_nchwc(x, w, 1, kernel // 2, name="y")


@pytest.mark.parametrize("blocks, size, l2_kib, place", [(72, 7, 1024, 2), (72, 7, 16, 1), (30, 14, 1024, 2)])
def test_a_blocked_5x5_window_pads_each_plane_once_where_it_fits(blocks, size, l2_kib, place):
    """MNASNet's 5 x 5 on 7 x 7 maps: the padded plane of a channel block (11 x 11 x 16 floats, 7.7 KiB) made once,
    where per output row each input row was copied five times; per row where it does not fit a quarter of L2. On
    30 blocks (480 channels on 14 x 14) the rows would join the parallel loop for its chunks; they stay a loop
    inside each plane, which its copy needs, as 15 planes a thread share out."""
    target = dataclasses.replace(Target.with_lanes(16), l2_bytes=l2_kib * 1024, cores=2)
    inputs, out = _blocked_depthwise(blocks, size, 5, 16)
    assert default_pad_per_row(Schedule([out]), "y", target) == place
    assert _pad_loop(_check(inputs, out, target)) == {2: 5, 1: 4}[place]  # the lanes' loop inside the columns


def test_the_autotvm_template_starts_where_the_rule_does_with_planes_shared_out():
    inputs, out = _depthwise(16, 20, 37, 3, 1)  # 16 planes: the rows would join the parallel loop
    target = dataclasses.replace(Target.with_lanes(16), cores=2)
    template = find_template([out])
    config = template.space([out], target).default()
    assert template.schedule(config, [out], target).trace == default_schedule(out, target).trace


def test_the_autotvm_template_starts_where_the_rule_does_on_a_blocked_plane():
    inputs, out = _blocked_depthwise(30, 14, 5, 16)  # the padded plane made once, the rows out of the parallel loop
    target = dataclasses.replace(Target.with_lanes(16), cores=2, l2_bytes=1024 * 1024)
    template = find_template([out])
    config = template.space([out], target).default()
    assert template.schedule(config, [out], target).trace == default_schedule(out, target).trace
