"""NCHW[x]c computes equal their NCHW counterparts lane for lane (padding, strides, dilation, channels that are not
whole blocks), and compile under their default schedule to the same numbers."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import ShapeError
from tilegrad.ir.ops.layout import block_array, unblock_array
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.knobs import Defaults
from tilegrad.target import Target, host
from tilegrad.schedule.rules_nchwc import default_blocks, tile_columns
from tilegrad.te import dims, nn
from tilegrad.te.specialize import DYNAMIC_AXES, specialize
from tilegrad.te.interpret import interpret
from tilegrad.te.nn import nchwc

from ..schedule.forced import Forced

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _pack_conv(w: np.ndarray, block: int, in_lanes: int) -> np.ndarray:
    out_channels, channels, kh, kw = w.shape
    padded = np.zeros((-(-out_channels // block) * block, in_lanes, kh, kw), "float32")
    padded[:out_channels, :channels] = w
    return np.ascontiguousarray(padded.reshape(-1, block, in_lanes, kh, kw).transpose(0, 2, 3, 4, 1))


def _pack_depthwise(w: np.ndarray, block: int) -> np.ndarray:
    channels, _, kh, kw = w.shape
    padded = np.zeros((-(-channels // block) * block, kh, kw), "float32")
    padded[:channels] = w[:, 0]
    return np.ascontiguousarray(padded.reshape(-1, block, kh, kw).transpose(0, 2, 3, 1))


def _packed_bias(bias: np.ndarray, block: int) -> np.ndarray:
    padded = np.zeros(-(-bias.size // block) * block, "float32")
    padded[:bias.size] = bias
    return padded.reshape(-1, block)


def test_layout_transforms_round_trip_with_zero_padded_lanes():
    x = te.placeholder((2, 11, 3, 5), name="X")
    xv = _rand(2, 11, 3, 5)
    blocked = nchwc.to_blocked(x, 4)
    assert blocked.shape == (2, 3, 3, 5, 4)
    got = interpret(blocked, {"X": xv})
    np.testing.assert_array_equal(got, block_array(xv, 4))
    assert not got[:, 2, :, :, 3].any()
    back = nchwc.from_blocked(te.placeholder(blocked.shape, name="B"), 11)
    np.testing.assert_array_equal(interpret(back, {"B": got}), xv)



@settings(max_examples=12, deadline=None)
@given(channels=st.integers(1, 40), width=st.integers(1, 37), block=st.sampled_from([4, 8, 16]),
       dtype=st.sampled_from(["float32", "uint8"]))
def test_compiled_layout_copies_equal_numpys_for_any_channels_and_width(channels, width, block, dtype):
    """The copies in and out of the blocked layout, tiled in squares of pixels x a block's channels, on every
    tail: channels that are not whole blocks, rows that are not whole vectors."""
    xv = RNG.integers(0, 255, (2, channels, 3, width)).astype(dtype)
    x = te.placeholder(xv.shape, name="X", dtype=dtype)
    blocked = _compiled(nchwc.to_blocked(x, block), [x], [xv])
    np.testing.assert_array_equal(blocked, block_array(xv, block))
    b = te.placeholder(blocked.shape, name="B", dtype=dtype)
    np.testing.assert_array_equal(_compiled(nchwc.from_blocked(b, channels), [b], [blocked]), xv)


def test_layout_copies_unroll_a_blocks_channels_inside_a_vector_of_pixels():
    """Both sides then move whole vectors: a vector along the channels or along the pixels alone touches one
    element per cache line of the other side."""
    x = te.placeholder((1, 20, 5, 19), name="X")
    text = str(default_schedule(nchwc.to_blocked(x, 8), Target.with_lanes(8)).trace)
    assert "reorder(to_blocked, order=[n, cb, h, w_0, w_1, ci])" in text and "unroll(to_blocked.ci)" in text
    b = te.placeholder((1, 3, 5, 19, 8), name="B")
    text = str(default_schedule(nchwc.from_blocked(b, 20), Target.with_lanes(8)).trace)
    assert "reorder(from_blocked, order=[n, c_0, h, w_0, w_1, c_1])" in text and "unroll(from_blocked.c_1)" in text


@pytest.mark.parametrize("channels,inner,block", [(11, 4, 8), (20, 8, 16), (20, 16, 8), (16, 16, 8), (4, 16, 8)])
def test_reblock_equals_unblocking_then_blocking_and_zeroes_the_lanes_past_the_channels(channels, inner, block):
    """The padding lanes of the input hold garbage (an element-wise op need not keep them zero); the output's are
    zero."""
    xv = block_array(_rand(1, channels, 3, 2), inner)
    xv[:, -1, :, :, channels % inner or inner:] = 7.0
    x = te.placeholder(xv.shape, name="X")
    out = nchwc.reblock(x, block, channels)
    want = block_array(unblock_array(xv, channels), block)
    assert out.shape == want.shape
    np.testing.assert_array_equal(interpret(out, {"X": xv}), want)
    np.testing.assert_array_equal(_compiled(out, [x], [xv]), want)
    with pytest.raises(ShapeError, match="filling the last"):
        nchwc.reblock(x, block, channels + inner)

@pytest.mark.parametrize("channels,out_channels,kernel,stride,padding,dilation", [
    (6, 7, 3, 2, 1, 1),
    (8, 16, 1, 1, 0, 1),
    (5, 9, (3, 2), (1, 2), ((2, 0), (1, 1)), (2, 1)),
])
@pytest.mark.parametrize("blocked_input", [True, False])
def test_conv2d_nchwc_equals_conv2d(channels, out_channels, kernel, stride, padding, dilation, blocked_input):
    block = 4
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    xv, wv, bv = _rand(2, channels, 9, 8), _rand(out_channels, channels, kh, kw), _rand(out_channels)
    x4, w4 = te.placeholder(xv.shape, name="X4"), te.placeholder(wv.shape, name="W4")
    plain = nn.conv2d(x4, w4, stride, padding, dilation)
    want = interpret(plain, {"X4": xv, "W4": wv}) + bv[:, None, None]
    x_in = block_array(xv, block) if blocked_input else xv
    lanes = x_in.shape[1] * block if blocked_input else channels
    wp = _pack_conv(wv, block, lanes)
    x, w, bias = te.placeholder(x_in.shape, name="X"), te.placeholder(wp.shape, name="W"), te.placeholder(
        (wp.shape[0], block), name="B")
    out = nchwc.conv2d_nchwc(x, w, stride, padding, dilation, bias=bias)
    assert out.shape == (2, wp.shape[0], *want.shape[2:], block)
    got = interpret(out, {"X": x_in, "W": wp, "B": _packed_bias(bv, block)})
    np.testing.assert_allclose(unblock_array(got, out_channels), want, rtol=1e-5, atol=1e-5)
    assert not got[:, -1, ..., out_channels % block or block:].any()  # the padded output lanes stay zero


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 1, 1), ((2, 1), ((0, 1), (2, 1)), (1, 2))])
def test_depthwise_conv2d_nchwc_equals_grouped_conv2d(stride, padding, dilation):
    block, channels = 8, 13
    xv, wv = _rand(1, channels, 10, 9), _rand(channels, 1, 3, 3)
    x4, w4 = te.placeholder(xv.shape, name="X4"), te.placeholder(wv.shape, name="W4")
    want = interpret(nn.depthwise_conv2d(x4, w4, stride, padding, dilation), {"X4": xv, "W4": wv})
    x = te.placeholder((1, 2, 10, 9, block), name="X")
    w = te.placeholder((2, 3, 3, block), name="W")
    got = interpret(nchwc.depthwise_conv2d_nchwc(x, w, stride, padding, dilation),
                    {"X": block_array(xv, block), "W": _pack_depthwise(wv, block)})
    np.testing.assert_allclose(unblock_array(got, channels), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode", [(3, 2, 1, False), ((2, 3), (2, 1), 0, True)])
def test_pools_equal_their_nchw_forms(kernel, stride, padding, ceil_mode):
    block, channels = 4, 6
    xv = _rand(2, channels, 9, 8)
    x4, x = te.placeholder(xv.shape, name="X4"), te.placeholder((2, 2, 9, 8, block), name="X")
    cases = [
        (nn.max_pool2d(x4, kernel, stride, padding, ceil_mode=ceil_mode),
         nchwc.max_pool2d_nchwc(x, kernel, stride, padding, ceil_mode=ceil_mode)),
        (nn.avg_pool2d(x4, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=False),
         nchwc.avg_pool2d_nchwc(x, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=False)),
        (nn.global_avg_pool(x4), nchwc.global_avg_pool_nchwc(x)),
    ]
    for plain, blocked in cases:
        want = interpret(plain, {"X4": xv})
        got = interpret(blocked, {"X": block_array(xv, block)})
        np.testing.assert_allclose(unblock_array(got, channels), want, rtol=1e-5, atol=1e-6)


def _compiled(out: te.Tensor, placeholders, arrays):
    return build(default_schedule(out), args=[*placeholders, out]).run(*arrays)


def test_compiled_conv_and_depthwise_match_numpy():
    """Shapes big enough for the parallel loop and a full register tile, with channels that are not whole blocks."""
    block = host().vector_lanes
    xv, wv, bv, dv = _rand(1, 20, 14, 28), _rand(19, 20, 3, 3), _rand(19), _rand(20, 1, 3, 3)
    x4, w4, d4 = (te.placeholder(a.shape, name=n) for a, n in ((xv, "X4"), (wv, "W4"), (dv, "D4")))
    want_conv = interpret(nn.conv2d(x4, w4, 1, 1), {"X4": xv, "W4": wv}) + bv[:, None, None]
    want_dw = interpret(nn.depthwise_conv2d(x4, d4, 2, 1), {"X4": xv, "D4": dv})
    xb = block_array(xv, block)
    wp, bp, dp = _pack_conv(wv, block, xb.shape[1] * block), _packed_bias(bv, block), _pack_depthwise(dv, block)
    x, w, bias, d = (te.placeholder(a.shape, name=n) for a, n in ((xb, "X"), (wp, "W"), (bp, "B"), (dp, "D")))
    got = _compiled(nchwc.conv2d_nchwc(x, w, 1, 1, bias=bias), [x, w, bias], [xb, wp, bp])
    np.testing.assert_allclose(unblock_array(got, 19), want_conv, rtol=1e-4, atol=1e-4)
    got = _compiled(nchwc.depthwise_conv2d_nchwc(x, d, 2, 1), [x, d], [xb, dp])
    np.testing.assert_allclose(unblock_array(got, 20), want_dw, rtol=1e-4, atol=1e-4)


def test_compiled_pools_match_numpy():
    xv = _rand(1, 16, 13, 12)
    x4, x = te.placeholder(xv.shape, name="X4"), te.placeholder((1, 2, 13, 12, 8), name="X")
    xb = block_array(xv, 8)
    pairs = [(nn.max_pool2d(x4, 3, 2, 1), nchwc.max_pool2d_nchwc(x, 3, 2, 1)),
             (nn.avg_pool2d(x4, 3, 2, 1, ceil_mode=True), nchwc.avg_pool2d_nchwc(x, 3, 2, 1, ceil_mode=True)),
             (nn.global_avg_pool(x4), nchwc.global_avg_pool_nchwc(x))]
    for plain, blocked in pairs:
        got = _compiled(blocked, [x], [xb])
        np.testing.assert_allclose(unblock_array(got), interpret(plain, {"X4": xv}), rtol=1e-5, atol=1e-5)


def test_schedule_accumulates_a_row_tile_vectorised_across_the_block():
    x = te.placeholder((1, 8, 14, 14, 8), name="X")
    w = te.placeholder((4, 64, 3, 3, 8), name="W")
    target = Target.with_lanes(8)  # AVX2
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w, 1, 1), target).trace)
    assert "split(conv2d_nchwc.w, factor=14)" in text  # 14 accumulators + a weight vector + a broadcast: 16 registers
    assert "vectorize(conv2d_nchwc_local.ci)" in text and "unroll(conv2d_nchwc_local.w)" in text
    assert "parallel(" in text
    assert [tile_columns(width, 8, target) for width in (7, 14, 56, 112, 17)] == [7, 14, 14, 14, 9]  # 9 + 8


def test_avx2_tiles_span_two_blocks_where_their_six_columns_fill_the_rows():
    """Two blocks x 6 columns on rows of 28, 56 and 112 (a tail of at most a tenth of the tiles' columns); one
    block x 14 on 14 columns (5 + 5 + 4 in two blocks) and x 7 on 7; one on a short reduction (a stem's) and on
    an image of one row."""
    avx2 = Target.with_lanes(8)
    steps = 1152  # a 3 x 3 window over 128 channels
    assert [default_blocks(w, 8, 4, avx2, depth=steps) for w in (28, 56, 112, 12, 14, 7)] == [2, 2, 2, 2, 1, 1]
    assert default_blocks(112, 8, 4, avx2, depth=72) == 1  # 3 x 3 over the 3 channels of an image, in one block
    assert default_blocks(28, 8, 3, avx2, depth=steps) == 1  # an odd count of blocks
    assert default_blocks(28, 16, 4, avx2, depth=steps) == 1  # two-vector blocks: 6 columns take 12 accumulators
    # a 1-D convolution's one row (Whisper's 384 -> 384 over 1500): one block x 14 columns, as measured
    assert [default_blocks(1500, 8, 48, avx2, depth=steps, one_row=r) for r in (False, True)] == [2, 1]
    x = te.placeholder((1, 8, 28, 28, 8), name="X")
    w = te.placeholder((4, 64, 3, 3, 8), name="W")
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w, 1, 1), avx2).trace)
    assert "split(conv2d_nchwc.w, factor=6)" in text and "split(conv2d_nchwc.cb, factor=2)" in text


def test_a_dynamic_width_chooses_its_blocks_by_the_widths_it_will_take():
    """Specialised at 32 (an image of 64..512 at its representative 256), two blocks x 6 columns fill 32 / 36 of
    the row, under TWO_BLOCK_FILL, but 0.94 on average over the widths around it (28 among them): the dynamic
    kernel takes two blocks, as the 28-wide one specialised does; the specialisation says which axes were
    dynamic."""
    avx2 = Target.with_lanes(8)
    assert [default_blocks(32, 8, 4, avx2, depth=1152, dynamic_width=d) for d in (False, True)] == [1, 2]
    assert default_blocks(16, 8, 4, avx2, depth=1152, dynamic_width=True) == 1  # 0.88 on average
    h = dims.dimension("h", 8, 64)
    x = te.placeholder((1, 8, h, h, 8), name="X")
    made = specialize([out := nchwc.conv2d_nchwc(x, te.placeholder((4, 64, 3, 3, 8), name="W"), 1, 1)], {h.name: 32})
    assert made[out].op.attrs[DYNAMIC_AXES] == ("h", "w")
    text = str(default_schedule([made[out]], avx2).trace)
    assert "split(conv2d_nchwc.cb, factor=2)" in text


def test_a_two_vector_block_halves_the_register_tiles_columns():
    """Tuning offers blocks of one and two vectors; at two, each column holds two accumulators, and two registers
    hold the step's weight vectors beside the broadcast: AVX2's 16 registers hold 6 columns (12 accumulators), not 7
    (14 accumulators and 3 more registers would spill)."""
    avx2, avx512 = Target.with_lanes(8), Target.with_lanes(16)
    assert [tile_columns(width, 16, avx2) for width in (7, 14, 56, 12)] == [4, 5, 6, 6]  # 7 = 4 + 3, 14 = 5 + 5 + 4
    assert [tile_columns(width, 32, avx512) for width in (14, 56, 30)] == [14, 14, 10]


@pytest.mark.parametrize("width,blocks,two,columns", [(7, 32, True, 7), (5, 4, True, 5), (7, 3, False, 7),
                                                      (14, 32, True, 7), (56, 4, True, 7), (13, 4, False, 13),
                                                      (3, 4, False, 3)])
def test_avx512_tiles_two_channel_blocks_of_at_most_seven_columns(width, blocks, two, columns):
    """Each broadcast input feeds both blocks' FMAs; 2 x 7 accumulators, not 2 x 14 (spilled); one block where the
    blocks are odd, where two would leave fewer than MIN_CHAINS accumulators (a 3-wide row) or a guarded tail that
    one block's tile avoids (a 13-wide row: 13, not 7 + 6)."""
    x = te.placeholder((1, 4, width, width, 16), name="X")
    w = te.placeholder((blocks, 64, 1, 1, 16), name="W")
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), Target.with_lanes(16)).trace)
    assert ("split(conv2d_nchwc.cb, factor=2)" in text) == two
    assert f"split(conv2d_nchwc.w, factor={columns})" in text
    xv = np.random.default_rng(0).standard_normal(x.shape).astype("float32")
    wv = np.random.default_rng(1).standard_normal(w.shape).astype("float32")
    out = nchwc.conv2d_nchwc(x, w)
    got = build(default_schedule(out, Target.with_lanes(16)), args=[x, w, out]).run(xv, wv)
    np.testing.assert_allclose(got, interpret(out, {"X": xv, "W": wv}), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel,stride,two", [(1, 2, True), (1, 1, True), (3, 2, False)])
def test_avx2_tiles_two_blocks_where_a_pointwise_convolution_strides(kernel, stride, two):
    """A strided 1 x 1 convolution reads each broadcast from its own cache line, which no other tap shares: two
    blocks per tile halve those reads on AVX2 too; so does an unstrided 1 x 1 one, its tile along the pixels as
    one row; a strided 3 x 3 keeps one block."""
    x = te.placeholder((1, 4, 14, 14, 8), name="X")
    w = te.placeholder((8, 32, kernel, kernel, 8), name="W")
    out = nchwc.conv2d_nchwc(x, w, stride, kernel // 2)
    sch = default_schedule(out, Target.with_lanes(8))
    assert ("split(conv2d_nchwc.cb, factor=2)" in str(sch.trace)) == two
    xv, wv = (RNG.standard_normal(t.shape).astype("float32") for t in (x, w))
    got = build(default_schedule(out, Target.with_lanes(8)), args=[x, w, out]).run(xv, wv)
    np.testing.assert_allclose(got, interpret(out, {"X": xv, "W": wv}), rtol=1e-4, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(size=st.integers(1, 15), blocks=st.integers(1, 4), cin=st.integers(1, 3), flat=st.sampled_from([0, 1]),
       lanes=st.sampled_from([8, 16]), per_tile=st.sampled_from([1, 2]), bias=st.booleans(),
       stride=st.sampled_from([1, 2, 3]))
def test_a_pointwise_convolution_tiles_its_pixels_as_one_row(size, blocks, cin, flat, lanes, per_tile, bias, stride):
    """A 1 x 1 convolution reduces over its pixels as one row (a strided one over an image of the pixels it
    reads): a register tile runs across the image's rows (every tail of 6-pixel tiles, of one or two blocks,
    with and without the bias) or along each row, the strided pixels then read in place; all equal the
    interpreter's."""
    x = te.placeholder((1, cin, size, size, 8), name="X")
    w = te.placeholder((blocks, cin * 8, 1, 1, 8), name="W")
    b = te.placeholder((blocks, 8), name="B") if bias else None
    out = nchwc.conv2d_nchwc(x, w, stride, bias=b)
    sch = default_schedule(out, Target.with_lanes(lanes), knobs=Forced(_flat=flat, _blocks=per_tile))
    assert ("fuse(conv2d_nchwc, loops=[h, w])" in str(sch.trace)) == bool(flat)
    assert ("compute_inline(conv2d_nchwc_strided)" in str(sch.trace)) == (stride > 1 and not flat)
    inputs = [x, w] + ([b] if bias else [])
    values = [RNG.standard_normal(t.shape).astype("float32") for t in inputs]
    got = build(sch, args=[*inputs, out]).run(*values)
    want = interpret(out, {t.name: v for t, v in zip(inputs, values)})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_two_block_tile_steps_columns_outside_its_blocks():
    """Each column's broadcast feeds its blocks' FMAs and dies: with the blocks outside the columns, gcc kept
    every column's broadcast live for the second block (12 accumulators + 6 broadcasts + 2 weight vectors on
    AVX2's 16 registers) and spilled accumulators to the stack."""
    x = te.placeholder((1, 4, 14, 14, 8), name="X")
    w = te.placeholder((4, 32, 1, 1, 8), name="W")
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), Target.with_lanes(8), knobs=Forced(_blocks=2)).trace)
    assert "reorder(conv2d_nchwc_pixels, order=[n, h, rcb, rci, ry, rx, p, cb, ci])" in text


