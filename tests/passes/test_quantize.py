"""The QDQ fold (passes/quantize.py) and the QOperator import (frontend/onnx_qoperator_ops.py) on a small CNN and
a small MLP block with random weights, quantized by onnxruntime.quantization.quantize_static on random
calibration data, against ONNX Runtime running the same quantized model.

The CNN (Conv+Relu, MaxPool, a residual Add, LeakyRelu, Sigmoid, Mul, AveragePool, Concat, GlobalAveragePool,
Gemm) agrees bit for bit; the MLP block ends in a quantized Softmax, where ONNX Runtime's lookup table and
tilegrad's float softmax may round one output a step apart. Weights use reduce_range (7 bits), so ONNX Runtime's
AVX2 kernels (vpmaddubsw) cannot saturate a pair of products."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.frontend.load import import_model
from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.context import PassContext
from tilegrad.passes.quantize import fold_qdq

F = TensorProto.FLOAT


def _init(rng, name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("float32"), name)


def _cnn(rng):
    inits = [_init(rng, "w1", 8, 3, 3, 3), _init(rng, "b1", 8, scale=0.1), _init(rng, "w2", 8, 8, 3, 3),
             _init(rng, "b2", 8, scale=0.1), _init(rng, "w3", 8, 8, 1, 1), _init(rng, "fc", 16, 5),
             _init(rng, "fcb", 5, scale=0.1)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Add", ["r2", "p1"], ["a"]),
             helper.make_node("Conv", ["a", "w3"], ["c3"]),
             helper.make_node("Sigmoid", ["c3"], ["s3"]),
             helper.make_node("LeakyRelu", ["a"], ["l3"], alpha=0.1),
             helper.make_node("Mul", ["s3", "l3"], ["m"]),
             helper.make_node("AveragePool", ["m"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["ap", "ap"], ["cc"], axis=1),
             helper.make_node("GlobalAveragePool", ["cc"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"])]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", F, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), (1, 3, 8, 8)


def _mlp(rng):
    """A transformer's feed-forward block: MatMul + bias, Relu, MatMul + bias, the residual, Softmax."""
    inits = [_init(rng, "w1", 16, 32), _init(rng, "b1", 32, scale=0.1), _init(rng, "w2", 32, 16),
             _init(rng, "b2", 16, scale=0.1)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Add", ["ob", "x"], ["res"]),
             helper.make_node("Softmax", ["res"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F, [2, 4, 16])],
                              [helper.make_tensor_value_info("y", F, [2, 4, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), (2, 4, 16)


def _quantized(tmp_path, build, quant_format, per_channel, activations="QUInt8", reduce_range=True):
    import onnx
    from onnxruntime import quantization as oq

    rng = np.random.default_rng(29)
    model, shape = build(rng)

    class Calibration(oq.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rng.standard_normal(shape).astype("float32")} for _ in range(8)])

        def get_next(self):
            return next(self.batches, None)

    src, out = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(model, src)
    oq.quantize_static(str(src), str(out), Calibration(), quant_format=getattr(oq.QuantFormat, quant_format),
                       per_channel=per_channel, reduce_range=reduce_range,
                       activation_type=getattr(oq.QuantType, activations), weight_type=oq.QuantType.QInt8)
    return onnx.load(out), rng.standard_normal(shape).astype("float32")


def _onnxruntime(model, x, optimize=True):
    """ONNX Runtime's result: its integer kernels (`optimize`), or the QDQ nodes as written, in float."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _ops(model) -> set[str]:
    """The ops of the optimised graph, those inside fused kernels too (an integer product takes its epilogue)."""
    return {m.op for n in optimize(import_model(model))[0].nodes
            for m in (n.attrs["body"].nodes if n.op == "fused" else [n])}


def _output_step(model) -> float:
    """The scale of the DequantizeLinear that makes the model's output."""
    from onnx import numpy_helper as nh

    inits = {t.name: nh.to_array(t) for t in model.graph.initializer}
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    return float(inits[last.input[1]])


@pytest.mark.parametrize("quant_format", ["QDQ", "QOperator"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_cnn_matches_onnxruntime_bit_for_bit(tmp_path, quant_format, per_channel):
    model, x = _quantized(tmp_path, _cnn, quant_format, per_channel)
    ops = _ops(model)
    # u8 convolutions with one group: the implicit-im2col GEMM over weights packed at compile time
    assert {"quantized_im2col_conv", "quantized_matmul"} <= ops and not {"conv", "gemm", "matmul"} & ops
    np.testing.assert_array_equal(tilegrad.compile(model)(x), _onnxruntime(model, x))


@pytest.mark.parametrize("quant_format", ["QDQ", "QOperator"])
def test_mlp_block_matches_onnxruntime_within_one_step(tmp_path, quant_format):
    model, x = _quantized(tmp_path, _mlp, quant_format, True)
    ops = _ops(model)
    assert "quantized_matmul" in ops and "matmul" not in ops
    got, want = tilegrad.compile(model)(x), _onnxruntime(model, x)
    step = 1 / 256  # the softmax output's scale (quantize_static: [0, 1] over uint8)
    assert np.abs(got - want).max() <= step * 1.01
    assert np.mean(got == want) > 0.9


@pytest.mark.parametrize("build,steps", [(_cnn, 4), (_mlp, 1)])
def test_s8_activations_and_8_bit_weights_keep_the_qdq_meaning(tmp_path, build, steps):
    """s8 activations (which enter the GEMM as a + 128) and full 8-bit weights. ONNX Runtime's own kernels differ
    from its QDQ graph here (they saturate int16 pairs: its optimized CNN is off by about 17 output steps), so
    the reference is the QDQ graph run as written, in float, whose float sums round where the integer ones are
    exact: each quantized tensor within one step, which the CNN's eleven quantized layers carry to a few steps at
    its output (a wrong zero point or shift moves it by tens)."""
    model, x = _quantized(tmp_path, build, "QDQ", True, activations="QInt8", reduce_range=False)
    ops = _ops(model)
    assert "quantized_matmul" in ops and not {"conv", "gemm", "matmul"} & ops
    got, want = tilegrad.compile(model)(x), _onnxruntime(model, x, optimize=False)
    assert np.abs(got - want).max() <= steps * _output_step(model) * 1.01


def test_fold_leaves_a_float_weight_product_alone():
    """A conv whose weights are float (not dequantized) is not an integer product: the pass changes nothing."""
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4), "uint8")
    dx = b.op("dequantize_linear", x, b.const(np.float32(0.1)), b.const(np.uint8(3)))
    y = b.op("conv", dx, b.const(np.ones((3, 2, 1, 1), np.float32)), strides=(1, 1), pads=(0, 0, 0, 0),
             dilations=(1, 1), group=1)
    q = b.op("quantize_linear", y, b.const(np.float32(0.2)), b.const(np.uint8(0)))
    g = b.build(q)
    assert fold_qdq(g, PassContext()).nodes == g.nodes


@pytest.mark.parametrize("dtype, zero_point", [("uint8", 3), ("int8", -5)])
def test_a_max_pool_of_a_dequantized_value_pools_the_integers_with_the_same_floats(dtype, zero_point):
    """Max commutes with the monotone dequantize; integer padding (the type's least value) never wins."""
    b = GraphBuilder()
    x = b.input("x", (1, 3, 9, 9), dtype)
    dx = b.op("dequantize_linear", x, b.const(np.float32(0.1)), b.const(np.array(zero_point, dtype)), axis=1)
    g = b.build(b.op("max_pool", dx, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dilations=[1, 1],
                     ceil_mode=0))
    folded = fold_qdq(g, PassContext())
    assert [(n.op, n.inputs[0].dtype) for n in folded.nodes] == [("max_pool", dtype), ("dequantize_linear", dtype)]
    info = np.iinfo(dtype)
    data = np.random.default_rng(0).integers(info.min, info.max, (1, 3, 9, 9), endpoint=True).astype(dtype)
    data[0, 0] = info.min  # a window of least values beside the padding
    want = run_reference(g, [data])[0]
    np.testing.assert_array_equal(compile_graph(folded)(data), want)


@pytest.mark.parametrize("alpha,trans_b", [(1.0, 1), (1.0, 0), (0.5, 1)])
def test_qgemm_matches_onnxruntime(alpha, trans_b):
    """com.microsoft.QGemm: an integer product when alpha is 1 (bit for bit), else the float Gemm of the
    dequantized operands (within one step)."""
    import onnxruntime as ort

    rng = np.random.default_rng(7)
    a = rng.integers(0, 255, (5, 24), endpoint=True).astype(np.uint8)
    w = rng.integers(-64, 63, (10, 24) if trans_b else (24, 10), endpoint=True).astype(np.int8)
    inits = [numpy_helper.from_array(v, n) for n, v in [
        ("sa", np.array(0.02, np.float32)), ("za", np.array(100, np.uint8)), ("w", w),
        ("sw", (rng.random(10) * 0.01 + 0.001).astype(np.float32)), ("zw", np.zeros(10, np.int8)),
        ("c", rng.integers(-2000, 2000, 10).astype(np.int32)), ("sy", np.array(0.05, np.float32)),
        ("zy", np.array(120, np.uint8))]]
    node = helper.make_node("QGemm", ["x", "sa", "za", "w", "sw", "zw", "c", "sy", "zy"], ["y"],
                            domain="com.microsoft", alpha=alpha, transB=trans_b)
    graph = helper.make_graph([node], "qgemm", [helper.make_tensor_value_info("x", TensorProto.UINT8, [5, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [5, 10])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": a})[0]
    got = tilegrad.compile(model)(a)
    ops = _ops(model)
    if alpha == 1.0:
        assert "quantized_matmul" in ops
        np.testing.assert_array_equal(got, want)
    else:
        assert "quantized_matmul" not in ops and np.abs(got.astype(int) - want).max() <= 1
