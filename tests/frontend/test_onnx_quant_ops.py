"""ONNX's quantization ops against ONNX Runtime (`onnx_cases` in conftest): per tensor and per axis, negative
values, ties that round half to even, saturation, and QDQ and QOperator models written by
onnxruntime.quantization.quantize_static.

ONNX Runtime's uint8 x int8 products on AVX2 without VNNI (vpmaddubsw) saturate pairs of products at int16, so its
integer ops are compared on int8 weights within [-64, 63], where no pair saturates; int32 sums over the full
ranges, and forms ONNX Runtime and ONNX's reference lack (per-row zero points and scales of a), are compared with
NumPy's int64 sums; blocked scales and int32 inputs with ONNX's reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tilegrad
from tilegrad.errors import ShapeError, UnsupportedFeatureError

from .conftest import cases_model

_rng = np.random.default_rng(29)
U8, I8, U16, I16, I32, F32 = (TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16,
                              TensorProto.INT32, TensorProto.FLOAT)


def _f32(*values):
    return np.array(values, "float32")


def _ints(dtype, *shape):
    info = np.iinfo(dtype)
    return _rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _weights(*shape):
    """int8 weights that no uint8 x int8 pair can saturate in ONNX Runtime's AVX2 kernels."""
    return _rng.integers(-64, 63, shape, dtype="int8", endpoint=True)


def _ties(scale):
    """Every k / 2 times `scale` for k in -9..9, so x / scale lands exactly on each half (scale a power of 2)."""
    return (np.arange(-9, 10, dtype="float32") * 0.5 * scale).astype("float32")


def test_quantize_per_tensor_rounds_half_to_even_and_saturates(onnx_cases):
    x = np.concatenate([_ties(0.25), _f32(-1e6, 1e6, 40.0, -40.0, 63.9, -64.1), _rng.standard_normal(20, "float32")])
    scale = np.array(0.25, "float32")
    onnx_cases([
        {"op": "QuantizeLinear", "inputs": [x, scale, np.array(3, "uint8")], "out_types": (U8,)},
        {"op": "QuantizeLinear", "inputs": [x, scale, np.array(-5, "int8")], "out_types": (I8,)},
        {"op": "QuantizeLinear", "inputs": [x, scale], "out_types": (U8,)},  # no zero point: uint8 from 0
        {"op": "QuantizeLinear", "inputs": [x * 300, scale, np.array(-7, "int16")], "out_types": (I16,)},
        {"op": "QuantizeLinear", "inputs": [x * 300, scale, np.array(9, "uint16")], "out_types": (U16,)},
        {"op": "QuantizeLinear", "inputs": [x, scale, np.array(3, "uint8")], "out_types": (U8,), "consts": (1, 2)},
    ], opset=21, atol=0)