@pytest.mark.parametrize("rows_outer", [0, 1])
@pytest.mark.parametrize("blocks", [1, 2])
def test_rows_outside_or_inside_the_channel_blocks_give_the_same_numbers(rows_outer, blocks):
    """Both loop orders, with tiles of one and two channel blocks, a bias and a tail column tile."""
    x = te.placeholder((1, 2, 9, 13, 8), name="X")
    w, bias = te.placeholder((4, 16, 3, 3, 8), name="W"), te.placeholder((4, 8), name="B")
    out = nchwc.conv2d_nchwc(x, w, 1, 1, bias=bias)
    sch = default_schedule(out, Target.with_lanes(8), knobs=Forced(_rows_outer=rows_outer, _blocks=blocks))
    args = [RNG.standard_normal(t.shape).astype("float32") for t in (x, w, bias)]
    got = build(sch, args=[x, w, bias, out]).run(*args)
    want = interpret(out, dict(zip("XWB", args)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size,channels,out_blocks,rows_outer", [(56, 256, 4, True), (56, 64, 16, True),
                                                                  (7, 2048, 32, False), (14, 1024, 16, False),
                                                                  (56, 32, 9, False), (28, 2048, 32, True),
                                                                  (28, 512, 128, False)])
def test_rows_run_outside_the_blocks_where_the_input_outgrows_l2(size, channels, out_blocks, rows_outer):
    """ResNet-50's 1 x 1 convolutions: on 56 x 56 the input (3 MiB, 0.8 MiB) is read once with the rows outside;
    on 7 x 7 and 14 x 14 the weights (4 and 1 MiB) are, with the blocks outside; MobileNetV2's 24 channels on
    56 x 56 (0.4 MiB, blocks of 16) stay in a 1 MiB L2 across the blocks. DeepLab's 2048 -> 512 on 28 x 28
    (6.4 MiB of input, 4 MiB of weights) runs the rows outside, its 512 -> 2048 (1.6 and 4 MiB) the blocks."""
    x = te.placeholder((1, channels // 16, size, size, 16), name="X")
    w = te.placeholder((out_blocks, channels, 1, 1, 16), name="W")
    target = dataclasses.replace(Target.with_lanes(16), l2_bytes=1 << 20)
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), target).trace)
    assert ("fuse(conv2d_nchwc, loops=[n, h, cb" in text) == rows_outer


