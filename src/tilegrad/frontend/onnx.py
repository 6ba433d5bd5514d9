"""ONNX import: a model (path, bytes or ModelProto) becomes a typed Graph over the op registry.

Each ONNX op type maps through one small function in `onnx_ops.py` (ONNX attributes are its keyword parameters,
with ONNX's defaults). Every unsupported op is reported at once, by type and node name. Nodes whose inputs are all
constants are evaluated during import, so shape sub-computations (Shape -> Gather -> Concat -> Reshape) fold to
constants when the input shapes are static.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import ShapeError, TilegradError, UnsupportedFeatureError, UnsupportedOpError
from ..ir.graph import Graph, GraphBuilder, Value
from ..ir.registry import lookup

ONNX_OPS: dict[str, Callable] = {}


class ModelFormatError(TilegradError):
    """A file or buffer that is not a readable ONNX model."""


def onnx_op(*op_types: str):
    """Register the mapping of ONNX op types onto registry ops."""
    def register(fn):
        for t in op_types:
            ONNX_OPS[t] = fn
        return fn
    return register


class OnnxBuilder(GraphBuilder):
    """A GraphBuilder that folds nodes whose inputs are all constants, and knows the model's opset."""

    def __init__(self, opset: int):
        super().__init__()
        self.opset = opset
        self.node_outputs = 1  # how many outputs the ONNX node being converted declares (Split needs it)

    def op(self, op: str, *inputs: Value, name: str | None = None, **attrs):
        if inputs and all(v.is_constant for v in inputs):
            opdef = lookup(op)
            bound = opdef.bind_attrs(attrs, f"node {name or op!r}")
            with np.errstate(all="ignore"):
                out = opdef.reference(*(v.data for v in inputs), **bound)
            outs = out if isinstance(out, tuple) else (out,)
            values = tuple(self.const(np.asarray(o), name or op) for o in outs)
            return values[0] if len(values) == 1 else values
        return super().op(op, *inputs, name=name, **attrs)


def constant_input(v: Value | None, what: str, node: str):
    """The data of an input that must be constant (a shape, axes, pads...), with an error that says why."""
    if v is None:
        return None
    if not v.is_constant:
        raise UnsupportedFeatureError(f"node {node!r}: {what} must be a constant (it is computed at run time); "
                                      f"tilegrad compiles static shapes")
    return v.data


def load_model(model):
    """A ModelProto from a path, bytes or a ModelProto, with clear errors for anything unreadable."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, Path)):
        path = Path(model)
        if not path.is_file():
            raise ModelFormatError(f"no ONNX file at {path}")
        data = path.read_bytes()
        where = str(path)
    elif isinstance(model, (bytes, bytearray)):
        data, where = bytes(model), "the given bytes"
    else:
        raise ModelFormatError(f"expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    try:
        proto = onnx.ModelProto.FromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelFormatError(f"{where} is not a valid ONNX model (truncated or corrupt?): {exc}") from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelFormatError(f"{where} holds no ONNX graph (empty or not an ONNX file)")
    return proto


def _opset(proto) -> int:
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def _attributes(node) -> dict:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list):
            v = tuple(x.decode() if isinstance(x, bytes) else x for x in v)
        out[a.name] = v
    return out


def _input_type(vi, input_shapes: Mapping[str, Sequence[int]]) -> tuple[tuple[int, ...], str]:
    from onnx import helper

    tt = vi.type.tensor_type
    dtype = str(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    if vi.name in input_shapes:
        return tuple(int(d) for d in input_shapes[vi.name]), dtype
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            if d.dim_value <= 0:
                raise UnsupportedFeatureError(f"input {vi.name!r} has a dimension of size {d.dim_value}; empty "
                                              f"tensors are not supported")
            dims.append(d.dim_value)
        else:
            label = d.dim_param or "?"
            raise ShapeError(f"input {vi.name!r} has a symbolic dimension {label!r}; pass "
                             f"input_shapes={{{vi.name!r}: (...)}} to fix it")
    return tuple(dims), dtype


def import_onnx(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The Graph of an ONNX model; `input_shapes` fixes symbolic input dimensions."""
    from onnx import numpy_helper

    from . import onnx_ops  # noqa: F401  (fills ONNX_OPS)

    proto = load_model(model)
    g = proto.graph
    unsupported = [f"{n.op_type} (node {n.name!r})" for n in g.node
                   if n.op_type not in ONNX_OPS or n.domain not in ("", "ai.onnx")]
    if unsupported:
        raise UnsupportedOpError(f"{len(unsupported)} op(s) not supported: {', '.join(unsupported)}")
    input_shapes = dict(input_shapes or {})
    b = OnnxBuilder(_opset(proto))
    values: dict[str, Value] = {}
    for init in g.initializer:
        values[init.name] = b.const(numpy_helper.to_array(init), init.name)
    for vi in g.input:
        if vi.name not in values:
            shape, dtype = _input_type(vi, input_shapes)
            values[vi.name] = b.input(vi.name, shape, dtype)
    unknown = set(input_shapes) - {vi.name for vi in g.input}
    if unknown:
        raise ShapeError(f"input_shapes names {sorted(unknown)}, which are not inputs of the model")
    for i, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{i}"
        try:
            args = [values[x] if x else None for x in node.input]
        except KeyError as exc:
            raise ShapeError(f"node {name!r} reads {exc.args[0]!r}, which nothing defines") from None
        b.node_outputs = len(node.output)
        out = ONNX_OPS[node.op_type](b, name, *args, **_attributes(node))
        outs = out if isinstance(out, tuple) else (out,)
        extra = [x for x in node.output[len(outs):] if x]
        if extra:
            raise UnsupportedOpError(f"{node.op_type} (node {name!r}) with its optional output(s) {extra}: only "
                                     f"the first {len(outs)} output(s) are supported")
        for onnx_name, v in zip(node.output, outs):
            if onnx_name:
                values[onnx_name] = v
    outputs = []
    for vo in g.output:
        if vo.name not in values:
            raise ShapeError(f"graph output {vo.name!r} is never computed")
        outputs.append(values[vo.name])
    return b.build(outputs, names=[vo.name for vo in g.output])
