"""The incremental observer: over a sequence of models that differ in one bias, the same tensors as observing each
model afresh, with only the nodes after the change evaluated again."""

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tilegrad.quant import tap
from tilegrad.quant.tap import IncrementalObserver, Observer


def _chain(bias: float) -> onnx.ModelProto:
    """x -> MatMul w1 -> Add b1 -> Relu -> MatMul w2 -> Add b2(bias) -> Relu -> MatMul w3 -> y."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"w{i}") for i in (1, 2, 3)]
    biases = [numpy_helper.from_array(np.full(8, b, np.float32), f"b{i}") for i, b in ((1, 0.1), (2, bias))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]), helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["a2"]), helper.make_node("Relu", ["a2"], ["r2"]),
             helper.make_node("MatMul", ["r2", "w3"], ["y"])]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 8])], weights + biases)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_changed_bias_reevaluates_only_what_follows_it(monkeypatch):
    batches = [{"x": np.random.default_rng(i).standard_normal((4, 8)).astype(np.float32)} for i in range(3)]
    evaluated = []
    real = tap.lookup
    monkeypatch.setattr(tap, "lookup", lambda op: evaluated.append(op) or real(op))
    observer = IncrementalObserver(batches)
    for bias, name in ((0.0, "r1"), (0.0, "y"), (0.5, "y")):
        model = _chain(bias)
        evaluated.clear()
        got = observer.run(model, name)
        want = [s[name] for s in Observer(model, [name]).run(batches)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        counts = len(evaluated)
        if name == "r1" and bias == 0.0:
            assert counts == 3 * 3  # nothing seen yet: MatMul, Add, Relu for each batch
        elif bias == 0.0:
            assert counts == 4 * 3  # the first three nodes are known: the second MatMul, Add, Relu and the last
        else:
            assert counts == 3 * 3  # b2 changed: its Add, the Relu and the last MatMul; m2 is reused