@pytest.mark.parametrize("size,channels,out_blocks,rows_outer", [(14, 1024, 16, True), (56, 64, 16, True),
                                                                  (14, 256, 64, False), (7, 2048, 32, False),
                                                                  (14, 1024, 32, False), (28, 128, 32, False),
                                                                  (28, 2048, 32, True)])
def test_intel_rows_run_outside_where_the_input_outgrows_a_quarter_of_l2_and_the_weights_fit_half(
        size, channels, out_blocks, rows_outer):
    """On an Intel Xeon (2 MiB of L2): ResNet-50's 1024 -> 256 on 14 x 14 (0.8 MiB of input, 1 MiB of weights)
    and 64 -> 256 on 56 x 56 run the rows outside; 256 -> 1024 on 14 x 14 and 2048 -> 512 on 7 x 7 (0.2 and 0.4
    MiB of input), 1024 -> 512 (2 MiB of weights) and 128 -> 512 on 28 x 28 (0.4 MiB) keep the blocks outside;
    DeepLab's 2048 -> 512 on 28 x 28 (6.4 MiB of input, 4 MiB of weights) runs the rows outside as elsewhere."""
    x = te.placeholder((1, channels // 16, size, size, 16), name="X")
    w = te.placeholder((out_blocks, channels, 1, 1, 16), name="W")
    target = dataclasses.replace(Target.with_lanes(16), l2_bytes=2 << 20, vendor="GenuineIntel")
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), target).trace)
    assert ("fuse(conv2d_nchwc, loops=[n, h, cb" in text) == rows_outer


