"""Grouped convolutions whose groups lie inside one vector (te/nn/lane_groups.py, schedule/rules_lane_groups.py,
loop/rotations.py): the rotation form's weights, its default schedule as a sketch the tuner searches, random
points of it and odd shapes against the grouped convolution's reference, the rotated sum lowered to one call,
and a one-node ONNX model against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import te
from tilegrad.ir import lookup
from tilegrad.kernel import build
from tilegrad.loop.ir import Buffer, For, Kernel, Store
from tilegrad.loop.rotations import rotation, use_rotations
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.rules_lane_groups import default_columns
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.target import Target
from tilegrad.te import expr as E
from tilegrad.te.nn.lane_groups import lane_group_size, pack_lane_groups, unpack_lane_groups
from tilegrad.te.nn.nchwc import lane_group_conv2d_nchwc

from .strategies import sketch_points

OP = lookup("lane_group_conv_nchwc")


def _grouped(rng, channels: int, k: int, kernel: int = 3) -> np.ndarray:
    return rng.standard_normal((channels, k, kernel, kernel)).astype(np.float32)


@settings(max_examples=20, deadline=None)
@given(k=st.sampled_from([2, 4, 8]), blocks=st.integers(1, 3), lanes=st.sampled_from([8, 16]), seed=st.integers(0, 99))
def test_the_rotations_sum_to_the_grouped_convolution(k, blocks, lanes, seed):
    """Per pixel and tap: each rotation's lane-wise product, its lanes read rotated and summed, is the grouped
    product; the packing is a permutation of the weights (it unpacks to them)."""
    if k >= lanes:
        return
    rng = np.random.default_rng(seed)
    channels = blocks * lanes
    weight = _grouped(rng, channels, k, 1)
    packed = pack_lane_groups(weight, lanes)
    np.testing.assert_array_equal(unpack_lane_groups(packed), weight)
    x = rng.standard_normal(channels).astype(np.float32)
    want = np.array([weight[o, :, 0, 0] @ x[o - o % k:o - o % k + k] for o in range(channels)])
    got = np.zeros(channels, np.float32)
    for cb in range(blocks):
        lanes_x = x[cb * lanes:(cb + 1) * lanes]
        for d in range(k):
            acc = packed[cb, d, 0, 0] * lanes_x
            got[cb * lanes:(cb + 1) * lanes] += acc[rotation(k, d, lanes)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_which_groupings_take_the_rotations():
    assert lane_group_size(128, 128, 32, 16) == 4 and lane_group_size(256, 256, 32, 16) == 8
    assert lane_group_size(512, 512, 32, 16) is None  # 16 a group: the blocked kernel wastes nothing there
    assert lane_group_size(128, 128, 128, 16) is None  # depthwise
    assert lane_group_size(128, 256, 32, 16) is None  # 4 in, 8 out a group
    assert lane_group_size(24, 24, 8, 16) is None  # 24 channels do not fill whole blocks
    assert lane_group_size(48, 48, 8, 16) is None  # groups of 6 straddle the blocks


def test_the_tile_takes_columns_that_divide_the_row():
    wide = Target.with_lanes(16)
    assert default_columns(56, 4, wide) == 7 and default_columns(28, 8, wide) == 2
    assert default_columns(14, 8, wide) == 2 and default_columns(7, 8, wide) == 1
    assert default_columns(13, 4, wide) == 7  # a prime row: the fewest tiles, the last guarded


def _conv(k, blocks, size, lanes, stride=1, pad=1, dilation=1, bias=True, relu=True):
    x = te.placeholder((1, blocks, *size, lanes), "float32", "x")
    u = te.placeholder((blocks, k, 3, 3, lanes), "float32", "u")
    b = te.placeholder((blocks, lanes), "float32", "b") if bias else None
    y = lane_group_conv2d_nchwc(x, u, stride, pad, dilation, bias=b, name="y")
    if relu:
        y = te.compute(y.shape, lambda *i: E.maximum(y[i], E.const(0.0, "float32")), name="relu", tag="elemwise")
    return [t for t in (x, u, b) if t is not None], y


def _operands(rng, k, blocks, size, lanes, bias=True):
    x = rng.standard_normal((1, blocks, *size, lanes)).astype(np.float32)
    u = pack_lane_groups(_grouped(rng, blocks * lanes, k), lanes)
    b = rng.standard_normal((blocks, lanes)).astype(np.float32)
    return [x, u] + ([b] if bias else [])


def _want(arrays, stride, pad, dilation, relu=True):
    y = OP.reference(*arrays, strides=[stride] * 2, pads=[pad] * 4, dilations=[dilation] * 2)
    return np.maximum(y, 0) if relu else y


def test_default_point_is_the_default_schedule_and_has_parameters():
    target = Target.with_lanes(16)
    sketch = generate_sketches(lambda: [_conv(4, 2, (9, 14), 16)[1]], target)[0]
    params = sketch.default_params()
    assert {"relu_wr", "relu_pad_in_place"} <= set(params)
    assert sketch.bind(params).steps == default_schedule(_conv(4, 2, (9, 14), 16)[1], target).trace.steps


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_random_points_match_the_reference(data):
    target = Target.with_lanes(16)
    sketch = generate_sketches(lambda: [_conv(8, 2, (7, 10), 16, stride=2)[1]], target)[0]
    params = data.draw(sketch_points(sketch))
    inputs, output = _conv(8, 2, (7, 10), 16, stride=2)
    sch = Schedule([output])
    sch.state = apply_trace([output], sketch.bind(params))
    arrays = _operands(np.random.default_rng(len(params)), 8, 2, (7, 10), 16)
    got = build(sch, args=inputs + list(sch.state.outputs), target=target).run(*arrays)
    np.testing.assert_allclose(got, _want(arrays, 2, 1, 1), rtol=1e-4, atol=1e-4, err_msg=str(params))


@settings(max_examples=10, deadline=None)
@given(k=st.sampled_from([2, 4, 8]), lanes=st.sampled_from([8, 16]), blocks=st.integers(1, 2),
       height=st.integers(1, 9), width=st.integers(1, 17), stride=st.sampled_from([1, 2]), pad=st.integers(0, 2),
       dilation=st.sampled_from([1, 2]), bias=st.booleans(), relu=st.booleans())
def test_odd_shapes_and_every_tail_match_the_reference(k, lanes, blocks, height, width, stride, pad, dilation, bias,
                                                       relu):
    reach = 2 * dilation + 1
    if k >= lanes or height + 2 * pad < reach or width + 2 * pad < reach:
        return
    target = Target.with_lanes(lanes)
    inputs, output = _conv(k, blocks, (height, width), lanes, stride, pad, dilation, bias, relu)
    arrays = _operands(np.random.default_rng(height * width), k, blocks, (height, width), lanes, bias)
    got = build(default_schedule(output, target), args=inputs + [output], target=target).run(*arrays)
    np.testing.assert_allclose(got, _want(arrays, stride, pad, dilation, relu), rtol=1e-4, atol=1e-4)


def test_the_rotated_sum_renders_as_one_call():
    target = Target.with_lanes(16)
    inputs, output = _conv(4, 1, (6, 7), 16, bias=False, relu=False)
    source = build(default_schedule(output, target), args=inputs + [output], target=target).source
    assert "tg_rotate_sum_4x16(&" in source


def _lanes_loop(reads):
    """for l < 16: out[l] = acc[l] + acc[16 + reads(l)]."""
    lane = E.Var("l", E.INDEX, 0, 15)
    acc, out = Buffer("acc", (E.Const(32, E.INDEX),), "float32", "local"), Buffer("out", (E.Const(16, E.INDEX),),
                                                                                  "float32")
    value = E.Load(acc, (lane,)) + E.Load(acc, (reads(lane) + 16,))
    return Kernel("k", (out,), For(lane, E.Const(16, E.INDEX), "unrolled", Store(out, (lane,), value)))


def test_a_sum_rotated_within_groups_is_recognised_and_no_other():
    swapped = use_rotations(_lanes_loop(lambda lane: lane - lane % 2 + (lane % 2 + 1) % 2))
    assert swapped.body.name == "rotate_sum_2x16"
    assert [idx for _, idx in swapped.body.operands] == [(E.Const(0, E.INDEX),), (E.Const(0, E.INDEX),),
                                                         (E.Const(16, E.INDEX),)]
    reversed_lanes = _lanes_loop(lambda lane: 15 - lane)
    assert use_rotations(reversed_lanes) is reversed_lanes
    shifted = _lanes_loop(lambda lane: (lane + 1) % 16)  # a rotation of the whole vector, not within groups
    assert use_rotations(shifted) is shifted


@pytest.mark.parametrize("channels,groups,size,stride", [(64, 16, 13, 1), (128, 16, 9, 2), (32, 16, 5, 1)])
def test_a_grouped_onnx_convolution_matches_onnxruntime(channels, groups, size, stride):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(channels + size)
    w = (rng.standard_normal((channels, channels // groups, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=groups, pads=[1] * 4, strides=[stride] * 2),
             helper.make_node("Relu", ["c"], ["y"])]
    out = (size - 1) // stride + 1
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])
    graph = helper.make_graph(nodes, "g", [x_info],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out, out])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, channels, size, size)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(tilegrad.compile(model)(x), want, rtol=1e-4, atol=1e-4)
    assert onnx.checker.check_model(model) is None
