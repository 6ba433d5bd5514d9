"""The conv_algorithm pass: the frontend emits plain conv/matmul/gemm, the pass packs constant weights (and picks
a convolution algorithm), and the graph keeps its meaning."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize

RNG = np.random.default_rng(0)


def _same_meaning(g, inputs, **optimize_args):
    out, report = optimize(g, **optimize_args)
    want, got = run_reference(g, inputs), run_reference(out, inputs)
    for w, o in zip(want, got):
        np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-5)
    return out, report


def _ops(g):
    return [n.op for n in g.nodes]


def test_frontend_emits_plain_ops_and_the_pass_packs_them():
    w = numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype("float32"), "w")
    t = numpy_helper.from_array(RNG.standard_normal((8, 4, 3, 3)).astype("float32"), "t")
    m = numpy_helper.from_array(RNG.standard_normal((9, 5)).astype("float32"), "m")
    g_ = numpy_helper.from_array(RNG.standard_normal((5, 9)).astype("float32"), "g")
    c = numpy_helper.from_array(RNG.standard_normal((5,)).astype("float32"), "c")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["a", "t"], ["b"], name="deconv", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["b", "m"], ["d"], name="mm"),
             helper.make_node("Reshape", ["d", "shape"], ["e"], name="flat"),
             helper.make_node("Gemm", ["e", "g", "c"], ["y"], name="gemm", transB=1, alpha=0.5)]
    shape = numpy_helper.from_array(np.array([-1, 9], "int64"), "shape")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, t, m, g_, c, shape])
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    assert _ops(g) == ["conv", "dilate", "conv", "matmul", "reshape", "gemm"]
    x = RNG.standard_normal((1, 3, 5, 5)).astype("float32")
    out, _ = _same_meaning(g, [x], opt_level=1, options={"conv_algorithm": "direct"})
    assert _ops(out) == ["blocked_conv", "dilate", "blocked_conv", "reshape", "panel_matmul", "reshape", "reshape",
                         "panel_matmul"]
    assert all(n.inputs[1].is_constant for n in out.nodes if n.op in ("blocked_conv", "panel_matmul"))
    assert optimize(g, 0)[0] is g


def test_non_constant_grouped_or_transposed_operands_stay_plain():
    b = GraphBuilder()
    x, w = b.input("x", (1, 4, 6, 6)), b.input("w", (4, 4, 3, 3))
    y = b.op("conv", x, w, pads=(1, 1, 1, 1))
    z = b.op("conv", y, b.const(RNG.standard_normal((4, 1, 3, 3)).astype("float32")), group=4, pads=(1, 1, 1, 1))
    a = b.op("gemm", b.op("reshape", z, shape=(4, 36)), b.const(RNG.standard_normal((4, 3)).astype("float32")),
             trans_a=1)
    g = b.build(a)
    out, _ = optimize(g, 2)
    assert out is g