@pytest.mark.parametrize("size,channels,out_blocks,rows_outer", [(14, 1024, 32, True), (7, 2048, 64, True),
                                                                  (28, 1024, 256, True), (14, 256, 32, False)])
def test_avx2_rows_run_outside_the_blocks_wherever_the_input_outgrows_half_of_l2(size, channels, out_blocks,
                                                                                   rows_outer):
    """On AVX2 the weights' size does not keep the blocks outside: ResNet-50's 1024 -> 256 on 14 x 14 (0.8 MiB
    of input, 1 MiB of weights), 2048 -> 512 on 7 x 7 and DeepLab's 1024 -> 2048 on 28 x 28 run the rows outside
    a 512 KiB L2; 256 channels on 14 x 14 (0.2 MiB) stay in L2 across the blocks."""
    x = te.placeholder((1, channels // 8, size, size, 8), name="X")
    w = te.placeholder((out_blocks, channels, 1, 1, 8), name="W")
    target = dataclasses.replace(Target.with_lanes(8), l2_bytes=512 << 10)
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), target).trace)
    assert bool(re.search(r"fuse\(conv2d_nchwc, loops=\[n, h[a-z_0-9]*, cb", text)) == rows_outer  # rows of pixels too


@pytest.mark.parametrize("kblocks", [2, 4])
@pytest.mark.parametrize("blocked_input,taps", [(True, None), (False, ((1, 3), (0, 2)))])
def test_partitions_of_the_input_channels_give_the_same_numbers(kblocks, blocked_input, taps):
    """The reduction in `kblocks` partitions of the input channels added up in place, with a bias, blocked or NCHW
    input, and a region's taps and cropping pads."""
    shape = (1, 4, 9, 11, 8) if blocked_input else (1, 32, 9, 11)
    x, w, bias = te.placeholder(shape, name="X"), te.placeholder((2, 32, 3, 3, 8), name="W"), \
        te.placeholder((2, 8), name="B")
    padding = ((1, 1), (1, 1)) if taps is None else ((-1, 0), (0, -2))
    out = nchwc.conv2d_nchwc(x, w, 1, padding, (2, 1), bias=bias, taps=taps)
    sch = default_schedule(out, Target.with_lanes(8), knobs=Forced(_kblocks=kblocks))
    assert "rfactor" in str(sch.trace)
    args = [RNG.standard_normal(t.shape).astype("float32") for t in (x, w, bias)]
    got = build(sch, args=[x, w, bias, out]).run(*args)
    np.testing.assert_allclose(got, interpret(out, dict(zip("XWB", args))), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels,taps,kblocks", [(2048, 9, 16), (2048, 4, 16), (512, 9, 8), (2048, 1, 16),
                                                    (1024, 1, 1)])
