"""The integer kernels (te/nn/quantized.py), compiled under their default schedules, equal a NumPy int64 reference
bit for bit: quantize and dequantize (round trip, ties, saturation, per channel), the u8/s8 x s8 matmul and
convolution with the zero point folded into the bias and the requantization epilogue, on odd sizes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.ir import lookup
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.integer_products import (
    Epilogue,
    integer_conv2d,
    integer_matmul,
    requantized,
)
from tilegrad.kernel import build


def _run(op: str, arrays, **attrs):
    """The op compiled under its default schedule, on `arrays`."""
    opdef = lookup(op)
    attrs = opdef.bind_attrs(attrs, "test")
    placeholders = [te.placeholder(a.shape, str(a.dtype), f"in{i}") for i, a in enumerate(arrays)]
    return build((placeholders, [opdef.compute(*placeholders, **attrs)])).run(*arrays)


def _requantize(acc, multiplier, zero_point, lo, hi, dtype):
    return np.clip(np.rint(acc.astype(np.int32).astype(np.float32) * multiplier) + zero_point, lo, hi).astype(dtype)


def test_quantize_dequantize_round_trip_is_within_half_a_step_and_maps_zero_exactly():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1.0, 1.0, 200), np.arange(-9, 10) * 0.5 / 64, [0.0, 5.0, -5.0]])
    x = x.astype(np.float32).reshape(1, -1)
    scale, zero_point = np.array(1 / 64, np.float32), np.array(100, np.uint8)
    q = _run("quantize_linear", [x, scale, zero_point])
    want = np.clip(np.rint(x / scale) + 100, 0, 255).astype(np.uint8)  # ties to even: k / 2 steps
    np.testing.assert_array_equal(q, want)
    back = _run("dequantize_linear", [q, scale, zero_point])
    inside = (x >= (0 - 100) * scale) & (x <= (255 - 100) * scale)
    assert np.all(np.abs(back - x)[inside] <= scale / 2)
    assert q[0, -3] == 100 and back[0, -3] == 0.0  # zero maps to the zero point and back exactly
    assert q[0, -2] == 255 and q[0, -1] == 0  # saturation


def test_per_channel_quantize_along_axis():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    scale = np.array([0.01, 0.02, 0.05], np.float32)
    zero_point = np.array([-3, 0, 4], np.int8)
    q = _run("quantize_linear", [x, scale, zero_point], axis=1)
    want = np.clip(np.rint(x / scale[:, None]) + zero_point[:, None], -128, 127).astype(np.int8)
    np.testing.assert_array_equal(q, want)
    back = _run("dequantize_linear", [q, scale, zero_point], axis=1)
    np.testing.assert_array_equal(back, (q.astype(np.float32) - zero_point[:, None]) * scale[:, None])


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 13), k=st.integers(1, 37), n=st.integers(1, 35), signed=st.booleans(),
       per_channel=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_quantized_matmul_is_bit_exact(m, k, n, signed, per_channel, seed):
    rng = np.random.default_rng(seed)
    dtype = "int8" if signed else "uint8"
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (m, k), endpoint=True).astype(dtype)
    w = rng.integers(-128, 127, (k, n), endpoint=True).astype(np.int8)
    za = int(rng.integers(info.min, info.max, endpoint=True))
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    w_scale = (rng.random(n) * 0.01 + 1e-3).astype(np.float32) if per_channel else np.float32(0.004)
    epilogue = requantized(np.float32(0.02), w_scale, np.float32(0.05), np.array(7, np.int8), clip=(0.0, np.inf))
    b = GraphBuilder()
    x = b.input("a", a.shape, dtype)
    out = integer_matmul(b, x, za, w, np.zeros((), np.int8), bias, epilogue, "qgemm")
    node = next(nd for nd in b.build(out).nodes if nd.op == "quantized_matmul")
    consts = [v.data for v in node.inputs[1:]]
    got = _run("quantized_matmul", [a, *consts], **node.attrs)
    acc = (a.astype(np.int64) - za) @ w.astype(np.int64) + bias
    want = _requantize(acc, epilogue.multiplier, 7, epilogue.lo, 127, "int8")
    np.testing.assert_array_equal(got, want)
    assert epilogue.lo == 7  # the fused ReLU: nothing below the zero point


@settings(max_examples=8, deadline=None)
@given(c=st.integers(1, 5), o=st.integers(1, 7), size=st.integers(3, 9), kernel=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 2), seed=st.integers(0, 2 ** 16))
def test_quantized_conv2d_pads_with_the_zero_point_and_is_bit_exact(c, o, size, kernel, stride, pad, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 255, (1, c, size, size + 1), endpoint=True).astype(np.uint8)
    w = rng.integers(-128, 127, (o, c, kernel, kernel), endpoint=True).astype(np.int8)
    zx = int(rng.integers(0, 255))
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    epilogue = requantized(np.float32(0.03), (rng.random(o) * 0.01 + 1e-3).astype(np.float32), np.float32(0.2),
                           np.array(128, np.uint8))
    b = GraphBuilder()
    xv = b.input("x", x.shape, "uint8")
    attrs = {"strides": (stride, stride), "pads": (pad, pad, pad, pad), "dilations": (1, 1), "group": 1}
    out = integer_conv2d(b, xv, zx, w, np.zeros((), np.int8), bias, epilogue, "qconv", **attrs)
    node = b.build(out).nodes[-1]
    assert node.op == "quantized_im2col_conv" and node.inputs[1].origin.op == "quantized_im2col_weight"
    got = _run(node.op, [x, *(v.data for v in node.inputs[1:])], **node.attrs)
    # the same kernel with its weights packed at the start of the call, as quantized_conv2d does
    unpacked = {k: v for k, v in node.attrs.items() if k not in ("out_channels", "kernel_shape", "whole_groups")}
    in_call = _run("quantized_conv2d", [x, node.inputs[1].origin.source.data, *(v.data for v in node.inputs[2:])],
                   group=1, **unpacked)
    np.testing.assert_array_equal(in_call, got)
    # the reference: (x - zx) (w) with ONNX's centred zero padding, summed in int64
    xc = np.pad(x.astype(np.int64) - zx, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (xc.shape[2] - kernel) // stride + 1, (xc.shape[3] - kernel) // stride + 1
    acc = np.zeros((1, o, oh, ow), np.int64)
    for i in range(kernel):
        for j in range(kernel):
            window = xc[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            acc += np.einsum("nchw,oc->nohw", window, w[:, :, i, j].astype(np.int64))
    acc += bias.reshape(1, -1, 1, 1)
    want = _requantize(acc, epilogue.multiplier.reshape(1, -1, 1, 1), 128, 0, 255, "uint8")
    np.testing.assert_array_equal(got, want)


def test_weights_that_do_not_fit_s8_after_centring_are_refused():
    """uint8 weights with zero point 0 centre to [0, 255]: no s8 kernel holds them, so the caller keeps its
    int32 composition."""
    b = GraphBuilder()
    x = b.input("a", (2, 3), "uint8")
    w = np.full((3, 4), 200, np.uint8)
    assert integer_matmul(b, x, 0, w, np.zeros((), np.uint8), None, Epilogue(None, 0, "int32", 0, 0), "q") is None


def test_reduce_range_weights_up_to_64_take_the_7_bit_path_and_stay_exact():
    """ONNX Runtime's reduce_range weights span [-64, 64]; a pair of u8 x s8 products then stays within int16
    (2 x 255 x 64 = 32640), so 64 itself still gets weight_bits 7, and 65 does not."""
    rng = np.random.default_rng(3)
    a = np.full((7, 12), 255, np.uint8)
    w = rng.integers(-64, 64, (12, 9), endpoint=True).astype(np.int8)
    w[:, :3], w[:, 3:6] = 64, -64
    epilogue = Epilogue(None, 0, "int32", 0, 0)
    b = GraphBuilder()
    x = b.input("a", a.shape, "uint8")
    node = b.build(integer_matmul(b, x, 0, w, np.zeros((), np.int8), None, epilogue, "q")).nodes[-1]
    assert node.attrs["weight_bits"] == 7
    got = _run("quantized_matmul", [a, *(v.data for v in node.inputs[1:])], **node.attrs)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ w.astype(np.int64))
    b = GraphBuilder()
    x = b.input("a", a.shape, "uint8")
    wider = np.where(w == 64, 65, w).astype(np.int8)
    node = b.build(integer_matmul(b, x, 0, wider, np.zeros((), np.int8), None, epilogue, "q")).nodes[-1]
    assert node.attrs["weight_bits"] == 8


def test_a_byte_output_vectorises_over_bytes_and_stays_exact():
    """quantize_linear writes u8: its innermost loop is split by a vector of bytes (4x the float lanes), which gcc
    needs to vectorise a byte store, and the result is unchanged."""
    from tilegrad.schedule.defaults import default_schedule
    from tilegrad.target import Target

    target = Target(flags=frozenset({"avx2"}))
    x = te.placeholder((2, 3, 70), "float32", "x")
    scale, zero_point = te.placeholder((), "float32", "s"), te.placeholder((), "uint8", "z")
    q = lookup("quantize_linear").compute(x, scale, zero_point, axis=1)
    steps = default_schedule(q, target).trace.steps
    assert [dict(st.args)["factor"] for st in steps if st.kind == "split"] == [4 * target.vector_lanes]
    assert any(st.kind == "vectorize" for st in steps)
    data = np.random.default_rng(5).uniform(-3, 3, (2, 3, 70)).astype(np.float32)
    got = build(([x, scale, zero_point], [q]), target=target).run(data, np.array(0.02, np.float32), np.array(130, np.uint8))
    np.testing.assert_array_equal(got, np.clip(np.rint(data / np.float32(0.02)) + 130, 0, 255).astype(np.uint8))


@pytest.mark.parametrize("batch", [1, 2])
def test_a_channels_last_convolution_writes_its_output_from_the_gemm_epilogue(batch):
    """Channels-last, the GEMM's rows are the output's pixels: its epilogue is the (N, OH, OW, O) output itself
    (no reshaping copy after it), and each register tile's sums are those of one tile of rows, not recomputed
    for the whole output per tile (the epilogue's (image, row, column) index folds back into the GEMM's row)."""
    from tilegrad.te.nn.quantized import int8_conv_weight_shape, quantized_im2col_conv

    x = te.placeholder((batch, 7, 7, 8), "uint8", "x")
    wpack = te.placeholder(int8_conv_weight_shape(16, 8), "int8", "w")
    bias, multiplier = te.placeholder((16,), "int32", "b"), te.placeholder((16,), "float32", "m")
    y = quantized_im2col_conv(x, wpack, bias, multiplier, 16, (1, 1), 3, (1, 1), ((0, 0), (0, 0)), (1, 1), 0, 0,
                              255, "uint8", channels_last=True)
    assert (y.shape, y.op.tag) == ((batch, 7, 7, 16), "packed_int8_matmul")
    source = build(([x, wpack, bias, multiplier], [y])).source
    sums = [int(n) for n in re.findall(r"int32_t qconv_padded\[(\d+)\]", source)]
    assert sums and max(sums) <= 8 * 16, sums  # a tile of at most 8 rows of the 16 columns, not the 98 x 16


@pytest.mark.parametrize("width,stride", [(56, 1), (14, 2), (9, 1)])
def test_depthwise_quantized_conv2d_is_bit_exact_with_its_byte_vectors(width, stride):
    """A depthwise u8 convolution (the window rule, whose vector of outputs is now a vector of bytes) equals the
    NumPy integer reference, rows whose width is a multiple of the byte lanes and rows that are not."""
    rng = np.random.default_rng(width)
    c = 5
    x = rng.integers(0, 255, (1, c, 7, width), endpoint=True).astype(np.uint8)
    w = rng.integers(-127, 127, (c, 1, 3, 3), endpoint=True).astype(np.int8)
    bias = rng.integers(-3000, 3000, c).astype(np.int32)
    multiplier = (rng.random(c) * 0.01 + 1e-3).astype(np.float32)
    attrs = {"strides": (stride, stride), "pads": (1, 1, 1, 1), "dilations": (1, 1), "group": c, "x_zero_point": 9,
             "zero_point": 4, "lo": 4, "hi": 255, "out_dtype": "uint8", "weight_bits": 8}
    opdef = lookup("quantized_conv2d")
    got = _run("quantized_conv2d", [x, w, bias, multiplier], **attrs)
    np.testing.assert_array_equal(got, opdef.reference(x, w, bias, multiplier, **opdef.bind_attrs(attrs, "test")))
