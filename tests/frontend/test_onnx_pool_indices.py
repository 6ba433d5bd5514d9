"""MaxPool's Indices output (frontend/onnx_pool_indices.py) against ONNX Runtime: pads, strides, dilations,
ceil_mode, storage_order and 1-D to 3-D windows."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import tilegrad

from .conftest import run_onnxruntime


@pytest.mark.parametrize("shape, attrs", [
    ((1, 1, 5, 5), {"kernel_shape": [2, 2]}),
    ((2, 3, 5, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 2, 6, 7), {"kernel_shape": [2, 3], "strides": [2, 2], "storage_order": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [2, 2], "dilations": [2, 2], "ceil_mode": 1, "strides": [2, 2]}),
    ((2, 2, 9), {"kernel_shape": [3], "strides": [2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 4, 5, 3), {"kernel_shape": [2, 2, 2], "pads": [0, 1, 0, 1, 0, 1]}),
])
def test_max_pool_indices_match_onnxruntime(shape, attrs):
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)], ir_version=10)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::7] = 0.5  # ties: the first in window order wins
    got, want = tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