def test_input_channels_are_partitioned_where_a_tiles_weights_outgrow_a_quarter_of_l2(channels, taps, kblocks):
    """DeepLab's atrous head (2048 channels, 3 x 3 taps whole or 2 x 2 in a region: 2.3 and 1 MiB per tile of two
    blocks), a 3 x 3 over 512 channels (590 KiB) and a 1 x 1 over 2048 (256 KiB) sum in the fewest partitions
    whose weights and input fit in half of a 1 MiB L2, in place: the output is zeroed, then each partition's
    register tiles are added to it. A 1 x 1 over 1024 channels (128 KiB a tile) keeps its weights in L2 whole."""
    side = 3 if taps == 9 else 2 if taps == 4 else 1
    x = te.placeholder((1, channels // 16, 27 + side, 27 + side, 16), name="X")  # 28 x 28 outputs
    w = te.placeholder((8, channels, side, side, 16), name="W")
    target = dataclasses.replace(Target.with_lanes(16), l2_bytes=1 << 20)
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), target).trace)
    acc = "conv2d_nchwc_pixels" if side == 1 else "conv2d_nchwc_local"  # a 1 x 1 reduces over its pixels
    assert (f"split({acc}.rcb, nparts={kblocks})" in text) == (kblocks > 1)
    assert (f"rfactor({acc}.rcb_0)" in text) == (kblocks > 1)


