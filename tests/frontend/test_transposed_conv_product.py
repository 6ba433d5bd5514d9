"""ConvTranspose with constant weights rewritten as a matrix product and col2im (frontend/transposed_conv.py),
against ONNX Runtime over kernels, strides, pads, output_padding and sizes; and the work it saves."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.compute import node_flops


def _model(x_shape, w, bias, **attrs):
    names = ["x", "w"] + (["b"] if bias is not None else [])
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(bias, "b")] if bias is not None else [])
    node = helper.make_node("ConvTranspose", names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def _check_against_onnxruntime(model, x):
    import onnxruntime as ort

    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = tilegrad.compile(model)(x=x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@st.composite
def _cases(draw):
    kernel = [draw(st.integers(1, 5)) for _ in range(2)]
    strides = [draw(st.integers(1, 3)) for _ in range(2)]
    pads = [draw(st.integers(0, k - 1)) for k in kernel] + [draw(st.integers(0, k - 1)) for k in kernel]
    # ONNX requires output_padding < stride.
    extra = [draw(st.integers(0, s - 1)) for s in strides]
    sizes = [draw(st.integers(1, 5)) for _ in range(2)]
    cin, cout, batch = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    with_bias = draw(st.booleans())
    return kernel, strides, pads, extra, sizes, cin, cout, batch, with_bias


@settings(max_examples=40, deadline=None)
@given(_cases())
def test_sub_pixel_conv_transpose_matches_onnxruntime(case):
    kernel, strides, pads, extra, sizes, cin, cout, batch, with_bias = case
    out = [(i - 1) * s + k - pb - pe + e
           for i, s, k, pb, pe, e in zip(sizes, strides, kernel, pads[:2], pads[2:], extra)]
    assume(min(out) >= 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, cin, *sizes)).astype(np.float32)
    w = rng.standard_normal((cin, cout, *kernel)).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32) if with_bias else None
    _check_against_onnxruntime(_model(x.shape, w, bias, strides=strides, pads=pads, output_padding=extra,
                                      kernel_shape=kernel), x)


def test_dcgan_layer_matches_onnxruntime_with_a_quarter_of_the_spread_form_work():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((16, 8, 4, 4)).astype(np.float32)
    model = _model(x.shape, w, None, strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[4, 4])
    _check_against_onnxruntime(model, x)
    nodes = import_onnx(model).nodes
    assert [n.op for n in nodes if n.op in ("conv", "matmul", "col2im")] == ["matmul", "col2im"]
    product_flops = sum(node_flops(n) for n in nodes if n.op == "matmul")
    # The spread form: 8 output channels x 16x16 pixels, each 16 inputs x 4x4 taps, two flops a multiply-add.
    spread_flops = 2 * 8 * 16 * 16 * 16 * 4 * 4
    # The product: each of the 8x8 input pixels' 16 channels times its 4x4 x 8 taps, nothing cropped.
    assert product_flops == 2 * 8 * 8 * 16 * (4 * 4 * 8) == spread_flops // 4


def test_kernel_smaller_than_stride_leaves_bias_in_empty_phases():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 1, 2)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    _check_against_onnxruntime(_model(x.shape, w, bias, strides=[3, 3], output_padding=[2, 1], kernel_shape=[1, 2]), x)


def test_a_dynamic_batch_keeps_the_product_form_and_matches_onnxruntime():
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 4, 4, 4)).astype(np.float32)
    model = _model(["batch", 6, 5, 5], w, None, strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[4, 4])
    module = tilegrad.compile(model, dynamic={"batch": (1, 4)})
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 3):
        x = rng.standard_normal((n, 6, 5, 5)).astype(np.float32)
        np.testing.assert_allclose(module(x=x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
