"""An ONNX node checked against its op's schema before its mapping runs, as ONNX Runtime checks it when it loads
a model: the attributes' names and kinds, the required ones, the counts of inputs and outputs, and the element
type of each input against the op's type constraints. A broken or hostile node is refused here with a message
that names it, instead of failing somewhere inside its conversion."""

from __future__ import annotations

from .onnx_file import ModelFormatError

# The ONNX type name of each element type tilegrad holds (NumPy name -> the `tensor(...)` spelling of schemas).
_ONNX_TYPE = {"float32": "float", "float64": "double", "float16": "float16", "bfloat16": "bfloat16", "int8": "int8",
              "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16",
              "uint32": "uint32", "uint64": "uint64", "bool": "bool"}


def tensor_type(dtype: str) -> str:
    """The ONNX spelling of a tensor of `dtype` (`tensor(float)`), as schemas' type constraints write it."""
    return f"tensor({_ONNX_TYPE.get(dtype, dtype)})"


def check_node(node, inputs, where: str, opset: int) -> None:
    """Refuse `node` (with its input Values, None where absent) when it breaks its schema at `opset`; a node of
    an op ONNX does not define is left to its mapping."""
    from onnx import defs

    domain = "" if node.domain == "ai.onnx" else node.domain
    try:
        schema = defs.get_schema(node.op_type, opset, domain)
    except defs.SchemaError:
        try:  # an op newer than the model's opset: checked against its latest version
            schema = defs.get_schema(node.op_type, domain)
        except defs.SchemaError:
            return
    _check_attributes(node, schema, where)
    for kind, count, least, most in (("inputs", len(node.input), schema.min_input, schema.max_input),
                                     ("outputs", len(node.output), schema.min_output, schema.max_output)):
        if not least <= count <= most:
            raise ModelFormatError(f"{where} has {count} {kind}; {node.op_type} takes {least} to {most}")
    _check_types(node, schema, inputs, where)


def _check_attributes(node, schema, where: str) -> None:
    from onnx import AttributeProto

    for a in node.attribute:
        spec = schema.attributes.get(a.name)
        if spec is None:
            raise ModelFormatError(f"{where} has attribute {a.name!r}, which {node.op_type} does not take; it "
                                   f"takes {', '.join(sorted(schema.attributes)) or 'none'}")
        if a.type != int(spec.type):
            kinds = AttributeProto.AttributeType
            got = kinds.Name(a.type) if a.type in kinds.values() else f"of unknown kind {a.type}"
            raise ModelFormatError(f"{where}: attribute {a.name!r} is {got}, but {node.op_type} takes "
                                   f"{spec.type.name}")
    given = {a.name for a in node.attribute}
    missing = sorted(n for n, spec in schema.attributes.items() if spec.required and n not in given)
    if missing:
        raise ModelFormatError(f"{where} lacks the required attribute(s) {missing}")


def _check_types(node, schema, inputs, where: str) -> None:
    """Each input's element type must be one its formal parameter allows, and inputs that share a type
    parameter (the T of Add's A and B) must share a type."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    formals = list(schema.inputs)
    bound: dict[str, tuple[int, str]] = {}
    for i, v in enumerate(inputs):
        if not formals:
            return
        formal = formals[min(i, len(formals) - 1)]
        if v is None:
            if formal.option != formal.option.Optional:
                raise ModelFormatError(f"{where}: input {i} ({formal.name}) is required, but the node leaves it out")
            continue
        got = getattr(v, "onnx_type", None) or tensor_type(v.dtype)
        ok = allowed.get(formal.type_str, {formal.type_str})
        if got not in ok:
            raise ModelFormatError(f"{where}: input {i} ({node.input[i]!r}) is {got}, but {node.op_type} takes "
                                   f"{', '.join(sorted(ok))} there")
        if formal.type_str in allowed and (i < len(formals) - 1 or formal.is_homogeneous):
            first, seen = bound.setdefault(formal.type_str, (i, got))
            if seen != got:
                raise ModelFormatError(f"{where}: input {i} ({node.input[i]!r}) is {got}, but input {first} is "
                                       f"{seen}; {node.op_type} takes one type for both")
