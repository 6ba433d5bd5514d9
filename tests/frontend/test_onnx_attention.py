"""ONNX's Attention (opset 23, frontend/onnx_attention.py) compiled by tilegrad and compared with ONNX's reference
implementation and ONNX Runtime: 4-D and 3-D operands, group-query heads, boolean and additive masks, causal
(square, and top-left when the query is shorter than the keys), the key/value cache, and fully hidden rows."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tilegrad
from tilegrad.errors import UnsupportedFeatureError
from tilegrad.executor import compile_graph
from tilegrad.frontend.onnx import import_onnx
from tilegrad.passes import optimize

from .conftest import run_onnxruntime

_ELEM = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("bool"): TensorProto.BOOL}


def _model(feeds: dict, outputs: tuple[str, ...], **attrs):
    names = ["q", "k", "v", "attn_mask", "past_key", "past_value"]
    used = [n if n in feeds else "" for n in names]
    while used and not used[-1]:
        used.pop()
    node = helper.make_node("Attention", used, list(outputs), **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, _ELEM[a.dtype], a.shape)
                                            for n, a in feeds.items()],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def _feeds(rng, q, k, v, mask=None, past=None):
    feeds = {"q": rng.standard_normal(q), "k": rng.standard_normal(k), "v": rng.standard_normal(v)}
    if mask is not None:
        feeds["attn_mask"] = mask
    if past is not None:
        feeds["past_key"], feeds["past_value"] = rng.standard_normal(past[0]), rng.standard_normal(past[1])
    return {n: a if a.dtype == bool else a.astype(np.float32) for n, a in feeds.items()}


def _check(feeds, outputs=("y",), **attrs):
    model = _model(feeds, outputs, **attrs)
    got = tilegrad.compile(model)(*feeds.values())
    got = got if isinstance(got, (list, tuple)) else [got]
    for want in (ReferenceEvaluator(model).run(None, feeds), run_onnxruntime(model, feeds)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return model


CASES = {
    "4d": ({"q": (2, 3, 7, 8), "k": (2, 3, 5, 8), "v": (2, 3, 5, 6)}, {}),
    "4d_scale_causal": ({"q": (1, 2, 9, 16), "k": (1, 2, 9, 16), "v": (1, 2, 9, 16)}, {"scale": 0.3, "is_causal": 1}),
    "causal_short_query": ({"q": (1, 2, 4, 8), "k": (1, 2, 7, 8), "v": (1, 2, 7, 8)}, {"is_causal": 1}),
    "3d": ({"q": (2, 5, 12), "k": (2, 6, 12), "v": (2, 6, 9)}, {"q_num_heads": 3, "kv_num_heads": 3}),
    "gqa_4d": ({"q": (1, 6, 5, 8), "k": (1, 2, 5, 8), "v": (1, 2, 5, 8)}, {"is_causal": 1}),
    "gqa_3d": ({"q": (2, 5, 32), "k": (2, 5, 8), "v": (2, 5, 8)}, {"q_num_heads": 4, "kv_num_heads": 1}),
}


@pytest.mark.parametrize("case", CASES)
def test_attention_matches_the_reference_and_onnxruntime(case):
    shapes, attrs = CASES[case]
    _check(_feeds(np.random.default_rng(0), **shapes), **attrs)


@pytest.mark.parametrize("shape", [(7, 5), (1, 1, 7, 5), (1, 3, 7, 5)])
def test_boolean_and_additive_masks(shape):
    rng = np.random.default_rng(1)
    allowed = rng.random(shape) < 0.7
    allowed[..., 0] = True
    q, k = (1, 3, 7, 8), (1, 3, 5, 8)
    _check(_feeds(rng, q, k, k, mask=allowed))
    _check(_feeds(rng, q, k, k, mask=rng.standard_normal(shape).astype(np.float32)), is_causal=1)


def test_group_query_heads_with_a_per_head_mask():
    rng = np.random.default_rng(2)
    _check(_feeds(rng, (2, 4, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8), mask=rng.random((2, 4, 6, 6)) < 0.8))


def test_fully_hidden_rows_give_zeros():
    rng = np.random.default_rng(3)
    allowed = rng.random((1, 1, 6, 5)) < 0.6
    allowed[0, 0, 2] = False
    feeds = _feeds(rng, (1, 2, 6, 8), (1, 2, 5, 8), (1, 2, 5, 8), mask=allowed)
    _check(feeds)
    y = tilegrad.compile(_model(feeds, ("y",)))(*feeds.values())
    assert not y[:, :, 2].any() and np.isfinite(y).all()


def test_key_value_cache_gives_the_present_key_and_value():
    rng = np.random.default_rng(4)
    feeds = _feeds(rng, (1, 2, 3, 8), (1, 2, 3, 8), (1, 2, 3, 4), past=((1, 2, 5, 8), (1, 2, 5, 4)))
    _check(feeds, ("y", "present_key", "present_value"), is_causal=1)


@pytest.mark.parametrize("case", ["4d_scale_causal", "gqa_4d", "3d"])
def test_the_attention_pass_makes_one_attention_of_it(case):
    shapes, attrs = CASES[case]
    feeds = _feeds(np.random.default_rng(5), **shapes)
    model = _model(feeds, ("y",), **attrs)
    formed, _ = optimize(import_onnx(model), enable=["attention"])
    (node,) = [n for n in formed.nodes if n.op == "attention"]
    assert node.attrs["causal"] == bool(attrs.get("is_causal"))
    got = compile_graph(formed)(*feeds.values())
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4, atol=1e-5)


def test_masked_attention_forms_one_attention_and_keeps_zero_rows():
    rng = np.random.default_rng(7)
    allowed = rng.random((1, 1, 6, 5)) < 0.6
    allowed[0, 0, 2] = False
    feeds = _feeds(rng, (1, 2, 6, 8), (1, 2, 5, 8), (1, 2, 5, 8), mask=allowed)
    model = _model(feeds, ("y",))
    formed, _ = optimize(import_onnx(model), enable=["attention"])
    assert [n.op for n in formed.nodes].count("attention") == 1
    got = compile_graph(formed)(*feeds.values())
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs, outputs", [
    ({"softcap": 3.0}, ("y",)),
    ({"is_causal": 1}, ("y", "present_key", "present_value", "qk")),
])
def test_what_the_op_lacks_runs_through_the_function_body(attrs, outputs):
    feeds = _feeds(np.random.default_rng(6), (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4))
    model = _check(feeds, outputs, **attrs)
    assert not any(n.op == "attention" for n in import_onnx(model).nodes)


def test_a_scale_without_a_square_root_is_refused_by_name():
    feeds = _feeds(np.random.default_rng(8), (1, 1, 3, 4), (1, 1, 3, 4), (1, 1, 3, 4))
    with pytest.raises(UnsupportedFeatureError, match="scale=-0.5"):
        import_onnx(_model(feeds, ("y",), scale=-0.5))
