"""ONNX Pad (frontend/onnx_padding.py): every mode, pads for some axes only and negative pads, compiled by
tilegrad and compared with ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad

from .conftest import run_onnxruntime


def _pad_model(shape, pads, mode, axes=None, value=None, dtype=TensorProto.FLOAT):
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    names = ["x", "pads"]
    if value is not None or axes is not None:
        names.append("value" if value is not None else "")
        if value is not None:
            inits.append(numpy_helper.from_array(np.array(value, np.float32), "value"))
    if axes is not None:
        names.append("axes")
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    node = helper.make_node("Pad", names, ["y"], mode=mode, name="pad")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, shape)],
                              [helper.make_tensor_value_info("y", dtype, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize("pads, axes", [((1, 2, 3, 1), None), ((2, 0, 1, 3), None), ((2, 3), (-1,)),
                                        ((1, -1, 0, 2), None), ((0, 2, -2, 1), (1, 0))])
def test_pad_matches_onnxruntime(mode, pads, axes):
    model = _pad_model([4, 5], pads, mode, axes=axes, value=1.5 if mode == "constant" else None)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype("float32")
    np.testing.assert_array_equal(tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})[0])


def test_pad_reflect_of_int64_in_3d():
    model = _pad_model([2, 3, 4], (0, 1, 2, 0, 2, 1), "reflect", dtype=TensorProto.INT64)
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    np.testing.assert_array_equal(tilegrad.compile(model)(x), run_onnxruntime(model, {"x": x})[0])


def test_pad_with_too_few_pads_names_the_node():
    with pytest.raises(tilegrad.errors.ShapeError, match="node 'pad'.*2 pads for 2 axes"):
        tilegrad.compile(_pad_model([4, 5], (1, 2), "edge"))
