"""Ops run through ONNX's function bodies (frontend/onnx_functions.py) whose bodies hold a subgraph reading the
body's own values (LinearAttention's Scan) or that live outside the default domain (FlexAttention, in
`ai.onnx.preview`): against ONNX Runtime, or ONNX's NumPy reference where ONNX Runtime lacks the op."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad

F = TensorProto.FLOAT
_rng = np.random.default_rng(27)


def _normal(*shape, scale=1.0):
    return (scale * _rng.standard_normal(shape)).astype("float32")


def _model(node, feeds, outputs, opsets):
    inputs = [helper.make_tensor_value_info(n, F, list(a.shape)) for n, a in feeds.items()]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, F, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
                             ir_version=11)


@pytest.mark.parametrize("rule, q_heads, kv_heads", [("linear", 4, 4), ("gated", 4, 2), ("gated_delta", 4, 2)])
def test_linear_attention_matches_onnxruntime(rule, q_heads, kv_heads):
    import onnxruntime as ort

    batch, seq, dk, dv = 2, 5, 4, 3
    feeds = {"q": _normal(batch, seq, q_heads * dk, scale=0.5), "k": _normal(batch, seq, kv_heads * dk, scale=0.5),
             "v": _normal(batch, seq, kv_heads * dv), "past": _normal(batch, kv_heads, dk, dv, scale=0.3)}
    names = ["q", "k", "v", "past"]
    if rule != "linear":
        feeds["decay"] = -np.abs(_normal(batch, seq, kv_heads * dk, scale=0.2))
        names.append("decay")
    if rule == "gated_delta":
        feeds["beta"] = _rng.uniform(0.1, 0.9, (batch, seq, kv_heads)).astype("float32")
        names.append("beta")
    node = helper.make_node("LinearAttention", names, ["y", "state"], q_num_heads=q_heads, kv_num_heads=kv_heads,
                            update_rule=rule)
    model = _model(node, feeds, ["y", "state"], {"": 27})
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = tilegrad.compile(model)(*feeds.values())
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_flex_attention_with_a_score_modifier_matches_the_reference():
    from onnx.reference import ReferenceEvaluator

    cap = numpy_helper.from_array(np.array(2.0, "float32"), "cap")
    score_mod = helper.make_graph(
        [helper.make_node("Div", ["scores", "cap"], ["ratio"]), helper.make_node("Tanh", ["ratio"], ["bent"]),
         helper.make_node("Mul", ["bent", "cap"], ["scores_out"])], "soft_cap",
        [helper.make_tensor_value_info("scores", F, ["B", "H", "L", "S"])],
        [helper.make_tensor_value_info("scores_out", F, ["B", "H", "L", "S"])], [cap])
    feeds = {"Q": _normal(2, 4, 3, 8), "K": _normal(2, 2, 5, 8), "V": _normal(2, 2, 5, 6)}
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", score_mod=score_mod,
                            scale=0.4)
    model = _model(node, feeds, ["Y"], {"": 26, "ai.onnx.preview": 1})
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    got = tilegrad.compile(model)(*feeds.values())
    assert got.shape == want.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
