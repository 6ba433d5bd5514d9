"""The expand pass: each composite op becomes basic ops that compute the same thing (against the NumPy oracle on
random shapes and axes, and compiled), softmax stays stable on large inputs, basic-op graphs such as RMSNorm
pass through untouched, and `options["expand"]` picks the ops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from tilegrad.errors import TilegradError
from tilegrad.executor import compile_graph
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize, pass_names
from tilegrad.passes.expand import expand_composites, expandable
from tilegrad.passes.context import PassContext
from tilegrad.passes.pipeline import PIPELINE

COMPOSITES = set(expandable())
BASIC = {"reduce_mean", "reduce_max", "reduce_sum", "add", "sub", "mul", "div", "sqrt", "reciprocal", "exp", "log",
         "erf", "reshape"}


def _expand(g, **options):
    ctx = PassContext(options=options)
    return expand_composites(g, ctx), ctx.notes


def _assert_expands_equivalently(g, inputs):
    """The expanded graph holds only basic ops and matches the original under the NumPy oracle."""
    out, _ = _expand(g)
    assert {n.op for n in out.nodes} <= BASIC, [n.op for n in out.nodes]
    for want, got in zip(run_reference(g, inputs), run_reference(out, inputs)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return out


def _normal(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


shapes = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


@st.composite
def shape_and_axis(draw, min_rank=1):
    shape = draw(st.lists(st.integers(1, 6), min_size=min_rank, max_size=4).map(tuple))
    return shape, draw(st.integers(-len(shape), len(shape) - 1))


# ---- each op against the oracle ----

@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@given(case=shape_and_axis())
def test_softmaxes_expand_to_the_same_values(op, case):
    shape, axis = case
    b = GraphBuilder()
    g = b.build(b.op(op, b.input("x", shape), axis=axis))
    _assert_expands_equivalently(g, [_normal(shape)])


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("offset, spread", [(100.0, 1.0), (1000.0, 30.0), (-1000.0, 30.0)])
def test_softmaxes_are_stable_on_large_inputs(op, offset, spread):
    """exp(1000) overflows float32: only the max-subtracted form gets these right."""
    b = GraphBuilder()
    g = b.build(b.op(op, b.input("x", (3, 50)), axis=1))
    x = (offset + spread * _normal((3, 50))).astype("float32")
    out = _assert_expands_equivalently(g, [x])
    assert np.isfinite(run_reference(out, [x])[0]).all()


@given(case=shape_and_axis(), affine=st.sampled_from(["none", "scale", "scale_and_bias"]), data=st.data())
def test_layer_norm_expands_to_the_same_values(case, affine, data):
    shape, axis = case
    inner = shape[axis % len(shape):]
    param_shape = inner[data.draw(st.integers(0, len(inner) - 1)):]  # a suffix broadcasts to the inner shape
    b = GraphBuilder()
    params = [b.const(_normal(param_shape, seed) + 1, name) for seed, name in ((1, "scale"), (2, "bias"))]
    params = {"none": [], "scale": params[:1], "scale_and_bias": params}[affine]
    g = b.build(b.op("layer_norm", b.input("x", shape), *params, axis=axis, epsilon=1e-3))
    _assert_expands_equivalently(g, [_normal(shape)])


@given(shape=st.lists(st.integers(1, 5), min_size=3, max_size=5).map(tuple))
def test_instance_norm_expands_to_the_same_values(shape):
    b = GraphBuilder()
    scale, bias = b.const(_normal(shape[1], 1), "scale"), b.const(_normal(shape[1], 2), "bias")
    g = b.build(b.op("instance_norm", b.input("x", shape), scale, bias))
    _assert_expands_equivalently(g, [3 * _normal(shape) + 1])


@given(shape=st.lists(st.integers(1, 5), min_size=2, max_size=4).map(tuple), constant=st.booleans())
def test_batch_norm_expands_to_the_same_values(shape, constant):
    """Constant statistics fold into per-channel constants a, b (x * a + b); input statistics stay as ops."""
    channels = (shape[1],)
    params = [_normal(channels, 1), _normal(channels, 2), _normal(channels, 3), np.abs(_normal(channels, 4)) + 0.1]
    b = GraphBuilder()
    x = b.input("x", shape)
    values = [b.const(p, name) if constant else b.input(name, channels)
              for p, name in zip(params, ("scale", "bias", "mean", "var"))]
    g = b.build(b.op("batch_norm", x, *values, epsilon=1e-3))
    out = _assert_expands_equivalently(g, [_normal(shape)] + ([] if constant else params))
    if constant:
        assert [n.op for n in out.nodes] == ["mul", "add"]


@given(shape=shapes)
def test_gelu_expands_to_the_same_values(shape):
    b = GraphBuilder()
    g = b.build(b.op("gelu", b.input("x", shape)))
    _assert_expands_equivalently(g, [3 * _normal(shape)])


# ---- structure and options ----

def _all_composites():
    """x (2, 4, 3, 5) through every composite op."""
    b = GraphBuilder()
    x = b.input("x", (2, 4, 3, 5))
    per_channel = [b.const(_normal(4, seed) ** 2 + 0.5, f"p{seed}") for seed in range(4)]
    y = b.op("batch_norm", x, *per_channel)
    y = b.op("instance_norm", y, per_channel[0], per_channel[1])
    y = b.op("layer_norm", b.op("gelu", y), b.const(_normal(5, 5)), axis=-1)
    y = b.op("log_softmax", b.op("softmax", y, axis=1), axis=2)
    return b.build(y)


def test_no_composite_op_remains_and_the_pass_notes_what_it_expanded():
    g = _all_composites()
    out, notes = _expand(g)
    assert not {n.op for n in out.nodes} & COMPOSITES
    assert out.outputs[0].name == g.outputs[0].name
    assert notes == ["expanded batch_norm x1, gelu x1, instance_norm x1, layer_norm x1, log_softmax x1, softmax x1"]
    _assert_expands_equivalently(g, [_normal((2, 4, 3, 5))])


def test_options_pick_the_ops_to_expand():
    g = _all_composites()
    out, notes = _expand(g, expand={"softmax", "gelu"})
    left = {n.op for n in out.nodes} & COMPOSITES
    assert left == COMPOSITES - {"softmax", "gelu"}
    assert notes == ["expanded gelu x1, softmax x1"]
    assert _expand(g, expand=set())[0] is g
    with pytest.raises(TilegradError, match="cannot expand \\['conv'\\].*layer_norm"):
        _expand(g, expand={"softmax", "conv"})


def test_expand_runs_at_level_2_in_the_pipeline():
    (expand,) = [p for p in PIPELINE if p.name == "expand"]
    names = pass_names()
    assert expand.level == 2 and names.index("attention") < names.index("expand") < names.index("conv_algorithm")
    b = GraphBuilder()
    g = b.build(b.op("softmax", b.input("x", (2, 3))))
    others = [name for name in pass_names() if name != "expand"]
    assert optimize(g, 1, disable=others)[0] is g
    out, report = optimize(g, 2, disable=others)
    assert [n.op for n in out.nodes] == ["reduce_max", "sub", "exp", "reduce_sum", "div"]
    assert "expand: 1 -> 5 nodes" in report.format()


def test_rms_norm_from_onnx_passes_through_unchanged():
    """RMSNorm, x / sqrt(mean(x²) + eps) * w, arrives from ONNX as basic ops: nothing to expand."""
    w = _normal(16, 1)
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["var"]),
             helper.make_node("Sqrt", ["var"], ["rms"]),
             helper.make_node("Div", ["one", "rms"], ["inv"]),
             helper.make_node("Mul", ["x", "inv"], ["normed"]),
             helper.make_node("Mul", ["normed", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.array(v, "float32"), n) for n, v in (("two", 2.0), ("eps", 1e-6), ("one", 1.0))]
    graph = helper.make_graph(nodes, "rms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 16])],
                              inits + [numpy_helper.from_array(w, "w")])
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    out, notes = _expand(g)
    assert out is g and notes == []
    x = _normal((3, 16))
    want = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(run_reference(out, [x])[0], want, rtol=1e-5, atol=1e-6)


# ---- compiled ----

def _layer_norm_graph():
    b = GraphBuilder()
    x = b.input("x", (8, 96))
    return b.build(b.op("layer_norm", x, b.const(_normal(96, 1)), b.const(_normal(96, 2)), epsilon=1e-5)), 0.0


def _softmax_graph():
    b = GraphBuilder()
    return b.build(b.op("softmax", b.input("x", (4, 6, 10)), axis=1)), 100.0


def _batch_norm_graph():
    b = GraphBuilder()
    x, mean, var = b.input("x", (2, 3, 4, 4)), b.input("mean", (3,)), b.const(np.array([0.5, 1, 2], "float32"))
    return b.build(b.op("batch_norm", x, b.const(_normal(3, 1)), b.const(_normal(3, 2)), mean, var)), 0.0


@pytest.mark.parametrize("make", [_layer_norm_graph, _softmax_graph, _batch_norm_graph])
def test_compiled_expansion_matches_numpy(make):
    g, offset = make()
    out, _ = _expand(g)
    inputs = [(offset + _normal(v.shape, i)).astype("float32") for i, v in enumerate(g.inputs)]
    np.testing.assert_allclose(compile_graph(out)(*inputs), run_reference(g, inputs)[0], rtol=1e-5, atol=1e-6)
