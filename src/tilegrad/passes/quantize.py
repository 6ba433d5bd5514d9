"""The QDQ fold: DequantizeLinear -> Conv / MatMul / Gemm (+ bias, + Relu or Clip) -> QuantizeLinear, as
onnxruntime.quantization writes it with QuantFormat.QDQ, becomes one integer product (`quantized_im2col_conv`,
`quantized_conv2d`, `quantized_matmul`: ir/integer_products.py) reading the u8/s8 activation, with the weights
quantized, centred and packed now and the requantization and activation in its epilogue. It is what ONNX Runtime's QDQ transformers do
when they make QLinearConv and QLinearMatMul, and the integer outputs equal theirs.

It runs before constant folding (first in the pipeline): the weights' DequantizeLinear nodes read
constants, and folding would leave float weights without their integers. The import has already folded every
other constant, so the scales and zero points the fold needs are constants here.

A MaxPool of a dequantized value pools the integers before the dequantize (exact: max commutes with the monotone
map). What it leaves in float, as dequantize -> op -> quantize: Add,
GlobalAveragePool, Concat and the rest (ONNX Runtime's QLinearAdd and QLinearGlobalAveragePool compute in float
too; the results agree within one quantization step, where a float sum lands on a different side of a tie).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.integer_products import integer_conv2d, integer_matmul, requantized
from .editor import GraphEditor, map_nodes
from .context import PassContext

PRODUCTS = ("conv", "matmul", "gemm")


def fold_qdq(g: Graph, ctx: PassContext) -> Graph:
    """Turn dequantize -> conv/matmul/gemm (-> relu/clip) -> quantize into one integer kernel with int32 sums."""
    producers, readers = g.producers(), g.consumers()
    outputs = {id(v) for v in g.outputs}

    def only_reader(v: Value, node: Node) -> bool:
        return readers.get(id(v)) == [node] and id(v) not in outputs

    def fold(ed: GraphEditor, q: Node):
        if q.op != "quantize_linear":
            return None
        source, clip = q.inputs[0], None
        act = producers.get(id(source))
        if act is not None and act.op in ("relu", "clip") and only_reader(source, q):
            clip = (0.0, math.inf) if act.op == "relu" else (act.attrs["min"], act.attrs["max"])
            source = act.inputs[0]
            reader = act
        else:
            reader = q
        product = producers.get(id(source))
        if product is None or product.op not in PRODUCTS or not only_reader(source, reader):
            return None
        folded = _fold_product(ed, product, ed.inputs_of(q), clip, producers, q.name)
        if folded is not None:
            ctx.note(f"folded {product.name} ({product.op}) and {q.name} into one integer product")
        return folded

    folded = map_nodes(g, fold)
    producers = folded.producers()
    return map_nodes(folded, lambda ed, node: _pool_before_dequantize(ed, node, producers))


def _pool_before_dequantize(ed: GraphEditor, node: Node, producers: dict):
    """max_pool(dequantize(q)) as dequantize(max_pool(q)) for a per-tensor positive scale: the map is monotone, so
    the two are the same floats, and the pool reads and writes a quarter of the bytes (its producer, an integer
    convolution, then writes bytes too). Integer padding (the type's least value) never wins either: every window
    holds an input element (the window's type rule refuses one wholly in the padding)."""
    if node.op != "max_pool":
        return None
    found = _dequantized(node.inputs[0], producers, False)
    if found is None or np.shape(found[1]) != () or not float(found[1]) > 0 or found[0].dtype not in ("uint8", "int8"):
        return None
    dq = producers[id(node.inputs[0])]
    pooled = ed.op("max_pool", ed.get(found[0]), name=f"{node.name}_q", **node.attrs)
    return ed.op("dequantize_linear", pooled, *(ed.get(v) for v in dq.inputs[1:]), name=node.name, **dq.attrs)


def _dequantized(v: Value, producers: dict, constant: bool):
    """(q, scale, zero_point, axis) of a dequantize_linear output whose scale and zero point are constants (and
    q too, if `constant`), else None."""
    dq = producers.get(id(v))
    if dq is None or dq.op != "dequantize_linear":
        return None
    q, scale, zero_point = dq.inputs
    if not (scale.is_constant and zero_point.is_constant) or (constant and not q.is_constant):
        return None
    return q, scale.data, zero_point.data, dq.attrs["axis"]


def _fold_product(ed: GraphEditor, product: Node, q_inputs, clip, producers, name):
    """The integer product's output for `product` quantized by (scale, zero point) `q_inputs`, or None."""
    _, y_scale, y_zero_point = q_inputs
    if not (y_scale.is_constant and y_zero_point.is_constant) or y_scale.shape != ():
        return None
    x, w, *bias = product.inputs
    act, weight = _dequantized(x, producers, False), _dequantized(w, producers, True)
    if act is None or weight is None or act[1].shape != ():
        return None
    xq, sx, zx, _ = act
    wq, sw, zw, w_axis = weight
    w_data = wq.data
    if product.op == "conv":
        channel_axis = 0
    else:
        if not _plain_product(product, wq):
            return None
        if product.op == "gemm" and product.attrs["trans_b"]:
            w_data, w_axis = w_data.T, 1 - w_axis
        channel_axis = 1
    channels = w_data.shape[channel_axis]
    if sw.shape and w_axis != channel_axis:
        return None
    epilogue = requantized(sx, sw, y_scale.data, y_zero_point.data, clip)
    int_bias = _int_bias(bias[0], sx, sw, channels, producers) if bias else None
    if epilogue is None or (bias and int_bias is None):
        return None
    xq = ed.get(xq)
    if product.op == "conv":
        attrs = product.attrs
        if len(xq.shape) != 4:
            return None
        return integer_conv2d(ed, xq, int(zx), w_data, zw, int_bias, epilogue, name, strides=attrs["strides"],
                              pads=attrs["pads"], dilations=attrs["dilations"], group=attrs["group"])
    return integer_matmul(ed, xq, int(zx), w_data, zw, int_bias, epilogue, name)


def _plain_product(product: Node, wq: Value) -> bool:
    """A matmul or gemm by a 2-D weight with nothing but a bias around it (no transposed a, alpha, beta)."""
    if len(wq.shape) != 2:
        return False
    if product.op == "gemm":
        attrs = product.attrs
        return attrs["alpha"] == 1.0 and attrs["beta"] == 1.0 and not attrs["trans_a"]
    return True


def _int_bias(bias: Value, sx, sw, channels: int, producers: dict) -> np.ndarray | None:
    """The bias in the int32 units of the product (scale sx * sw): its integers where it is dequantized from
    int32 at exactly that scale (what quantize_static writes), else a float constant rounded to them."""
    scale = (np.float32(sx) * np.asarray(sw, np.float32)).astype(np.float32)
    dq = _dequantized(bias, producers, True)
    if dq is not None and dq[0].dtype == "int32" and not np.any(dq[2]) and np.array_equal(
            np.broadcast_to(dq[1], (channels,)), np.broadcast_to(scale, (channels,))):
        data = dq[0].data
    elif bias.is_constant and bias.dtype == "float32":
        data = np.rint(bias.data / scale)
    else:
        return None
    if data.size not in (1, channels) or np.abs(data).max(initial=0) > np.iinfo(np.int32).max:
        return None
    return np.broadcast_to(data.reshape(-1), (channels,)).astype(np.int32)