@pytest.mark.parametrize("channels,out_blocks,kblocks", [(1024, 128, 8), (512, 128, 4), (256, 64, 1)])
def test_an_input_past_l2_read_once_per_block_of_outputs_is_partitioned(channels, out_blocks, kblocks):
    """DeepLab's 1 x 1 convolutions on 28 x 28 whose weights outweigh their input, so the channel blocks run
    outside the rows: 1024 -> 2048 (3.2 MiB of input) and 512 -> 2048 (1.6 MiB) read their input in contiguous
    partitions; 256 -> 1024 (0.8 MiB, in a 1 MiB L2) whole."""
    x = te.placeholder((1, channels // 16, 28, 28, 16), name="X")
    w = te.placeholder((out_blocks, channels, 1, 1, 16), name="W")
    target = dataclasses.replace(Target.with_lanes(16), l2_bytes=1 << 20)
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), target).trace)
    assert (f"split(conv2d_nchwc_pixels.rcb, nparts={kblocks})" in text) == (kblocks > 1)


def test_bad_arguments_say_what_is_wrong():
    x = te.placeholder((1, 2, 5, 5, 4), name="X")
    with pytest.raises(ShapeError, match="input channels"):
        nchwc.conv2d_nchwc(x, te.placeholder((1, 6, 3, 3, 4), name="W"))
    with pytest.raises(ShapeError, match="bias must be packed"):
        nchwc.conv2d_nchwc(x, te.placeholder((1, 8, 3, 3, 4), name="W"), bias=te.placeholder((4,), name="B"))
    with pytest.raises(ShapeError, match="depthwise_conv2d_nchwc"):
        nchwc.depthwise_conv2d_nchwc(x, te.placeholder((3, 3, 3, 4), name="W"))
    with pytest.raises(ShapeError, match="do not fill"):
        nchwc.from_blocked(x, 4)
    with pytest.raises(ShapeError, match="wholly in the padding"):
        nchwc.max_pool2d_nchwc(x, 2, 2, 2)


