"""The com.microsoft quantized ops onnxruntime.quantization writes with QuantFormat.QOperator.

QGemm is an integer product (ir/integer_products.py) when its weights and parameters are constants, bit-exact
with ONNX Runtime. The element-wise, pooling, concatenation and softmax ops are their float op between
`dequantize_linear` and `quantize_linear`, which is what they mean; ONNX Runtime computes them from lookup tables
or float (or fixed-point) sums, so a result may differ by one quantization step where the two land on opposite
sides of a rounding tie (docs/quantization.md).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedFeatureError
from ..ir.integer_products import integer_matmul, requantized
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import ONNX_OPS, onnx_op

MS = "com.microsoft."


def _float(b: B, name: str, x, scale, zero_point):
    return ONNX_OPS["DequantizeLinear"](b, f"{name}_dq", x, scale, zero_point)


def _quantized(b: B, name: str, y, scale, zero_point):
    return ONNX_OPS["QuantizeLinear"](b, name, y, scale, zero_point)


def _binary(onnx_type: str):
    def convert(b: B, name, a, a_scale, a_zero_point, x, x_scale, x_zero_point, c_scale, c_zero_point):
        y = ONNX_OPS[onnx_type](b, f"{name}_float", _float(b, f"{name}_a", a, a_scale, a_zero_point),
                                _float(b, f"{name}_b", x, x_scale, x_zero_point))
        return _quantized(b, name, y, c_scale, c_zero_point)
    return convert


def _unary(onnx_type: str):
    def convert(b: B, name, x, x_scale, x_zero_point, y_scale, y_zero_point, **attrs):
        y = ONNX_OPS[onnx_type](b, f"{name}_float", _float(b, name, x, x_scale, x_zero_point), **attrs)
        return _quantized(b, name, y, y_scale, y_zero_point)
    return convert


onnx_op(MS + "QLinearAdd")(_binary("Add"))
onnx_op(MS + "QLinearMul")(_binary("Mul"))
onnx_op(MS + "QLinearSigmoid")(_unary("Sigmoid"))


@onnx_op(MS + "QLinearLeakyRelu")
def _leaky_relu(b: B, name, x, x_scale, x_zero_point, y_scale, y_zero_point, *, alpha=0.01):
    return _unary("LeakyRelu")(b, name, x, x_scale, x_zero_point, y_scale, y_zero_point, alpha=alpha)


@onnx_op(MS + "QLinearSoftmax")
def _softmax(b: B, name, x, x_scale, x_zero_point, y_scale, y_zero_point, *, axis=-1, opset=13):
    """`opset` says which Softmax's axis semantics apply (before 13, the inputs flattened to 2-D at `axis`)."""
    dq = _float(b, name, x, x_scale, x_zero_point)
    rank = len(x.shape)
    if opset < 13 and (axis % rank) != rank - 1:
        flat = ONNX_OPS["Flatten"](b, f"{name}_flat", dq, axis=axis)
        y = ONNX_OPS["Reshape"](b, f"{name}_unflat", ONNX_OPS["Softmax"](b, f"{name}_float", flat, axis=-1),
                                b.const(np.array(x.shape, "int64"), f"{name}_shape"))
    else:
        y = ONNX_OPS["Softmax"](b, f"{name}_float", dq, axis=axis)
    return _quantized(b, name, y, y_scale, y_zero_point)


def _channels_first(name: str, op: str, channels_last: int) -> None:
    if channels_last:
        raise UnsupportedFeatureError(f"node {name!r} (com.microsoft.{op}): channels_last=1 is not supported; "
                                      f"tilegrad pools channels-first tensors")


@onnx_op(MS + "QLinearGlobalAveragePool")
def _global_average_pool(b: B, name, x, x_scale, x_zero_point, y_scale, y_zero_point, *, channels_last=0):
    _channels_first(name, "QLinearGlobalAveragePool", channels_last)
    y = ONNX_OPS["GlobalAveragePool"](b, f"{name}_float", _float(b, name, x, x_scale, x_zero_point))
    return _quantized(b, name, y, y_scale, y_zero_point)


@onnx_op(MS + "QLinearAveragePool")
def _average_pool(b: B, name, x, x_scale, x_zero_point, y_scale, y_zero_point, *, channels_last=0, **attrs):
    _channels_first(name, "QLinearAveragePool", channels_last)
    y = ONNX_OPS["AveragePool"](b, f"{name}_float", _float(b, name, x, x_scale, x_zero_point), **attrs)
    return _quantized(b, name, y, y_scale, y_zero_point)


@onnx_op(MS + "QLinearConcat")
def _concat(b: B, name, y_scale, y_zero_point, *triples, axis):
    parts = [_float(b, f"{name}_{k}", *triples[3 * k:3 * k + 3]) for k in range(len(triples) // 3)]
    return _quantized(b, name, ONNX_OPS["Concat"](b, f"{name}_float", *parts, axis=axis), y_scale, y_zero_point)


@onnx_op(MS + "QGemm")
def _qgemm(b: B, name, a, a_scale, a_zero_point, w, b_scale, b_zero_point, c=None, y_scale=None, y_zero_point=None,
           *, alpha=1.0, transA=0, transB=0):
    """alpha * ((A - za) (B - zb) + C) with C int32 at scale a_scale * b_scale (ONNX Runtime adds C to the int32
    sums, then scales all of it); requantized when y_scale is given, else float. One quantized_matmul when B, C and the parameters are constants, A is not transposed and alpha
    is 1; otherwise the float Gemm of the dequantized operands."""
    known = [v for v in (a_scale, a_zero_point, w, b_scale, b_zero_point, c, y_scale, y_zero_point) if v is not None]
    if (y_scale is not None and alpha == 1.0 and not transA and all(v.is_constant for v in known)
            and a_zero_point is not None and a_zero_point.data.size == 1):
        wq = w.data.T if transB else w.data
        epilogue = requantized(a_scale.data, b_scale.data, y_scale.data, y_zero_point.data)
        bias = None if c is None else c.data.reshape(-1)
        fast = None if epilogue is None or (bias is not None and bias.size != wq.shape[1]) else integer_matmul(
            b, a, int(a_zero_point.data.reshape(())), wq, b_zero_point.data, bias, epilogue, name)
        if fast is not None:
            return fast
    dw = _float(b, f"{name}_b", w, b_scale, b_zero_point) if not transB else ONNX_OPS["DequantizeLinear"](
        b, f"{name}_b_dq", w, b_scale, b_zero_point, axis=0)
    product = ONNX_OPS["Gemm"](b, f"{name}_float", _float(b, f"{name}_a", a, a_scale, a_zero_point), dw,
                               None if c is None else ONNX_OPS["DequantizeLinear"](
                                   b, f"{name}_c_dq", c, b.op("mul", a_scale, b_scale, name=f"{name}_c_scale"),
                                   axis=0),
                               alpha=alpha, beta=alpha, transA=transA, transB=transB)
    return product if y_scale is None else _quantized(b, name, product, y_scale, y_zero_point)
