"""Other runtimes timed on a module's benchmark inputs: a time where the peer runs, the reason where it cannot."""

import numpy as np
from onnx import TensorProto, helper

from tilegrad.peers import onnxruntime_peer
from tilegrad.runtime.module import benchmark_inputs
from tilegrad.runtime.kernel import BufferSpec


def _model(op: str, domain: str = ""):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain=domain)], "one",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets)


SPECS = [BufferSpec("x", (4, 8), "float32")]


def test_onnxruntime_is_timed_on_the_benchmark_inputs():
    seconds, why = onnxruntime_peer(_model("Relu"))(SPECS)
    assert seconds is not None and 0 < seconds < 1 and why == ""
    x = benchmark_inputs(SPECS)["x"]
    assert x.shape == (4, 8) and x.dtype == np.float32 and x.std() > 0


def test_a_model_onnxruntime_refuses_is_a_reason_not_an_error():
    seconds, why = onnxruntime_peer(_model("Frobnicate", domain="com.example"))(SPECS)
    assert seconds is None and why.startswith("failed: ") and "Frobnicate" in why
