"""Adding an op is its declaration, its compute and one frontend mapping: two made-up ops declared here (an
element-wise `scaled_tanh` with an attribute, and a row-wise `mean_center`) import from ONNX, compile, match their
references, fuse with their neighbours, keep a blocked layout and report their FLOPs, with no other table edited."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import te
from tilegrad.api import compile_with_report
from tilegrad.cli import main
from tilegrad.frontend.onnx import import_onnx
from tilegrad.frontend.onnx_op_table import ONNX_OPS, onnx_op
from tilegrad.ir.compute import node_compute, node_flops
from tilegrad.ir.interpret import run_reference
from tilegrad.ir.registry import ELEMWISE, OPS, REDUCTION, Sample, declare, same_as_input
from tilegrad.passes.conv_algorithm import conv_algorithm
from tilegrad.passes.expand import expandable
from tilegrad.passes.fuse import row_shape
from tilegrad.passes.layout import layout
from tilegrad.passes.context import PassContext
from tilegrad.schedule.defaults import default_schedule

RNG = np.random.default_rng(0)


# ---- the two ops, as a family file would declare them ----

def _scaled_tanh_te(x, *, scale):
    return te.compute(x.shape, lambda *i: te.tanh(x[i]) * scale, name="scaled_tanh", tag="elemwise",
                      attrs={"scale": scale})


def _mean_center_te(x):
    """x minus the mean of its row (the last axis): a mean stage, then the output, which declares its rows."""
    k = te.reduce_axis(x.shape[-1], "k")
    count = float(x.shape[-1])
    mean = te.compute(x.shape[:-1], lambda *i: te.sum(x[(*i, k)] / count, axis=k), name="mean_center_mean",
                      tag="reduce")
    return te.compute(x.shape, lambda *i: x[i] - mean[i[:-1]], name="mean_center", tag="mean_center",
                      attrs={"row_axes": x.ndim - 1})


def _mean_center_ref(x):
    return (x - x.astype(np.float64).mean(axis=-1, keepdims=True)).astype(x.dtype)


@pytest.fixture(scope="module", autouse=True)
def new_ops():
    """Declare the ops and their ONNX mappings for this module only, and take them out again afterwards."""
    declare("scaled_tanh", kind=ELEMWISE, attrs={"scale": 1.0}, infer=same_as_input,
            reference=lambda x, *, scale: (np.tanh(x) * scale).astype(x.dtype), compute=_scaled_tanh_te,
            finite=True, samples=(Sample((((4, 33), "float32"),), {"scale": 2.0}),))
    declare("mean_center", kind=REDUCTION, infer=same_as_input, reference=_mean_center_ref, compute=_mean_center_te,
            expand=lambda x: x - x.mean(-1), rows=lambda x, **_: x[:-1], samples=(Sample((((4, 33), "float32"),)),))

    @onnx_op("ScaledTanh")
    def _scaled_tanh(b, name, x, *, scale=1.0):
        return b.op("scaled_tanh", x, name=name, scale=float(scale))

    @onnx_op("MeanCenter")
    def _mean_center(b, name, x):
        return b.op("mean_center", x, name=name)

    yield
    for op in ("scaled_tanh", "mean_center"):
        del OPS[op]
    for op_type in ("ScaledTanh", "MeanCenter"):
        del ONNX_OPS[op_type]


# ---- models ----

def _model(nodes, x_shape, y_shape, inits=()):
    graph = helper.make_graph(nodes, "new_op", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _weight(name, *shape):
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.3).astype(np.float32), name)


def _conv_tanh_add(channels=8):
    """x -> Conv 3x3 (pads 1) -> ScaledTanh -> + x -> y."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("ScaledTanh", ["c"], ["t"], name="st", scale=1.5),
             helper.make_node("Add", ["t", "x"], ["y"], name="y")]
    shape = [1, channels, 6, 6]
    return _model(nodes, shape, shape, [_weight("w", channels, channels, 3, 3), _weight("b", channels)])


# ---- the element-wise op ----

def test_it_imports_compiles_and_matches_its_reference():
    model = _model([helper.make_node("ScaledTanh", ["x"], ["y"], name="st", scale=3.0)], [4, 33], [4, 33])
    x = RNG.standard_normal((4, 33)).astype(np.float32)
    np.testing.assert_allclose(tilegrad.compile(model)(x=x), np.tanh(x) * 3.0, rtol=1e-5, atol=1e-6)