@pytest.mark.parametrize("kernel,size,per_row", [(5, 11, None), (3, 11, None), (5, 11, 0), (3, 11, 1)])
@pytest.mark.parametrize("stride", [1, 2])
def test_a_depthwise_convolution_reads_its_padding_per_row_or_guarded(kernel, size, per_row, stride):
    """By default a window larger than 3 x 3 reads a padded copy made per output row, its inner loop unguarded
    (gcc made the guarded 5 x 5 loop scalar); a 3 x 3 window on a map in cache reads in place, guarded. Either
    way the numbers equal the reference's, tail tile included."""
    x, w = te.placeholder((1, 2, size, 13, 8), name="X"), te.placeholder((2, kernel, kernel, 8), name="W")
    out = nchwc.depthwise_conv2d_nchwc(x, w, stride, kernel // 2)
    knobs = Defaults() if per_row is None else Forced(_pad_per_row=per_row)
    kernel_ = build(default_schedule(out, Target.with_lanes(8), knobs=knobs), args=[x, w, out])
    update = next(line for line in kernel_.source.splitlines() if "* W[" in line)
    copied = per_row if per_row is not None else kernel > 3
    assert ("?" not in update and "_pad[" in update) == copied, update
    args = [RNG.standard_normal(t.shape).astype("float32") for t in (x, w)]
    np.testing.assert_allclose(kernel_.run(*args), interpret(out, dict(zip("XW", args))), rtol=1e-4, atol=1e-4)


def test_a_3x3_depthwise_convolution_on_a_map_streamed_from_memory_makes_its_padding_per_row():
    x, w = te.placeholder((1, 2, 11, 13, 8), name="X"), te.placeholder((2, 3, 3, 8), name="W")
    out = nchwc.depthwise_conv2d_nchwc(x, w, 1, 1)
    small_l3 = dataclasses.replace(Target.with_lanes(8), l3_bytes=4096)  # input and output: 18 KiB
    update = next(line for line in build(default_schedule(out, small_l3), args=[x, w, out]).source.splitlines()
                  if "* W[" in line)
    assert "?" not in update and "_pad[" in update, update


@pytest.mark.parametrize("width,columns", [(14, 14), (56, 14), (28, 14), (7, 7)])
def test_intels_avx512_tiles_two_channel_blocks_of_fourteen_columns(width, columns):
    """On Intel's AVX-512 cores two blocks x 14 columns (28 accumulators, no spill) ran faster than 2 x 7, where on
    AMD's Zen 5 they ran slower (`paired_accumulators`)."""
    x = te.placeholder((1, 4, width, width, 16), name="X")
    w = te.placeholder((32, 64, 1, 1, 16), name="W")
    intel = dataclasses.replace(Target.with_lanes(16), vendor="GenuineIntel")
    text = str(default_schedule(nchwc.conv2d_nchwc(x, w), intel).trace)
    assert "split(conv2d_nchwc.cb, factor=2)" in text
    assert f"split(conv2d_nchwc.w, factor={columns})" in text


@settings(max_examples=12, deadline=None)
@given(kernel=st.sampled_from([1, 3, 5]), stride=st.sampled_from([1, 2]), dilation=st.sampled_from([1, 2]),
       width=st.integers(5, 17), in_place=st.sampled_from([None, 0, 1]))
def test_a_convolution_reads_its_padding_in_place_or_from_a_copy(kernel, stride, dilation, width, in_place):
    """By default a window that reaches one pixel past the edges, undilated, reads its input in place (guarded;
    no padded copy), a wider or dilated one a padded copy made first. Either way, and with the parameter forced,
    the numbers equal the reference's, on rows whose tiles leave a tail."""
    pad = dilation * (kernel // 2)
    x, w = te.placeholder((1, 2, 9, width, 8), name="X"), te.placeholder((2, 16, kernel, kernel, 8), name="W")
    out = nchwc.conv2d_nchwc(x, w, stride, pad, dilation)
    knobs = Defaults() if in_place is None else Forced(_pad_in_place=in_place)
    kernel_ = build(default_schedule(out, Target.with_lanes(8), knobs=knobs), args=[x, w, out])
    copied = bool(pad) and (not in_place if in_place is not None else pad > 1 or dilation > 1)
    assert ("_pad[" in kernel_.source) == copied
    args = [RNG.standard_normal(t.shape).astype("float32") for t in (x, w)]
    np.testing.assert_allclose(kernel_.run(*args), interpret(out, dict(zip("XW", args))), rtol=1e-4, atol=1e-4)
