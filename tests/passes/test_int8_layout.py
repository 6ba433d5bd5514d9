"""The int8 layout pass: chains of quantized convolutions run channels-last, bit for bit what ONNX Runtime's
QLinearConv gives, with transposes only at their ends."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.frontend.load import import_model
from tilegrad.passes import optimize
from tilegrad.target import Target

RNG = np.random.default_rng(0)


def _scalars(prefix: str, scale: float, zero_point: int, dtype=np.uint8) -> list:
    return [numpy_helper.from_array(np.array(scale, np.float32), f"{prefix}_s"),
            numpy_helper.from_array(np.array(zero_point, dtype), f"{prefix}_z")]


def inverted_residual(channels: int, expand: int, size: int, stride: int, batch: int = 1) -> onnx.ModelProto:
    """u8 x -> 1x1 expansion -> 3x3 depthwise (stride) -> 1x1 projection, and with stride 1 the residual add of
    the dequantized input and projection, requantized: MobileNetV2's block as QLinear ops."""
    wide = channels * expand
    init = [*_scalars("x", 0.05, 120), *_scalars("a", 0.04, 10), *_scalars("b", 0.03, 7), *_scalars("y", 0.06, 128)]
    nodes = []

    def conv(name, src, in_scale, out, w_shape, group=1, stride=1, pad=0):
        w = RNG.integers(-60, 60, w_shape, endpoint=True).astype(np.int8)
        bias = RNG.integers(-500, 500, (w_shape[0],)).astype(np.int32)
        init.extend([numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(bias, f"{name}_bias"),
                     numpy_helper.from_array(RNG.uniform(0.005, 0.02, w_shape[0]).astype(np.float32), f"{name}_ws"),
                     numpy_helper.from_array(np.zeros(w_shape[0], np.int8), f"{name}_wz")])
        nodes.append(helper.make_node(
            "QLinearConv", [src, f"{in_scale}_s", f"{in_scale}_z", f"{name}_w", f"{name}_ws", f"{name}_wz",
                            f"{out}_s", f"{out}_z", f"{name}_bias"], [name], group=group, strides=[stride] * 2,
            pads=[pad] * 4, kernel_shape=list(w_shape[2:])))

    conv("expand", "x", "x", "a", (wide, channels, 1, 1))
    conv("depthwise", "expand", "a", "b", (wide, 1, 3, 3), group=wide, stride=stride, pad=1)
    conv("project", "depthwise", "b", "y" if stride == 2 else "a", (channels, wide, 1, 1))
    out = (size + 1) // 2 if stride == 2 else size
    if stride == 1:
        nodes += [helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["xf"]),
                  helper.make_node("DequantizeLinear", ["project", "a_s", "a_z"], ["pf"]),
                  helper.make_node("Add", ["xf", "pf"], ["sum"]),
                  helper.make_node("QuantizeLinear", ["sum", "y_s", "y_z"], ["y"])]
    else:
        nodes.append(helper.make_node("Identity", ["project"], ["y"]))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                             [batch, channels, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [batch, channels, out, out])],
                              init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("channels, expand, size, stride, batch", [(8, 4, 9, 1, 1), (6, 3, 7, 2, 1),
                                                                   (16, 6, 12, 1, 1), (5, 3, 11, 2, 1),
                                                                   (8, 3, 7, 1, 3), (4, 2, 5, 2, 2),
                                                                   (24, 2, 6, 1, 1)])
def test_a_quantized_block_runs_channels_last_and_matches_onnxruntime(channels, expand, size, stride, batch):
    """The convolutions are exact; the residual's float add then quantize may round a tie the other way (ONNX
    Runtime itself gives 1 apart with and without its graph optimisations), so with it: within 1, and channels-last
    exactly what NCHW gives. With a batch, the GEMM's rows run over the images' pixels as one loop, which the
    epilogue's (image, row, column) index must fold back into. With 24 channels the residual's row of bytes ends in
    a vector overlapping the one before (codegen/c.py)."""
    model = inverted_residual(channels, expand, size, stride, batch)
    x = RNG.integers(0, 255, (batch, channels, size, size), endpoint=True).astype(np.uint8)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    nhwc, nchw = tilegrad.compile(model)(x=x), tilegrad.compile(model, disable_passes=("int8_layout",))(x=x)
    np.testing.assert_array_equal(nhwc, nchw)
    assert np.abs(nhwc.astype(int) - expected).max() <= (1 if stride == 1 else 0)


def test_the_chain_is_channels_last_between_one_transpose_at_each_end():
    graph, report = optimize(import_model(inverted_residual(8, 4, 9, 1), None, None), 2, disable=("fuse",))
    ops = [(n.op, n.attrs.get("layout")) for n in graph.nodes]
    assert ("quantized_im2col_conv", "NHWC") in ops and ("quantized_conv2d", "NHWC") in ops
    assert [op for op, _ in ops].count("transpose") == 2  # x in, y out: the residual reads x's NHWC copy
    assert all(layout in (None, "NHWC") for _, layout in ops)
    assert any("NHWC int8 chain" in note for r in report.records for note in r.notes)


@pytest.mark.parametrize("flags,grouped", [({"avx2", "avx512f", "avx512_vnni", "avx512vbmi"}, True),
                                           ({"avx2", "avx512f", "avx512_vnni"}, False), ({"avx2"}, False)])
def test_the_depthwise_convolution_groups_its_taps_where_a_permute_and_vpdpbusd_do_a_group(flags, grouped):
    graph, _ = optimize(import_model(inverted_residual(8, 4, 9, 1), None, None), 2, disable=("fuse",),
                        target=Target(flags=frozenset(flags)))
    (depthwise,) = [n for n in graph.nodes if n.op == "quantized_conv2d"]
    assert depthwise.attrs["taps_grouped"] is grouped


def test_a_lone_quantized_convolution_stays_nchw():
    model = inverted_residual(8, 4, 9, 2)
    del model.graph.node[1:]  # the expansion alone
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("expand", TensorProto.UINT8, [1, 32, 9, 9]))
    graph, _ = optimize(import_model(model, None, None), 2, disable=("fuse",))
    assert [(n.op, n.attrs["layout"]) for n in graph.nodes] == [("quantized_im2col_conv", "NCHW")]


def test_a_lone_convolution_over_channels_not_in_groups_of_4_runs_channels_last_and_matches_onnxruntime():
    """An RGB stem before a float op: channels-last it reads its windows in place (whole_groups) instead of
    gathering them byte by byte; exactly ONNX Runtime's bytes, between one transpose at each end."""
    model = inverted_residual(3, 8, 15, 2)
    del model.graph.node[1:]
    del model.graph.node[0].attribute[:]
    model.graph.node[0].attribute.extend([helper.make_attribute("kernel_shape", [3, 3]),
                                          helper.make_attribute("strides", [2, 2]),
                                          helper.make_attribute("pads", [1] * 4)])
    w = RNG.integers(-60, 60, (24, 3, 3, 3), endpoint=True).astype(np.int8)
    for i, t in enumerate(model.graph.initializer):
        if t.name == "expand_w":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, "expand_w"))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("expand", TensorProto.UINT8, [1, 24, 8, 8]))
    graph, _ = optimize(import_model(model, None, None), 2, disable=("fuse",))
    ops = [(n.op, n.attrs.get("layout")) for n in graph.nodes]
    assert ("quantized_im2col_conv", "NHWC") in ops and [op for op, _ in ops].count("transpose") == 2
    x = RNG.integers(0, 255, (1, 3, 15, 15), endpoint=True).astype(np.uint8)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_array_equal(tilegrad.compile(model)(x=x), expected)
