"""ONNX import: a model (path, bytes or ModelProto) becomes a typed Graph over the op registry.

Each ONNX op type maps through one small function (ONNX attributes are its keyword parameters, with ONNX's
defaults) in an op family (`onnx_ops.py`, `onnx_*_ops.py`, `onnx_resize.py`, ...), which registers it in the op
table (`onnx_op_table.py`); this module imports the families and converts each node through `onnx_nodes.py`. Nodes
whose inputs are all constants are evaluated during import, so shape sub-computations (Shape -> Gather -> Concat ->
Reshape) fold to constants when the input shapes are static; a constant node of an op tilegrad lacks is evaluated
by ONNX's reference implementation (`onnx_fold.py`).

A model is untrusted input. Each node is checked against its ONNX schema (`onnx_schema.py`: attributes, input
and output counts, element types) before it is converted, every tensor type against the size limit
(`onnx_tensors.py`), and every failure becomes a `TilegradError` that names the node, its op and the reason.
Import goes on past a failing node (skipping what depends on it), so that every unsupported op and feature of a
model is reported at once.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

from ..errors import ShapeError, TilegradError, UnsupportedFeatureError, UnsupportedOpError
from ..ir.graph import Graph, Value
from ..te import expr as E
# The op families: importing them fills ONNX_OPS (`onnx_op_table.py`) with their mappings. They import the table
# and helper modules, never this reader.
from . import (  # noqa: F401  (register the mappings)
    onnx_attention,
    onnx_composite_ops,
    onnx_control_flow,
    onnx_data_ops,
    onnx_functions,
    onnx_image_ops,
    onnx_index_ops,
    onnx_norm_outputs,
    onnx_ops,
    onnx_padding,
    onnx_qoperator_ops,
    onnx_quant_ops,
    onnx_recurrent,
    onnx_resize,
    onnx_sequences,
    onnx_signal_ops,
)
from .onnx_boundary import flatten_output
from .onnx_builder import OnnxBuilder
from .onnx_file import ModelFormatError, load_model
from .onnx_inputs import declared_dim
from .onnx_model_checks import check_declared_type, check_model
from .onnx_nodes import UnmappedOpError, convert_node
from .onnx_op_table import op_key
from .onnx_tensors import check_dtype, onnx_dtype, tensor_array


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


def import_flattened(proto, input_shapes: Mapping[str, Sequence[int]]):
    """(Graph, form of each graph output) of a model whose inputs are tensors (`expose_inputs` in onnx_boundary.py),
    its sequence and optional outputs laid out as tensors; raises one error listing every problem, as `import_onnx`
    does."""
    result, forms = read_onnx_flattened(proto, input_shapes=input_shapes)
    if result.problems:
        raise import_error(result.problems)
    return result.graph, forms


def _read(model, input_shapes, flatten: bool) -> tuple[OnnxImport, tuple]:
    proto = load_model(model)
    check_model(proto)
    problems: list[Problem] = []
    g = proto.graph
    b = OnnxBuilder(_opset(proto), {vo.name for vo in g.output} - {v.name for v in [*g.input, *g.initializer]},
                    {imp.domain: int(imp.version) for imp in proto.opset_import})
    values: dict[str, Value | None] = {}  # None: not available, for a reason already reported

    def attempt(node: str, op_type: str, fn, *args):
        try:
            return fn(*args)
        except UnmappedOpError as exc:
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
        outs = attempt(name, op_key(node), convert_node, b, node, name, values)
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
            attempt("", "", check_declared_type, vo, v.dtype)
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
        shape = tuple(d if isinstance(d, E.Var) else int(d) for d in input_shapes[vi.name])
        _check_given(vi.name, shape, declared)
        return shape, dtype
    if declared is None:
        raise ShapeError(f"{what} declares no shape; pass input_shapes={{{vi.name!r}: (...)}}")
    dims = [declared_dim(d) for d in declared]
    for i, d in enumerate(dims):
        if isinstance(d, str):
            raise ShapeError(f"{what} has a symbolic dimension {d!r} (dimension {i} of {len(declared)}); pass "
                             f"input_shapes={{{vi.name!r}: (...)}} to fix it")
    return tuple(dims), dtype


def _check_given(name: str, shape: tuple[int, ...], declared) -> None:
    """A shape given in input_shapes must fit the input's declared rank and static dimensions."""
    if any(not isinstance(d, E.Var) and d <= 0 for d in shape):
        raise ShapeError(f"input_shapes gives input {name!r} the shape {shape}; dimensions must be positive")
    if declared is None:
        return
    if len(shape) != len(declared):
        raise ShapeError(f"input_shapes gives input {name!r} {len(shape)} dimension(s), {shape}, but the model "
                         f"declares {len(declared)}")
    for i, (n, d) in enumerate(zip(shape, declared)):
        if d.HasField("dim_value") and d.dim_value > 0 and not isinstance(n, E.Var) and d.dim_value != n:
            raise ShapeError(f"input_shapes gives input {name!r} the shape {shape}, but the model fixes its "
                             f"dimension {i} to {d.dim_value}")
