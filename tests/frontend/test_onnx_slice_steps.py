"""Slice with negative steps (frontend/onnx_ops.py `_slice_backwards`) against ONNX Runtime, clamping included."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad

from .conftest import run_onnxruntime

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ((-1,), (INT64_MIN,), (1,), (-1,)),
    ((20, 0), (0, 5), (0, 1), (-2, 2)),
    ((3, -1), (-10, 1), (0, 1), (-1, -3)),
    ((-10,), (-20,), (0,), (-1,)),
    ((2, INT64_MAX), (1, INT64_MIN), (-1, 0), (1, -2)),
])
def test_negative_steps_match_onnxruntime(starts, ends, axes, steps):
    inits = [numpy_helper.from_array(np.array(v, np.int64), n)
             for n, v in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps))]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (5, 7))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    want = run_onnxruntime(model, {"x": x})[0]
    got = tilegrad.compile(model)(x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
