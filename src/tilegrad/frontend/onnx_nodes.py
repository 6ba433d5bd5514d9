"""One ONNX node converted through its mapping in ONNX_OPS: its inputs and outputs checked, its attributes read,
its schema checked, and every failure located at the node; a node with no mapping but constant inputs is evaluated
by ONNX's reference implementation instead (`onnx_fold.py`). The reader (`onnx.py`) converts a model's nodes with
it, the control flow ops (`onnx_control_flow.py`) the nodes of their subgraphs."""

from __future__ import annotations

import inspect

from ..errors import ResourceLimitError, TilegradError, UnsupportedOpError
from ..ir.graph import Value
from .onnx_builder import OnnxBuilder
from .onnx_file import ModelFormatError
from .onnx_fold import can_fold, evaluate
from .onnx_op_table import ONNX_OPS, op_key
from .onnx_schema import check_node


class UnmappedOpError(UnsupportedOpError):
    """An op with no mapping: its message is only `Op (node 'name')`, listed with the others."""


def convert_node(b: OnnxBuilder, node, name: str, values: dict) -> dict[str, Value] | None:
    """{output name: Value} of one ONNX node; None when an input is unavailable (its cause already reported)."""
    where = f"{node.op_type} (node {name!r})"
    for x in node.input:
        if x and x not in values:
            raise ModelFormatError(f"{where} reads {x!r}, which nothing defines before it")
    for y in node.output:
        if y and y in values:
            raise ModelFormatError(f"{where} defines {y!r}, which is already defined (ONNX values are assigned "
                                   f"once)")
    unavailable = any(x and values[x] is None for x in node.input)
    args = [values[x] if x else None for x in node.input]
    default_domain = node.domain in ("", "ai.onnx")
    fn = ONNX_OPS.get(op_key(node))
    foldable = not unavailable and can_fold(node, args)
    if fn is None and not foldable:
        raise UnmappedOpError(where if default_domain else f"{node.op_type} (domain {node.domain!r}, node {name!r})")
    if unavailable:
        return None
    if fn is None:
        return _fold(b, node, name, args)
    check_node(node, args, where, b.opset)
    attrs = node_attributes(node, where)
    try:
        bound = inspect.signature(fn).bind(b, name, *args, **attrs)
    except TypeError as exc:
        raise ModelFormatError(f"{where}: its {len(args)} input(s) and attributes {sorted(attrs)} do not fit "
                               f"the op: {exc}") from None
    b.node_outputs, b.scope = len(node.output), values
    try:
        out = fn(*bound.args, **bound.kwargs)
    except ResourceLimitError as exc:
        raise _located(exc, node.op_type, name) from None
    except Exception as exc:  # noqa: BLE001  (whatever a broken node makes a converter raise, said in one line)
        if foldable:  # constants tilegrad's own ops do not take (empty, negative steps...): ONNX's reference may
            try:
                return _fold(b, node, name, args)
            except TilegradError:
                pass
        if isinstance(exc, TilegradError):
            raise _located(exc, node.op_type, name) from None
        raise ModelFormatError(f"{where} cannot be converted: {type(exc).__name__}: {exc}") from exc
    outs = out if isinstance(out, tuple) else (out,)
    extra = [x for x in node.output[len(outs):] if x]
    if extra:
        raise UnsupportedOpError(f"{where} with its optional output(s) {extra}: only the first {len(outs)} "
                                 f"output(s) are supported")
    return {y: v for y, v in zip(node.output, outs) if y}


def _fold(b: OnnxBuilder, node, name: str, args) -> dict[str, Value]:
    names = [y for y in node.output if y]
    arrays = evaluate(node, args, b.opset, f"{node.op_type} (node {name!r})")
    return {y: b.const(a, y) for y, a in zip(names, arrays)}


def _located(exc: TilegradError, op_type: str, name: str) -> TilegradError:
    """`exc` with a message that names the ONNX op and node (most already name the node)."""
    text = str(exc)
    if f"node {name!r}" not in text:
        text = f"{op_type} (node {name!r}): {text}"
    elif op_type not in text:
        text = f"{op_type} {text}"
    return type(exc)(text)


def node_attributes(node, where: str) -> dict:
    """The attributes of an ONNX node as Python values (strings decoded), by name."""
    from onnx import helper

    out = {}
    for a in node.attribute:
        try:
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, list):
                v = tuple(x.decode() if isinstance(x, bytes) else x for x in v)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise ModelFormatError(f"{where}: attribute {a.name!r} cannot be read: {exc}") from None
        out[a.name] = v
    return out
