"""ConvTranspose with auto_pad SAME_* and output_shape (frontend/onnx_ops.py `_transposed_pads`), with constant
weights (rewritten as a direct convolution) and weights given at run time, against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad

from .conftest import run_onnxruntime


@pytest.mark.parametrize("attrs", [{"auto_pad": "SAME_UPPER", "strides": [2, 2]},
                                   {"auto_pad": "SAME_LOWER", "strides": [2, 3]},
                                   {"auto_pad": "SAME_UPPER", "strides": [1, 1]},
                                   {"output_shape": [10, 8], "strides": [3, 2]},
                                   {"output_shape": [7, 6], "strides": [2, 2], "output_padding": [1, 1]},
                                   {"output_shape": [6, 5], "strides": [2, 2], "auto_pad": "SAME_UPPER"}])
@pytest.mark.parametrize("constant_weights", [True, False])
def test_conv_transpose_output_shape_and_auto_pad_match_onnxruntime(attrs, constant_weights):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    inits = [numpy_helper.from_array(w, "w")] if constant_weights else []
    if not constant_weights:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    feeds = {"x": x} if constant_weights else {"x": x, "w": w}
    want = run_onnxruntime(model, feeds)[0]
    got = tilegrad.compile(model)(**feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pads,bias,batch", [((0, 0, 0, 0), True, 1), ((1, 0, 1, 2), False, 2),
                                             ((0, 0, 0, 0), False, 3), ((1, 1, 1, 1), True, 2)])
def test_conv_transpose_of_a_point_is_one_product_and_matches_onnxruntime(pads, bias, batch):
    """A generator's first layer (a 1 x 1 latent map, DCGAN's 100 -> 512 x 4 x 4): one matmul of the cropped taps."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 5, 1, 1)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal((5, 7, 4, 4)).astype(np.float32), "w")]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(7).astype(np.float32), "b"))
    node = helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], pads=list(pads))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    want = run_onnxruntime(model, {"x": x})[0]
    module = tilegrad.compile(model)
    assert not any("conv" in site.label for site in module.profile(x).sites)
    np.testing.assert_allclose(module(x), want, rtol=1e-5, atol=1e-5)