def test_it_fuses_between_a_conv_and_an_add():
    model = _conv_tanh_add()
    fused = compile_with_report(model)
    unfused = compile_with_report(model, disable_passes=["fuse"])
    assert fused.kernels == 1 and unfused.kernels == 3
    x = RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)
    (want,) = run_reference(import_onnx(model), [x])
    for compilation in (fused, unfused):
        np.testing.assert_allclose(compilation.module(x=x), want, rtol=1e-4, atol=1e-5)


def _conv_tanh_conv():
    """x -> Conv 1x1 to 12 channels -> ScaledTanh -> Conv 3x3 to 8 channels -> y."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1"),
             helper.make_node("ScaledTanh", ["c"], ["t"], name="st", scale=0.5),
             helper.make_node("Conv", ["t", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    return _model(nodes, [1, 8, 6, 6], [1, 8, 6, 6], [_weight("w1", 12, 8, 1, 1), _weight("w2", 8, 12, 3, 3)])


def _blocked(g):
    ctx = PassContext(options={"conv_algorithm": "direct", "layout_block": 8})
    return layout(conv_algorithm(g, ctx), ctx)


def test_a_conv_chain_through_it_stays_blocked():
    """12 channels fill one and a half blocks of 8; the op's `finite` declaration lets the layout flow through."""
    model = _conv_tanh_conv()
    g = import_onnx(model)
    out = _blocked(g)
    assert [n.op for n in out.nodes] == ["conv_nchwc", "scaled_tanh", "conv_nchwc", "layout_from_blocked"]
    assert len(out.nodes[1].outputs[0].shape) == 5
    x = RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run_reference(out, [x])[0], run_reference(g, [x])[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tilegrad.compile(model)(x=x), run_reference(g, [x])[0], rtol=1e-4, atol=1e-5)


def test_without_the_finite_declaration_the_chain_ends_at_it(monkeypatch):
    monkeypatch.setitem(OPS, "scaled_tanh", dataclasses.replace(OPS["scaled_tanh"], finite=False))
    out = _blocked(import_onnx(_conv_tanh_conv()))
    assert [n.op for n in out.nodes] == ["blocked_conv", "scaled_tanh", "blocked_conv"]


def test_it_reports_its_flops(tmp_path, capsys):
    """Declared with no `flops`, it is counted over its compute: a tanh and a multiply per element."""
    g = import_onnx(_conv_tanh_add())
    (node,) = [n for n in g.nodes if n.op == "scaled_tanh"]
    assert node_flops(node) == 2 * 8 * 6 * 6
    path = tmp_path / "model.onnx"
    path.write_bytes(_conv_tanh_add().SerializeToString())
    assert main(["info", str(path)]) == 0
    flops = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("FLOPs:"))
    conv = 2 * (8 * 6 * 6) * (8 * 3 * 3)
    assert f"{conv + 2 * 8 * 6 * 6 + 8 * 6 * 6:,}" in flops and "scaled_tanh 576" in flops


# ---- the row-wise op ----

def _center_add():
    """x -> MeanCenter -> + x -> y, over rows of 33."""
    nodes = [helper.make_node("MeanCenter", ["x"], ["c"], name="mc"), helper.make_node("Add", ["c", "x"], ["y"])]
    return _model(nodes, [6, 33], [6, 33])


def test_the_row_wise_op_runs_whole_or_expanded_and_fuses_with_its_consumer():
    model = _center_add()
    x = RNG.standard_normal((6, 33)).astype(np.float32)
    want = _mean_center_ref(x) + x
    assert "mean_center" in expandable()
    whole = compile_with_report(model, disable_passes=["expand"])
    assert whole.kernels == 1 and compile_with_report(model, disable_passes=["expand", "fuse"]).kernels == 2
    expanded = compile_with_report(model)
    assert "mean_center" not in {n.op for n in expanded.graph.nodes}
    for compilation in (whole, expanded):
        np.testing.assert_allclose(compilation.module(x=x), want, rtol=1e-5, atol=1e-5)


def test_the_row_wise_op_declares_its_rows_to_fusion_and_the_schedule():
    g = import_onnx(_center_add())
    (node,) = [n for n in g.nodes if n.op == "mean_center"]
    assert row_shape(node) == (6,)
    _, outs = node_compute(node)
    steps = default_schedule(outs).trace.steps
    assert [s.kind for s in steps] == ["compute_at", "vectorize"]  # each row's mean computed inside the row loop
    assert dict(steps[0].args)["stage"] == "mean_center_mean"
