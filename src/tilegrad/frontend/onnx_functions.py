"""ONNX ops that tilegrad runs through ONNX's own function bodies, the definitions the ONNX schemas carry: the node
becomes the body's nodes, each converted by its own mapping, so an op whose body uses only mapped ops needs nothing
more. The two losses, GroupNormalization, RotaryEmbedding, SwiGLU, CausalConvWithState, LinearAttention and
FlexAttention (of the `ai.onnx.preview` domain) go this way, and Attention where it uses what the attention op lacks
(frontend/onnx_attention.py). The reader (`onnx.py`) imports this module, which registers them."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOpError
from .onnx_builder import OnnxBuilder as B
from .onnx_nodes import node_attributes
from .onnx_op_table import ONNX_OPS, onnx_op

FUNCTION_OPS = ("NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "GroupNormalization",
                "RotaryEmbedding", "SwiGLU", "CausalConvWithState", "LinearAttention",
                "ai.onnx.preview.FlexAttention")  # op_key: qualified outside the default domain


def _type(v):
    import onnx
    from onnx import helper

    if v is None:
        return onnx.TypeProto()
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(np.dtype(v.dtype)), list(v.shape))


def _body(b: B, node, inputs):
    """The function body of `node` at the model's opset (of the node's domain): the newest definition not newer
    than it, built for these input types when the schema's body depends on them."""
    import onnx

    opset = b.domain_versions.get(node.domain, 1) if node.domain else b.opset
    schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    given = {a.name for a in node.attribute}
    node.attribute.extend(spec.default_value for attr, spec in schema.attributes.items()
                          if attr not in given and spec.default_value.name)
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    plain = [v for v in schema.function_opset_versions if v <= opset]
    if dependent and (not plain or max(dependent) >= max(plain)):
        data = schema.get_context_dependent_function_with_opset_version(
            max(dependent), node.SerializeToString(), [_type(v).SerializeToString() for v in inputs])
    elif plain:
        data = schema.get_function_with_opset_version(max(plain))
    else:
        raise UnsupportedOpError(f"{node.op_type} at opset {opset} has no function body to expand")
    return onnx.FunctionProto.FromString(data), {a.name: a for a in node.attribute}


def _resolved(fn_node, caller_attributes):
    """`fn_node` with its attribute references (ref_attr_name) replaced by the caller's attributes."""
    import onnx

    out = onnx.NodeProto()
    out.CopyFrom(fn_node)
    del out.attribute[:]
    for a in fn_node.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name in caller_attributes:
                value = onnx.AttributeProto()
                value.CopyFrom(caller_attributes[a.ref_attr_name])
                value.name = a.name
                out.attribute.append(value)
        else:
            out.attribute.append(a)
    return out


def expand_function(b: B, name, key, inputs, attrs):
    """The outputs of the node of op `key` (`op_key`) on `inputs` with `attrs`, computed by converting its
    function body."""
    from onnx import helper

    outputs = b.node_outputs
    domain, _, op_type = key.rpartition(".")
    node = helper.make_node(op_type, [f"in{k}" if v is not None else "" for k, v in enumerate(inputs)],
                            [f"out{k}" for k in range(outputs)], domain=domain, **attrs)
    body, caller_attributes = _body(b, node, inputs)
    env = {formal: v for formal, v in zip(body.input, inputs) if v is not None}
    saved, scope = b.opset, b.scope
    b.opset = next((i.version for i in body.opset_import if i.domain in ("", "ai.onnx")), b.opset)
    try:
        for k, fn_node in enumerate(body.node):
            if fn_node.op_type not in ONNX_OPS or fn_node.domain not in ("", "ai.onnx"):
                raise UnsupportedOpError(f"{op_type} (node {name!r}): its function body uses {fn_node.op_type}, "
                                         f"which is not supported")
            b.node_outputs, b.scope = len(fn_node.output), env  # a subgraph in the body reads the body's values
            args = [env[x] if x else None for x in fn_node.input]
            attributes = node_attributes(_resolved(fn_node, caller_attributes),
                                     f"{op_type} (node {name!r}): {fn_node.op_type} of its function body")
            out = ONNX_OPS[fn_node.op_type](b, f"{name}_{k}", *args, **attributes)
            for formal, v in zip(fn_node.output, out if isinstance(out, tuple) else (out,)):
                if formal:
                    env[formal] = v
    finally:
        b.opset, b.node_outputs, b.scope = saved, outputs, scope
    results = tuple(env[formal] for formal in body.output[:outputs])
    return results if outputs > 1 else results[0]


def _via_function(key):
    return lambda b, name, *inputs, **attrs: expand_function(b, name, key, inputs, attrs)


for _key in FUNCTION_OPS:
    onnx_op(_key)(_via_function(_key))
