"""Writing a QDQ ONNX model, as onnxruntime.quantization does with QuantFormat.QDQ: weights stored as int8 with a
DequantizeLinear (per channel along their output axis), biases as int32 with scale s_x * s_w, and each
activation that enters or leaves a quantized op (Conv, MatMul, Gemm, an Add of two activations, pooling) passed
through a QuantizeLinear -> DequantizeLinear pair. An op's output followed only by Relu or Clip is quantized after the
activation, which an integer kernel fuses. The pass that folds these pairs into integer kernels reads this form."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import TilegradError
from .scheme import QParams

QUANTIZED_OPS = ("Conv", "MatMul", "Gemm", "Add", "MaxPool", "AveragePool", "GlobalAveragePool")
WEIGHTED_OPS = ("Conv", "MatMul", "Gemm")
FUSED_ACTIVATIONS = ("Relu", "Clip")
MIN_OPSET = 13  # per-axis DequantizeLinear
INT32_MAX = 2**31 - 1


class Plan(NamedTuple):
    """What quantizing a model touches."""

    activations: list[str]  # tensors that get a QuantizeLinear -> DequantizeLinear pair
    weights: dict[str, int | None]  # weight initializer -> its output-channel axis (None: one scale)
    layers: list[onnx.NodeProto]  # the weighted nodes (Conv, Gemm, MatMul by a weight)


def opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def plan(model: onnx.ModelProto, per_channel: bool) -> Plan:
    """The activations and weights of `model` to quantize."""
    if opset(model) < MIN_OPSET:
        raise TilegradError(f"quantizing needs ONNX opset {MIN_OPSET} or later (per-axis DequantizeLinear); "
                            f"the model imports opset {opset(model)}: export it again with a later opset")
    g = model.graph
    init = {t.name: t for t in g.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    outputs = {o.name for o in g.output}
    constants = set(init) | {o for n in g.node if n.op_type == "Constant" for o in n.output}
    activations: list[str] = []
    weights: dict[str, int | None] = {}
    layers = []

    def add(t: str) -> None:
        if t and t not in init and t not in activations:
            activations.append(t)

    for n in g.node:
        if n.op_type not in QUANTIZED_OPS or _adds_constant(n, constants):
            continue
        axis = _weight_axis(n, init)
        if axis is False and n.op_type in WEIGHTED_OPS:
            continue  # a product of two activations: see `_weight_axis`
        if axis is not False:
            weights.setdefault(n.input[1], axis if per_channel else None)
            layers.append(n)
        for k, i in enumerate(n.input):
            if not (axis is not False and k >= 1):
                add(i)
        out = n.output[0]
        after = consumers.get(out, [])
        if out not in outputs and len(after) == 1 and after[0].op_type in FUSED_ACTIVATIONS:
            out = after[0].output[0]
        add(out)
    return Plan(activations, weights, layers)


def _adds_constant(n: onnx.NodeProto, constants: set[str]) -> bool:
    """An Add of a constant (a bias, GELU's 1 + erf, a normalisation's epsilon) has no integer form worth its
    rounding: quantized, it put two more QDQ pairs into each GELU (five roundings to uint8 inside one product's
    epilogue), costing accuracy and time. It stays in float, inside whatever kernel its neighbours fuse into."""
    return n.op_type == "Add" and any(i in constants for i in n.input)


def _weight_axis(n: onnx.NodeProto, init: dict) -> int | None | bool:
    """The output-channel axis of `n`'s weight (input 1) when it is an initializer; False when `n` has none.

    A Conv, Gemm or MatMul with no constant weight (attention's Q K^T and P V) is not quantized: the integer
    kernels multiply by constant packed weights (ir/integer_products.py), so its QDQ pairs would only add
    roundings and kernels around a float product, and keep the attention chain from becoming one kernel
    (passes/attention.py)."""
    if n.op_type not in WEIGHTED_OPS or len(n.input) < 2 or n.input[1] not in init:
        return False
    rank = len(init[n.input[1]].dims)
    if n.op_type == "Conv":
        return 0
    if n.op_type == "Gemm":
        trans_b = next((a.i for a in n.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return rank - 1 if rank >= 2 else None


def bias_of(n: onnx.NodeProto) -> str | None:
    """The bias initializer input of a Conv or Gemm (None for MatMul, or when absent)."""
    return n.input[2] if n.op_type in ("Conv", "Gemm") and len(n.input) > 2 and n.input[2] else None


class Rewrite(NamedTuple):
    """A QDQ model and, for each tensor of the float model, the name that holds its float value in it."""

    model: onnx.ModelProto
    float_name: dict[str, str]


def write(model: onnx.ModelProto, weights: dict[str, tuple[np.ndarray, QParams]], activations: dict[str, QParams],
          layers: list[onnx.NodeProto]) -> Rewrite:
    """`model` with each weight in `weights` (its integers and parameters) stored behind a DequantizeLinear, each activation in
    `activations` through a QuantizeLinear -> DequantizeLinear pair, and each bias of `layers` whose input and
    weight are both quantized stored as int32 (unless its scale s_x * s_w is too small for int32 to hold it)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    init = {t.name: t for t in g.initializer}
    new_init: list[onnx.TensorProto] = []
    head: list[onnx.NodeProto] = []
    renamed = {}  # produced activations: their producer now writes `t/float`, the DequantizeLinear writes `t`

    def dequantized(name: str, q: np.ndarray, p: QParams, node: str) -> None:
        new_init.extend([numpy_helper.from_array(q, f"{name}/quantized"),
                         numpy_helper.from_array(np.asarray(p.scale, np.float32), f"{name}/scale"),
                         numpy_helper.from_array(np.asarray(p.zero_point), f"{name}/zero_point")])
        head.append(_dequantize(f"{name}/quantized", name, f"{name}/dequantized", p.axis, node))

    weight_dq = {}
    for w, (q, p) in weights.items():
        dequantized(w, q, p, f"{w}/DequantizeLinear")
        weight_dq[w] = f"{w}/dequantized"
    by_output = {n.output[0]: n for n in g.node}
    for n in (by_output[layer.output[0]] for layer in layers):  # this model's nodes: biases may be replaced
        b = bias_of(n)
        if b is None or n.input[0] not in activations or n.input[1] not in weights or b not in init:
            continue
        scale = (np.asarray(activations[n.input[0]].scale, np.float64)
                 * np.asarray(weights[n.input[1]][1].scale, np.float64)).astype(np.float32)
        bias = numpy_helper.to_array(init[b])
        scale = np.broadcast_to(scale, bias.shape).copy()
        q = np.rint(bias.astype(np.float64) / scale)
        if not np.all(np.abs(q) <= INT32_MAX):  # tiny input scales: such a bias stays float
            continue
        q = q.astype(np.int32)
        p = QParams(scale, np.zeros(scale.shape, np.int32), "int32", 0 if scale.ndim else None)
        dequantized(f"{b}@{n.output[0]}", q, p, f"{b}@{n.output[0]}/DequantizeLinear")
        weight_dq[(n.output[0], b)] = f"{b}@{n.output[0]}/dequantized"

    produced = {o for n in g.node for o in n.output}
    for t in activations:
        if t in produced:
            renamed[t] = f"{t}/float"
    pairs = {t: _pair(renamed.get(t, t), t if t in renamed else f"{t}/dequantized", p, new_init)
             for t, p in activations.items()}
    entry = [node for t, pair in pairs.items() if t not in renamed for node in pair]
    nodes = []
    for n in g.node:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        for k, i in enumerate(m.input):
            if (n.output[0], i) in weight_dq and k == 2:
                m.input[k] = weight_dq[(n.output[0], i)]
            elif i in weight_dq and k == 1:
                m.input[k] = weight_dq[i]
            elif i in activations and i not in renamed:
                m.input[k] = f"{i}/dequantized"
        for k, o in enumerate(m.output):
            m.output[k] = renamed.get(o, o)
        nodes.append(m)
        nodes.extend(node for o in n.output if o in renamed for node in pairs[o])
    del g.node[:]
    g.node.extend(head + entry + nodes)
    g.initializer.extend(new_init)
    _drop_unused(g)
    float_name = {t: renamed.get(t, t) for t in produced}
    return Rewrite(out, float_name)


def _pair(source: str, target: str, p: QParams, new_init: list) -> list[onnx.NodeProto]:
    base = target.removesuffix("/dequantized")
    new_init.extend([numpy_helper.from_array(np.asarray(p.scale, np.float32), f"{base}/scale"),
                     numpy_helper.from_array(np.asarray(p.zero_point), f"{base}/zero_point")])
    return [onnx.helper.make_node("QuantizeLinear", [source, f"{base}/scale", f"{base}/zero_point"],
                                  [f"{base}/quantized"], name=f"{base}/QuantizeLinear"),
            _dequantize(f"{base}/quantized", base, target, None, f"{base}/DequantizeLinear")]


def _dequantize(q: str, base: str, target: str, axis: int | None, name: str) -> onnx.NodeProto:
    extra = {} if axis is None else {"axis": axis}
    return onnx.helper.make_node("DequantizeLinear", [q, f"{base}/scale", f"{base}/zero_point"], [target],
                                 name=name, **extra)


def _drop_unused(g: onnx.GraphProto) -> None:
    """Remove the float initializers that quantized copies replaced."""
    used = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used]
    dropped = {t.name for t in g.initializer} - {t.name for t in keep}
    del g.initializer[:]
    g.initializer.extend(keep)
    listed = [i for i in g.input if i.name not in dropped]
    del g.input[:]
    g.input.extend(listed)
