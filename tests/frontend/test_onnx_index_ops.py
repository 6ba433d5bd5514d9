"""TensorScatter (frontend/onnx_index_ops.py), the KV-cache update, in both modes and on several axes against
ONNX Runtime (`onnx_cases` in conftest), its write indices given at run time; and its shape errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tilegrad.errors import ShapeError
from tilegrad.frontend.onnx import import_onnx

_rng = np.random.default_rng(24)


def _normal(*shape):
    return _rng.standard_normal(shape).astype("float32")


def test_tensor_scatter_matches_onnxruntime(onnx_cases):
    onnx_cases([
        {"op": "TensorScatter", "inputs": [_normal(2, 3, 6, 4), _normal(2, 3, 2, 4), np.array([1, 4], "int64")],
         "attrs": {}},
        {"op": "TensorScatter", "inputs": [_normal(3, 5, 2), _normal(3, 3, 2), np.array([4, 0, 3], "int64")],
         "attrs": {"mode": "circular", "axis": 1}},
        {"op": "TensorScatter", "inputs": [_normal(2, 7, 3), _normal(2, 7, 2)], "attrs": {"axis": -1}},
        {"op": "TensorScatter", "inputs": [_normal(2, 4, 3), _normal(2, 4, 3), np.array([2, 1], "int64")],
         "attrs": {"mode": "circular", "axis": 1}},
    ], opset=24)


@pytest.mark.parametrize("cache, update, axis, match", [
    ((2, 4, 3), (2, 5, 3), -2, "no longer along it"),
    ((2, 4, 3), (2, 4, 2), -2, "matches the cache outside it"),
    ((2, 4, 3), (2, 4, 3), 0, "other than the batch"),
])
def test_tensor_scatter_shape_errors_name_the_node(cache, update, axis, match):
    node = helper.make_node("TensorScatter", ["c", "u"], ["y"], name="kv", axis=axis)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.FLOAT, cache),
                                            helper.make_tensor_value_info("u", TensorProto.FLOAT, update)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(ShapeError, match=rf"'kv': TensorScatter needs .*{match}"):
        import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)]))
