"""Linear quantization in ONNX's convention: round trips, zero, clipping, per-channel parameters."""

import numpy as np

from tilegrad.quant.scheme import (
    asymmetric,
    dequantize,
    fake_quantize,
    quantize,
    symmetric,
    weight_params,
)


def test_round_trip_error_is_at_most_half_a_step_inside_the_range():
    x = np.linspace(-1.3, 2.9, 1001, dtype=np.float32)
    p = asymmetric(-1.3, 2.9)
    assert np.max(np.abs(fake_quantize(x, p) - x)) <= p.scale / 2 + 1e-7


def test_zero_maps_exactly_to_the_zero_point_and_back():
    p = asymmetric(-0.7, 3.1)
    assert quantize(np.zeros(1, np.float32), p)[0] == p.zero_point
    assert dequantize(quantize(np.zeros(1, np.float32), p), p)[0] == 0.0


def test_scale_and_zero_point_follow_3_16_and_3_17():
    p = asymmetric(-1.0, 3.0)  # s = 4 / 255, z = round(0 - (-1) / s) = round(63.75)
    assert np.isclose(p.scale, 4 / 255) and int(p.zero_point) == 64 and p.dtype == "uint8"
    assert int(asymmetric(0.5, 2.0).zero_point) == 0  # widened to hold 0


def test_values_outside_the_range_saturate():
    p = symmetric(1.0)
    q = quantize(np.array([-5.0, 5.0, 0.5], np.float32), p)
    assert q.tolist() == [-128, 127, 64]  # rounds half to even: 0.5 * 127 = 63.5 -> 64


def test_per_channel_weight_scales_are_each_channels_max_over_127():
    w = np.array([[[[1.0, -2.0]]], [[[0.5, 0.25]]]], np.float32)  # two output channels
    p = weight_params(w, axis=0)
    assert np.allclose(p.scale, [2 / 127, 0.5 / 127]) and p.axis == 0
    assert quantize(w, p).reshape(2, 2).tolist() == [[64, -127], [127, 64]]
