"""Sequence and optional graph inputs and outputs, as tensors: what a specialisation of such a model imports.

The runtime moves tensors only. A call fixes each sequence input's length and each optional input's presence (its
*form*: "tensor", a sequence's length, or None for an absent optional), so `expose_inputs` rewrites the model for those
forms: a sequence input `x` of length n becomes the tensor inputs `x.0` ... `x.{n-1}` joined by a SequenceConstruct
(SequenceEmpty when n is 0), a present optional an Optional node over its tensor (`x.value`) or its sequence, and an
absent one an Optional node with no input. The import (`import_flattened` in `onnx.py`) then resolves sequences and
optionals as inside any graph (`onnx_sequences.py`); `flatten_output` lays a structured graph output out as tensors,
with its form, which the runtime uses to give back lists and None (`runtime/structured.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import UnsupportedFeatureError
from ..ir.graph import Value

TENSOR = "tensor"


def value_kind(tp, where: str) -> tuple[str, object]:
    """(kind, tensor TypeProto) of an ONNX TypeProto: a tensor, a sequence of tensors or an optional of either;
    the tensor type is the element's for a sequence."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return TENSOR, tp.tensor_type
    if which == "sequence_type" and tp.sequence_type.elem_type.WhichOneof("value") == "tensor_type":
        return "sequence", tp.sequence_type.elem_type.tensor_type
    if which == "optional_type":
        inner, tensor = value_kind(tp.optional_type.elem_type, where)
        if inner in (TENSOR, "sequence"):
            return f"optional({inner})", tensor
    raise UnsupportedFeatureError(f"{where} is a {_spelling(tp)}; tilegrad takes tensors, sequences of tensors "
                                  f"and optionals of either")


def expose_inputs(proto, parts: Mapping[str, Sequence[str] | None]):
    """A copy of `proto` whose structured inputs, named in `parts`, are tensor inputs: a sequence's elements or a
    present optional's tensors by the names given, None for an absent optional (see the module doc); the nodes
    that rebuild them come first."""
    from onnx import ModelProto, helper

    out = ModelProto()
    out.CopyFrom(proto)
    inputs, nodes = [], []
    for vi in out.graph.input:
        if vi.name not in parts:
            inputs.append(vi)
            continue
        kind, tensor = value_kind(vi.type, f"input {vi.name!r}")
        name, names = vi.name, parts[vi.name]
        if names is None:
            nodes.append(helper.make_node("Optional", [], [name], name=f"{name}.absent",
                                          type=vi.type.optional_type.elem_type))
            continue
        for part in names:
            t = helper.make_tensor_type_proto(tensor.elem_type, None)
            if tensor.HasField("shape"):
                t.tensor_type.shape.CopyFrom(tensor.shape)
            inputs.append(helper.make_value_info(part, t))
        content = name if kind == "sequence" else f"{name}.content"
        if kind == "optional(tensor)":
            content = names[0]
        elif names:
            nodes.append(helper.make_node("SequenceConstruct", list(names), [content], name=f"{name}.construct"))
        else:
            nodes.append(helper.make_node("SequenceEmpty", [], [content], name=f"{name}.construct",
                                          dtype=tensor.elem_type))
        if kind.startswith("optional"):
            nodes.append(helper.make_node("Optional", [content], [name], name=f"{name}.present"))
    del out.graph.input[:]
    out.graph.input.extend(inputs)
    body = list(out.graph.node)
    del out.graph.node[:]
    out.graph.node.extend(nodes + body)
    return out


def flatten_output(name: str, v) -> tuple[object, list[Value]]:
    """(form, tensors) of a graph output's value: a tensor, a sequence's items, an optional's content or none."""
    from .onnx_sequences import OptionalValue, TensorSequence

    if isinstance(v, OptionalValue):
        v = v.value
        if v is None:
            return None, []
    if isinstance(v, TensorSequence):
        return len(v.items), list(v.items)
    if isinstance(v, Value):
        return TENSOR, [v]
    raise UnsupportedFeatureError(f"graph output {name!r} is a {getattr(v, 'onnx_type', type(v).__name__)}")


def _spelling(tp) -> str:
    which = tp.WhichOneof("value")
    if which == "sequence_type":
        return f"sequence of {_spelling(tp.sequence_type.elem_type)}"
    if which == "optional_type":
        return f"optional of {_spelling(tp.optional_type.elem_type)}"
    return (which or "value of no type").removesuffix("_type").replace("_", " ")


def structured_outputs(proto) -> list[str]:
    """The graph outputs declared as sequences or optionals."""
    return [vo.name for vo in proto.graph.output if vo.type.WhichOneof("value") in ("sequence_type", "optional_type")]
