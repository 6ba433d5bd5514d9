"""LayerNormalization's Mean and InvStdDev and BatchNormalization in training mode (frontend/onnx_norm_outputs.py),
compiled by tilegrad and compared with ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad

from .conftest import run_onnxruntime


def _model(node, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph([node], "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


@pytest.mark.parametrize("axis, dtype", [(-1, np.float32), (1, np.float32), (0, np.float32), (-2, np.float16)])
def test_layer_norm_mean_and_inv_std_dev_match_onnxruntime(axis, dtype):
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.FLOAT16
    shape = (2, 3, 5)
    normalized = shape[axis % 3:]
    rng = np.random.default_rng(0)
    scale = numpy_helper.from_array(rng.standard_normal(normalized).astype(dtype), "scale")
    bias = numpy_helper.from_array(rng.standard_normal(normalized).astype(dtype), "bias")
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv_std"], axis=axis,
                            epsilon=1e-3)
    model = _model(node, [helper.make_tensor_value_info("x", elem, shape)],
                   [helper.make_tensor_value_info("y", elem, None),
                    helper.make_tensor_value_info("mean", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("inv_std", TensorProto.FLOAT, None)], [scale, bias])
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    got, want = tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_batch_norm_training_mode_gives_batch_statistics_and_running_ones():
    rng = np.random.default_rng(1)
    c = 3
    params = {"scale": rng.uniform(0.5, 1.5, c), "bias": rng.standard_normal(c), "mean": rng.standard_normal(c),
              "var": rng.uniform(0.5, 2, c)}
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in params.items()]
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"],
                            ["y", "running_mean", "running_var"], training_mode=1, momentum=0.8, epsilon=1e-2)
    model = _model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4, c, 2, 5))],
                   [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                    for n in ("y", "running_mean", "running_var")], inits, opset=15)
    x = (rng.standard_normal((4, c, 2, 5)) * 2 + 0.5).astype(np.float32)
    got = tilegrad.compile(model)(x)
    batch_mean, batch_var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    y = (x - batch_mean[:, None, None]) / np.sqrt(batch_var[:, None, None] + 1e-2)
    y = y * params["scale"][:, None, None] + params["bias"][:, None, None]
    np.testing.assert_allclose(got[0], y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], params["mean"] * 0.8 + batch_mean * 0.2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], params["var"] * 0.8 + batch_var * 0.2, rtol=1e-5, atol=1e-6)
