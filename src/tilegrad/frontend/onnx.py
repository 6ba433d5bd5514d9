"""ONNX import: a model (path, bytes or ModelProto) becomes a typed Graph over the op registry.

Each ONNX op type maps through one small function in `onnx_ops.py` (ONNX attributes are its keyword parameters,
with ONNX's defaults). Nodes whose inputs are all constants are evaluated during import, so shape
sub-computations (Shape -> Gather -> Concat -> Reshape) fold to constants when the input shapes are static; a
constant node of an op tilegrad lacks is evaluated by ONNX's reference implementation (`onnx_fold.py`).

A model is untrusted input. Each node is checked against its ONNX schema (`onnx_schema.py`: attributes, input
and output counts, element types) before it is converted, every tensor type against the size limit
(`onnx_tensors.py`), and every failure becomes a `TilegradError` that names the node, its op and the reason.
Import goes on past a failing node (skipping what depends on it), so that every unsupported op and feature of a
model is reported at once.
"""

from __future__ import annotations

import inspect
import math
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from ..errors import ResourceLimitError, ShapeError, TilegradError, UnsupportedFeatureError, UnsupportedOpError
from ..ir.graph import Graph, GraphBuilder, Value, infer_types
from ..ir.registry import lookup
from .onnx_fold import can_fold, evaluate
from .onnx_file import ModelFormatError, load_model
from .onnx_schema import check_node
from .onnx_tensors import check_constant, check_dtype, check_size, onnx_dtype, tensor_array

ONNX_OPS: dict[str, Callable] = {}


def onnx_op(*op_types: str):
    """Register the mapping of ONNX op types onto registry ops (`op_key`: outside the default domain, qualified
    by the domain)."""
    def register(fn):
        for t in op_types:
            ONNX_OPS[t] = fn
        return fn
    return register


def op_key(node) -> str:
    """The key of a node's mapping in ONNX_OPS: its op type, or `domain.OpType` outside the default domain."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


class OnnxBuilder(GraphBuilder):
    """A GraphBuilder that folds nodes whose inputs are all constants, refuses tensor types tilegrad cannot
    compile, and knows the model's opset. Its value names are unique and avoid `reserved` (the graph's output
    names, which the outputs take when the graph is built), whatever the model's node names are."""

    def __init__(self, opset: int, reserved: Iterable[str] = (), domain_versions: Mapping[str, int] | None = None):
        super().__init__()
        self.opset = opset
        self.domain_versions = dict(domain_versions or {})  # the other domains the model imports, by version
        self.node_outputs = 1  # how many outputs the ONNX node being converted declares (Split needs it)
        self.scope: Mapping[str, object] = {}  # the values visible to the node being converted (If, Loop, Scan)
        self.inlined = 0  # subgraph nodes converted so far (If, Loop, Scan), which the control flow limits
        self._taken = set(reserved)

    def _fresh(self, base: str) -> str:
        name = super()._fresh(base)
        while name in self._taken:
            name = super()._fresh(base)
        self._taken.add(name)
        return name

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Value:
        """A graph input; one with no elements stays an input of the module but is known, so the nodes read an
        empty constant in its place."""
        check_dtype(dtype, f"input {name!r}")
        check_size(shape, f"input {name!r}")
        v = super().input(name, shape, dtype)
        return self.const(np.zeros(v.shape, dtype), name) if math.prod(v.shape) == 0 else v

    def op(self, op: str, *inputs: Value, name: str | None = None, **attrs):
        where = f"node {name or op!r}"
        types = infer_types(op, [v.type for v in inputs], attrs, name or op)
        for t in types:
            check_size(t.shape, f"{where} ({op}): its output")
        if all(math.prod(t.shape) == 0 for t in types):  # nothing to compute: no node, no kernel
            values = tuple(self.const(np.zeros(t.shape, t.dtype), name or op) for t in types)
            return values[0] if len(values) == 1 else values
        if inputs and all(v.is_constant for v in inputs):
            return self._fold(op, inputs, types, name or op, attrs)
        for v in inputs:
            check_dtype(v.dtype, f"{where} ({op}): input {v.name!r}")
            if math.prod(v.shape) == 0:
                raise UnsupportedFeatureError(f"{where} ({op}) reads the empty tensor {v.name!r} (shape "
                                              f"{list(v.shape)}) together with computed ones and makes a non-empty "
                                              f"result; tilegrad computes nothing from empty tensors at run time")
        for t in types:
            check_dtype(t.dtype, f"{where} ({op}): its output")
        return super().op(op, *inputs, name=name, **attrs)

    def _fold(self, op, inputs, types, name, attrs):
        where = f"node {name!r}"
        for t in types:
            check_constant(t.shape, f"{where} ({op})")
        opdef = lookup(op)
        bound = opdef.bind_attrs(attrs, where)
        try:
            with np.errstate(all="ignore"):
                out = opdef.reference(*(v.data for v in inputs), **bound)
        except (IndexError, ValueError, TypeError, ArithmeticError) as exc:  # the data breaks the op: an index
            raise ShapeError(f"{where} ({op}) fails on its constant inputs: {type(exc).__name__}: {exc}") from None
        outs = out if isinstance(out, tuple) else (out,)
        values = tuple(self.const(np.asarray(o).astype(t.dtype).reshape(t.shape), name)
                       for o, t in zip(outs, types))
        return values[0] if len(values) == 1 else values


