"""Contradictory models, which ONNX Runtime refuses when it creates a session, are refused at import with a
`ModelFormatError` that names the rule: a model is not compiled on a guess about what it meant."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import AttributeProto, TensorProto, helper

import tilegrad
from tilegrad.frontend.onnx_file import ModelFormatError


def _model(nodes, inputs, outputs, initializers=(), opset=17, ir_version=10):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


X, Y = _vi("x", [2, 3]), _vi("y", [2, 3])


def _relu(inp="x", out="y", name="r"):
    return helper.make_node("Relu", [inp], [out], name=name)


def _conv(attribute: str, values: list[int]):
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c")
    node.attribute.append(helper.make_attribute(attribute, values, attr_type=AttributeProto.INTS))
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 1, 3, 3], [1.0] * 9)
    return _model([node], [_vi("x", [1, 1, 5, 5])], [_vi("y", None)], [w])


def _integer_division(op: str):
    zero = helper.make_tensor("z", TensorProto.INT32, [3], [1, 0, 2])
    return _model([helper.make_node(op, ["x", "z"], ["y"], name="d")], [_vi("x", [2, 3], TensorProto.INT32)],
                  [_vi("y", [2, 3], TensorProto.INT32)], [zero])


def _initializer_twice(second: list[float]):
    w = [helper.make_tensor("w", TensorProto.FLOAT, [3], values) for values in ([1.0, 2.0, 3.0], second)]
    return _model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [X], [Y], w)


CASES = {
    "two nodes of one name": (_model([_relu("x", "a", "n"), _relu("a", "y", "n")], [X], [Y]), "node name"),
    "a graph input twice": (_model([_relu()], [X, X], [Y]), "graph input"),
    "a value defined twice": (_model([_relu("x", "y", "a"), _relu("x", "y", "b")], [X], [Y]),
                              "value defined by a node"),
    "a node redefining an input": (_model([_relu("x", "x", "a"), _relu("x", "y", "b")], [X], [Y]),
                                   "redefine a graph input"),
    "an opset newer than ONNX's": (_model([_relu()], [X], [Y], opset=30), "opset 30"),
    "an IR version newer than ONNX's": (_model([_relu()], [X], [Y], ir_version=99), "IR version is 99"),
    "an output declared uint8 that is float": (_model([_relu()], [X], [_vi("y", [2, 3], TensorProto.UINT8)]),
                                               "declared uint8, but the graph computes float32"),
    "strides=[]": (_conv("strides", []), "strides [] has 0 values"),
    "pads of one axis": (_conv("pads", [1, 1]), "pads [1, 1] has 2 values"),
    "a zero dilation": (_conv("dilations", [0, 1]), "below 1"),
    "a 1-D kernel_shape on a 2-D image": (_conv("kernel_shape", [3]), "kernel_shape [3] has 1 axes"),
    "an integer Div by a constant zero": (_integer_division("Div"), "divides integers by a constant"),
    "an integer Mod by a constant zero": (_integer_division("Mod"), "divides integers by a constant"),
    "an initializer twice with different data": (_initializer_twice([1.0, 2.0, 4.0]),
                                                 "['w'] appear more than once in the model's graph with different"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_contradictory_model_is_refused_naming_the_rule(case):
    model, fragment = CASES[case]
    with pytest.raises(ModelFormatError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        tilegrad.compile(model)


@pytest.mark.parametrize("case", ["two nodes of one name", "a graph input twice", "a value defined twice",
                                  "an opset newer than ONNX's", "an IR version newer than ONNX's",
                                  "an output declared uint8 that is float", "strides=[]", "pads of one axis"])
def test_onnxruntime_refuses_them_too(case):
    with pytest.raises(Exception):  # noqa: B017 (ONNX Runtime raises its own Fail and InvalidGraph kinds)
        ort.InferenceSession(CASES[case][0].SerializeToString(), providers=["CPUExecutionProvider"])


def test_an_integer_division_by_a_computed_zero_still_runs():
    """Only a constant divisor is known to hold zero at compile time; a computed one gives 0, as before."""
    y = _vi("z", [2, 3], TensorProto.INT32)
    model = _model([helper.make_node("Div", ["x", "z"], ["y"])], [_vi("x", [2, 3], TensorProto.INT32), y],
                   [_vi("y", [2, 3], TensorProto.INT32)])
    ones = np.ones((2, 3), np.int32)
    np.testing.assert_array_equal(tilegrad.compile(model)(ones * 6, ones * 2), ones * 3)


def test_an_initializer_repeated_alike_is_accepted_as_onnxruntime_accepts_it():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(tilegrad.compile(_initializer_twice([1.0, 2.0, 3.0]))(x), x + [1, 2, 3])