def test_quantize_and_dequantize_per_axis(onnx_cases):
    x = (_rng.standard_normal((2, 3, 4)) * 4).astype("float32")
    scales3, scales4 = _f32(0.5, 0.03, 0.25), _f32(0.1, 0.2, 0.125, 0.07)
    zps3 = np.array([-3, 0, 17], "int8")
    q = _ints("uint8", 2, 3, 4)
    onnx_cases([
        {"op": "QuantizeLinear", "inputs": [x, scales3, zps3], "out_types": (I8,)},  # axis 1 by default
        {"op": "QuantizeLinear", "inputs": [x, scales4, np.array([1, 200, 0, 128], "uint8")], "attrs": {"axis": -1},
         "out_types": (U8,)},
        {"op": "QuantizeLinear", "inputs": [x, scales3, zps3], "consts": (1, 2), "out_types": (I8,)},
        {"op": "DequantizeLinear", "inputs": [q, scales4, np.array([1, 200, 0, 128], "uint8")],
         "attrs": {"axis": 2}, "out_types": (F32,)},
        {"op": "DequantizeLinear", "inputs": [_ints("int8", 2, 3, 4), scales3, zps3], "out_types": (F32,)},
        {"op": "DequantizeLinear", "inputs": [q, np.array(0.02, "float32")], "out_types": (F32,)},  # no zero point
        {"op": "DequantizeLinear", "inputs": [_ints("int32", 2, 3, 4) // 4, scales3], "out_types": (F32,)},
        {"op": "DequantizeLinear", "inputs": [_ints("int16", 2, 3, 4), scales3, np.array([-9, 0, 300], "int16")],
         "out_types": (F32,)},
    ], opset=21, rtol=1e-6, atol=0)


def _reference_matches(case, opset=21):
    """One case compiled by tilegrad gives what ONNX's reference implementation computes."""
    model, feeds = cases_model([case], opset)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = tilegrad.compile(model)(*feeds.values())
    got = got if isinstance(got, list) else [got]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_blocked_quantize_and_dequantize_match_onnx_reference():
    x = (_rng.standard_normal((3, 10)) * 3).astype("float32")
    scale = (_rng.random((3, 4)) * 0.1 + 0.01).astype("float32")  # blocks of 3 along axis 1, the last one short
    zp = _ints("int8", 3, 4)
    _reference_matches({"op": "QuantizeLinear", "inputs": [x, scale, zp], "attrs": {"axis": 1, "block_size": 3},
                        "out_types": (I8,)})
    _reference_matches({"op": "DequantizeLinear", "inputs": [_ints("int8", 3, 10), scale, zp],
                        "attrs": {"axis": 1, "block_size": 3}, "out_types": (F32,)})
    _reference_matches({"op": "QuantizeLinear", "inputs": [x.T.copy(), scale.T.copy(), zp.T.copy()],
                        "attrs": {"axis": 0, "block_size": 3}, "consts": (1, 2), "out_types": (I8,)})


def test_quantize_int32_input_matches_onnx_reference():
    """QuantizeLinear-13 also takes int32 x (ONNX Runtime does not): odd x / 2 are ties."""
    x = np.array([-300, -7, -5, -3, -1, 0, 1, 3, 5, 7, 1000], "int32")
    _reference_matches({"op": "QuantizeLinear", "inputs": [x, np.array(2.0, "float32"), np.array(3, "int8")],
                        "out_types": (I8,)}, opset=13)


@pytest.mark.parametrize("x", [
    pytest.param(np.array([[-2.5, 0.0, 3.1], [7.9, -0.3, 1.0]], "float32"), id="mixed"),
    pytest.param(np.array([[0.5, 2.0, 3.25]], "float32"), id="positive"),
    pytest.param(np.array([[-0.5, -2.0, -3.25]], "float32"), id="negative"),
    pytest.param(np.zeros((2, 2), "float32"), id="zeros"),
])
def test_dynamic_quantize_linear(onnx_cases, x):
    onnx_cases([{"op": "DynamicQuantizeLinear", "inputs": [x], "out_types": (U8, F32, U8)}], opset=11, atol=0)


def test_matmul_integer(onnx_cases):
    onnx_cases([
        {"op": "MatMulInteger", "inputs": [_ints("uint8", 3, 40), _weights(40, 5)], "out_types": (I32,)},
        {"op": "MatMulInteger", "inputs": [_ints("uint8", 3, 40), _weights(40, 5), np.array(131, "uint8"),
                                           np.array([-3, 0, 5, 60, -64], "int8")], "out_types": (I32,)},
        {"op": "MatMulInteger", "inputs": [_ints("uint8", 2, 4, 6), _ints("uint8", 6, 3), np.array(2, "uint8"),
                                           np.array(9, "uint8")], "out_types": (I32,)},
    ], opset=21, atol=0)


def _numpy_matches(model, feeds, want):
    got = tilegrad.compile(model)(*feeds.values())
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_matmul_integer_sums_exactly_in_int32():
    """K = 2048 products of 255 * 127 sum to about 6.6e7, past float32's exact integers (2**24); zero points per
    row of a and per column of b."""
    a, w = np.full((3, 2048), 255, "uint8"), _ints("int8", 2048, 5)
    a[1], w[:, 0] = _ints("uint8", 2048), 127
    a_zp, w_zp = np.array([0, 7, 255], "uint8"), np.array([-128, 0, 3, 127, -1], "int8")
    model, feeds = cases_model([{"op": "MatMulInteger", "inputs": [a, w, a_zp, w_zp], "out_types": (I32,)}], 21)
    wide = np.int64
    _numpy_matches(model, feeds, (a.astype(wide) - a_zp[:, None]) @ (w.astype(wide) - w_zp))


def test_conv_integer(onnx_cases):
    x, w = _ints("uint8", 1, 3, 7, 6), _weights(4, 3, 3, 3)
    onnx_cases([
        {"op": "ConvInteger", "inputs": [x, w, np.array(131, "uint8")], "attrs": {"pads": [1, 1, 1, 1]},
         "out_types": (I32,)},
        {"op": "ConvInteger", "inputs": [x, w, np.array(7, "uint8"), np.array(-3, "int8")],
         "attrs": {"strides": [2, 1], "pads": [0, 1, 2, 0]}, "out_types": (I32,)},
        {"op": "ConvInteger", "inputs": [_ints("uint8", 1, 4, 5, 5), _ints("uint8", 4, 2, 2, 2)],
         "attrs": {"group": 2, "auto_pad": "SAME_UPPER"}, "out_types": (I32,)},
    ], opset=21, atol=0)
    _reference_matches({"op": "ConvInteger", "inputs": [x, _ints("int8", 4, 3, 3, 3), np.array(200, "uint8"),
                                                        np.array([-4, 0, 3, 100], "int8")],
                        "attrs": {"pads": [1, 1, 1, 1]}, "out_types": (I32,)})


def test_qlinear_matmul(onnx_cases):
    a, w = _ints("uint8", 2, 5, 16), _weights(16, 6)
    s = np.array
    onnx_cases([
        {"op": "QLinearMatMul", "inputs": [a, s(0.02, "float32"), s(120, "uint8"), w, s(0.01, "float32"),
                                           s(0, "int8"), s(0.05, "float32"), s(128, "uint8")], "out_types": (U8,)},
        {"op": "QLinearMatMul", "inputs": [a, s(0.02, "float32"), s(120, "uint8"), w,
                                           (_rng.random(6) * 0.02 + 0.001).astype("float32"), np.zeros(6, "int8"),
                                           s(0.03, "float32"), s(10, "uint8")], "out_types": (U8,), "consts": (4, 5)},
        {"op": "QLinearMatMul", "inputs": [_ints("int8", 3, 8), s(0.5, "float32"), s(3, "int8"), _weights(8, 2),
                                           s(0.25, "float32"), s(-1, "int8"), s(8.0, "float32"), s(0, "int8")],
         "out_types": (I8,)},  # multipliers of powers of 2: many sums land on ties
    ], opset=21, atol=0)


def test_qlinear_matmul_per_row_scales_against_numpy():
    """a's scale and zero point per row (which neither ONNX Runtime nor ONNX's reference takes), batched."""
    a, w = _ints("uint8", 2, 3, 8), _weights(8, 4)
    a_scale, a_zp = _f32(0.02, 0.03, 0.01), np.array([1, 200, 3], "uint8")
    inputs = [a, a_scale, a_zp, w, np.array(0.05, "float32"), np.array(-2, "int8"), np.array(0.1, "float32"),
              np.array(128, "uint8")]
    model, feeds = cases_model([{"op": "QLinearMatMul", "inputs": inputs, "out_types": (U8,)}], 21)
    acc = (a.astype(np.int64) - a_zp[:, None]) @ (w.astype(np.int64) + 2)
    multiplier = (a_scale[:, None] * np.float32(0.05) / np.float32(0.1)).astype("float32")
    want = np.clip(np.rint(acc.astype("float32") * multiplier) + 128, 0, 255).astype("uint8")
    np.testing.assert_array_equal(tilegrad.compile(model)(*feeds.values()), want)


def test_qlinear_conv_with_bias_and_per_channel_weights(onnx_cases):
    x = _ints("uint8", 1, 4, 6, 6)
    s = np.array
    onnx_cases([
        {"op": "QLinearConv", "inputs": [x, s(0.03, "float32"), s(127, "uint8"), _weights(6, 2, 3, 3),
                                         (_rng.random(6) * 0.02 + 0.002).astype("float32"), np.zeros(6, "int8"),
                                         s(0.1, "float32"), s(100, "uint8"), _ints("int32", 6) // 65536],
         "attrs": {"pads": [1, 1, 1, 1], "group": 2, "strides": [1, 2]}, "out_types": (U8,), "consts": (4, 5, 8)},
        {"op": "QLinearConv", "inputs": [x, s(0.03, "float32"), s(127, "uint8"), _ints("uint8", 3, 4, 1, 1),
                                         s(0.01, "float32"), s(9, "uint8"), s(0.02, "float32"), s(0, "uint8")],
         "out_types": (U8,)},
    ], opset=21, atol=0)


def test_unsupported_forms_are_named():
    x = np.ones((2, 3), "float32")
    model, _ = cases_model([{"op": "QuantizeLinear", "inputs": [x, np.array(0.1, "float32")],
                             "attrs": {"output_dtype": I32}, "out_types": (I32,)}], 21)
    with pytest.raises(UnsupportedFeatureError, match="int32"):
        tilegrad.compile(model)
    model, _ = cases_model([{"op": "DequantizeLinear", "inputs": [_ints("int8", 2, 3), _f32(0.1, 0.2)],
                             "attrs": {"axis": 1}, "out_types": (F32,)}], 21)
    with pytest.raises(ShapeError, match="vector of 3"):
        tilegrad.compile(model)
    model, _ = cases_model([{"op": "ConvInteger", "inputs": [_ints("uint8", 1, 2, 3, 3), _ints("int8", 1, 2, 1, 1),
                                                              np.array([1, 2], "uint8")], "out_types": (I32,)}], 21)
    with pytest.raises(ShapeError, match="x_zero_point must be one value"):
        tilegrad.compile(model)


def _float_model():
    """Conv -> Relu -> Reshape -> MatMul, with float weights, for quantize_static."""
    conv_w = helper.make_tensor("conv_w", F32, [4, 3, 3, 3], _rng.standard_normal(108).astype("float32") * 0.3)
    conv_b = helper.make_tensor("conv_b", F32, [4], _rng.standard_normal(4).astype("float32") * 0.1)
    fc_w = helper.make_tensor("fc_w", F32, [64, 5], _rng.standard_normal(320).astype("float32") * 0.2)
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 64])
    nodes = [helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Reshape", ["r", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "fc_w"], ["y"])]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", F32, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", F32, [1, 5])], [conv_w, conv_b, fc_w, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _quantize_static(tmp_path, quant_format, per_channel):
    """The float model quantized by ONNX Runtime on random calibration data (weights reduced to 7 bits, so that
    ONNX Runtime's AVX2 kernels cannot saturate)."""
    import onnx
    from onnxruntime import quantization as oq

    class Calibration(oq.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": _rng.standard_normal((1, 3, 8, 8)).astype("float32")} for _ in range(8)])

        def get_next(self):
            return next(self.batches, None)

    src, out = tmp_path / "float.onnx", tmp_path / "quantized.onnx"
    onnx.save(_float_model(), src)
    oq.quantize_static(str(src), str(out), Calibration(), quant_format=quant_format, per_channel=per_channel,
                    reduce_range=True, activation_type=oq.QuantType.QUInt8, weight_type=oq.QuantType.QInt8)
    return onnx.load(out)


def _ort_run(model, x, optimize: bool):
    import onnxruntime as ort

    options = ort.SessionOptions()
    if not optimize:  # the QDQ nodes as written, not fused into ONNX Runtime's integer kernels
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("per_channel", [False, True])
def test_qdq_model_from_quantize_static_matches_onnxruntime(tmp_path, per_channel):
    from onnxruntime.quantization import QuantFormat

    model = _quantize_static(tmp_path, QuantFormat.QDQ, per_channel)
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in model.graph.node}
    x = _rng.standard_normal((1, 3, 8, 8)).astype("float32")
    got = tilegrad.compile(model)(x)
    np.testing.assert_allclose(got, _ort_run(model, x, optimize=False), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got, _ort_run(model, x, optimize=True), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("per_channel", [False, True])
def test_qoperator_model_from_quantize_static_matches_onnxruntime(tmp_path, per_channel):
    from onnxruntime.quantization import QuantFormat

    model = _quantize_static(tmp_path, QuantFormat.QOperator, per_channel)
    assert {"QLinearConv", "QLinearMatMul"} <= {n.op_type for n in model.graph.node}
    x = _rng.standard_normal((1, 3, 8, 8)).astype("float32")
    np.testing.assert_allclose(tilegrad.compile(model)(x), _ort_run(model, x, optimize=True), rtol=1e-6, atol=1e-7)


def test_half_precision_inputs(onnx_cases):
    x = np.concatenate([_ties(0.25), (_rng.standard_normal(12) * 40)]).astype("float16")
    onnx_cases([
        {"op": "QuantizeLinear", "inputs": [x, np.array(0.25, "float16"), np.array(-3, "int8")], "out_types": (I8,)},
        {"op": "DequantizeLinear", "inputs": [_ints("int8", 4, 3), np.array(0.0123, "float16"), np.array(2, "int8")],
         "out_types": (TensorProto.FLOAT16,)},
    ], opset=21, rtol=1e-3, atol=0)