def constant_input(v: Value | None, what: str, node: str):
    """The data of an input that must be constant (a shape, axes, pads...), with an error that says why."""
    if v is None:
        return None
    if not v.is_constant:
        raise UnsupportedFeatureError(f"node {node!r}: {what} must be a constant (it is computed at run time); "
                                      f"tilegrad compiles static shapes; tilegrad.compile specialises them per "
                                      f"value of each graph input that reaches a shape-like operand "
                                      f"(SHAPE_OPERANDS in frontend/onnx_inputs.py)")
    if v.data.ndim > 1:
        raise ShapeError(f"node {node!r}: {what} must be a scalar or a 1-D tensor, got shape {list(v.data.shape)}")
    return v.data


class Problem(NamedTuple):
    """One reason a model does not import: the node and its op (both empty for the model as a whole), and the
    error. `unsupported_op` marks an op tilegrad has no mapping for (listed together by op type and node)."""

    node: str
    op_type: str
    error: TilegradError
    unsupported_op: bool = False


class OnnxImport(NamedTuple):
    """The graph of a model (None when it does not import) and every problem found on the way."""

    graph: Graph | None
    problems: list[Problem]


def import_onnx(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The Graph of an ONNX model; `input_shapes` fixes symbolic input dimensions. Raises one error that lists
    every problem found (the most specific error class they all share)."""
    result = read_onnx(model, input_shapes=input_shapes)
    if result.problems:
        raise import_error(result.problems)
    return result.graph


def import_error(problems: Sequence[Problem]) -> TilegradError:
    """One error for all `problems`: unsupported ops listed by type and node, then every other problem."""
    ops = [p for p in problems if p.unsupported_op]
    others = [p for p in problems if not p.unsupported_op]
    if not ops and len(others) == 1:
        return others[0].error
    parts = [f"{len(ops)} op(s) not supported: {', '.join(str(p.error) for p in ops)}"] if ops else []
    if others:
        parts.append((f"{len(others)} other problem(s): " if ops or len(others) > 1 else "")
                     + "; ".join(str(p.error) for p in others))
    classes = [type(p.error) for p in problems]
    common = next(c for c in classes[0].__mro__ if all(issubclass(k, c) for k in classes))
    return common("; ".join(parts))


def read_onnx(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None) -> OnnxImport:
    """The graph of an ONNX model and the problems that keep it from importing (then the graph is None)."""
    return _read(model, input_shapes, flatten=False)[0]


def read_onnx_flattened(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None
                        ) -> tuple[OnnxImport, tuple]:
    """`read_onnx`, with sequence and optional graph outputs laid out as tensor outputs (`onnx_boundary.py`), and
    each graph output's form: "tensor", a sequence's length, or None (an absent optional)."""
    return _read(model, input_shapes, flatten=True)


def _read(model, input_shapes, flatten: bool) -> tuple[OnnxImport, tuple]:
    from . import onnx_ops  # noqa: F401  (fills ONNX_OPS)
    from .onnx_boundary import flatten_output

    proto = load_model(model)
    problems: list[Problem] = []
    g = proto.graph
    b = OnnxBuilder(_opset(proto), {vo.name for vo in g.output} - {v.name for v in [*g.input, *g.initializer]},
                    {imp.domain: int(imp.version) for imp in proto.opset_import})
    values: dict[str, Value | None] = {}  # None: not available, for a reason already reported

    def attempt(node: str, op_type: str, fn, *args):
        try:
            return fn(*args)
        except _Unsupported as exc:
            problems.append(Problem(node, op_type, UnsupportedOpError(str(exc)), unsupported_op=True))
        except TilegradError as exc:
            problems.append(Problem(node, op_type, exc))
        return None

    for init in g.initializer:
        values[init.name] = attempt("", "", lambda t: b.const(tensor_array(t, "initializer"), t.name), init)
    shapes = dict(input_shapes or {})
    unknown = sorted(set(shapes) - {vi.name for vi in g.input if vi.name not in values})
    if unknown:
        problems.append(Problem("", "", ShapeError(f"input_shapes names {unknown}, which are not inputs of the "
                                                   f"model")))
    for vi in g.input:
        if vi.name not in values:
            values[vi.name] = attempt("", "", lambda v: b.input(v.name, *_input_type(v, shapes)), vi)
    for i, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{i}"
        outs = attempt(name, op_key(node), _convert_node, b, node, name, values)
        for y in node.output:
            if y:
                values[y] = None if outs is None else outs.get(y)
    outputs = []
    for vo in g.output:
        v = values.get(vo.name)
        if vo.name not in values:
            problems.append(Problem("", "", ShapeError(f"graph output {vo.name!r} is never computed")))
        elif v is not None and not isinstance(v, Value) and flatten:  # laid out as tensors below
            for t in flatten_output(vo.name, v)[1]:
                attempt("", "", check_dtype, t.dtype, f"an element of graph output {vo.name!r}")
        elif v is not None and not isinstance(v, Value):
            problems.append(Problem("", "", UnsupportedFeatureError(
                f"graph output {vo.name!r} is a {v.onnx_type}; a Module returns tensors only (tilegrad.compile "
                f"returns sequences and optionals through a SpecializingModule)")))
            v = None
        elif v is not None:
            attempt("", "", check_dtype, v.dtype, f"graph output {vo.name!r}")
        outputs.append(v)
    if not g.output:
        problems.append(Problem("", "", ModelFormatError("the model declares no graph outputs")))
    lost = [vo.name for vo, v in zip(g.output, outputs) if v is None]
    if lost and not problems:
        problems.append(Problem("", "", ModelFormatError(f"graph output(s) {lost} are not computed")))
    if problems:
        return OnnxImport(None, problems), ()
    forms, flat, names = [], [], []
    for vo, v in zip(g.output, outputs):
        form, tensors = flatten_output(vo.name, v)
        forms.append(form)
        flat += tensors
        names += [vo.name] if form == "tensor" else [f"{vo.name}.{k}" for k in range(len(tensors))]
    graph = attempt("", "", b.build, flat, names)
    return OnnxImport(graph, problems), tuple(forms)


class _Unsupported(UnsupportedOpError):
    """An op with no mapping: its message is only `Op (node 'name')`, listed with the others."""


def _convert_node(b: OnnxBuilder, node, name: str, values: dict) -> dict[str, Value] | None:
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
        raise _Unsupported(where if default_domain else f"{node.op_type} (domain {node.domain!r}, node {name!r})")
    if unavailable:
        return None
    if fn is None:
        return _fold(b, node, name, args)
    check_node(node, args, where, b.opset)
    attrs = _attributes(node, where)
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


def _attributes(node, where: str) -> dict:
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


def _opset(proto) -> int:
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            if imp.version < 1:
                raise ModelFormatError(f"the model imports the default ONNX domain at version {imp.version}; "
                                       f"opset versions start at 1")
            return int(imp.version)
    return 1


def _input_type(vi, input_shapes: Mapping[str, Sequence[int]]) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) of a graph input: its declared dims, with symbolic ones fixed by `input_shapes`."""
    what = f"input {vi.name!r}"
    if vi.type.WhichOneof("value") != "tensor_type":
        raise UnsupportedFeatureError(f"{what} is a {vi.type.WhichOneof('value') or 'value of no type'}; "
                                      f"tilegrad takes tensors only")
    tt = vi.type.tensor_type
    dtype = onnx_dtype(tt.elem_type, what)
    declared = list(tt.shape.dim) if tt.HasField("shape") else None
    if vi.name in input_shapes:
        shape = tuple(int(d) for d in input_shapes[vi.name])
        _check_given(vi.name, shape, declared)
        return shape, dtype
    if declared is None:
        raise ShapeError(f"{what} declares no shape; pass input_shapes={{{vi.name!r}: (...)}}")
    dims = []
    for i, d in enumerate(declared):
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise ModelFormatError(f"{what} declares the negative dimension {d.dim_value}")
            dims.append(d.dim_value)
        else:
            label = d.dim_param or "?"
            raise ShapeError(f"{what} has a symbolic dimension {label!r} (dimension {i} of {len(declared)}); pass "
                             f"input_shapes={{{vi.name!r}: (...)}} to fix it")
    return tuple(dims), dtype


def _check_given(name: str, shape: tuple[int, ...], declared) -> None:
    """A shape given in input_shapes must fit the input's declared rank and static dimensions."""
    if any(d <= 0 for d in shape):
        raise ShapeError(f"input_shapes gives input {name!r} the shape {shape}; dimensions must be positive")
    if declared is None:
        return
    if len(shape) != len(declared):
        raise ShapeError(f"input_shapes gives input {name!r} {len(shape)} dimension(s), {shape}, but the model "
                         f"declares {len(declared)}")
    for i, (n, d) in enumerate(zip(shape, declared)):
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != n:
            raise ShapeError(f"input_shapes gives input {name!r} the shape {shape}, but the model fixes its "
                             f"dimension {i} to {d.dim_value}")
