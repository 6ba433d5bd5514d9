"""What an ONNX model's inputs leave open until it is called: symbolic dimensions, and value inputs.

tilegrad compiles static shapes, so a model is compiled once per distinct set of input shapes (its
specialisations, `runtime/specializing.py`). A *value input* is a graph input whose value, not only its shape,
decides shapes or other compile-time facts: its data reaches a shape-like operand of a node (a Reshape's shape,
Tile's repeats, Squeeze's axes, TopK's k, ...; `SHAPE_OPERANDS`) through data flow that does not pass Shape or
Size (those read only the shape, which is already known). Each distinct value of a value input compiles once, as
an initializer the import folds. Inputs of any dtype can be value inputs (Resize's scales and Range's bounds
are floats; an If's condition and a Loop's trip count decide which nodes exist).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections import ChainMap
from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np

from ..errors import ShapeError
from ..te.dims import dimension
from .onnx_boundary import TENSOR, value_kind
from .onnx_tensors import onnx_dtype

_REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")

# ONNX op type -> the positions of its operands that the frontend needs as constants (after folding)
SHAPE_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Slice": (1, 2, 3, 4),
    "Pad": (1, 2, 3), "TopK": (1,), "Trilu": (1,), "Range": (0, 1, 2), "OneHot": (1,),
    "Resize": (1, 2, 3), "Upsample": (1,), "Split": (1,), "ConstantOfShape": (0,), "CumSum": (1,),
    "Dropout": (1, 2), "If": (0,), "Loop": (0, 1), "BlackmanWindow": (0,), "HammingWindow": (0,), "HannWindow": (0,),
    "CumProd": (1,), "CenterCropPad": (1,), "Col2Im": (1, 2), "AffineGrid": (1,), "MaxUnpool": (2,),
    "DFT": (1, 2), "STFT": (1, 2, 3), "LSTM": (4,), "GRU": (4,), "RNN": (4,),
    "SequenceAt": (1,), "SequenceInsert": (2,), "SequenceErase": (1,), "SplitToSequence": (1,),
    **{op: (1,) for op in _REDUCTIONS},
}
_SHAPE_READERS = ("Shape", "Size")  # their outputs depend on their input's shape only


@dataclasses.dataclass(frozen=True)
class ModelInput:
    """A graph input as the model declares it: `dims` holds ints (static) and names (symbolic; "?" unnamed), or
    is None when no shape is declared; `shape_uses` names the operands its value reaches (empty: none)."""

    name: str
    dtype: str
    dims: tuple[int | str, ...] | None
    shape_uses: tuple[str, ...] = ()
    kind: str = TENSOR  # or "sequence", "optional(tensor)", "optional(sequence)"; dtype and dims: its tensors'

    @property
    def value_needed(self) -> bool:
        return bool(self.shape_uses)

    @property
    def symbolic(self) -> bool:
        return self.dims is None or any(isinstance(d, str) for d in self.dims)

    def describe(self) -> str:
        """`x float32[N, 3, 224, 224]` (`x sequence of float32[n, 3]`), symbolic dimensions by name."""
        kind = {TENSOR: "", "sequence": "sequence of ", "optional(tensor)": "optional ",
                "optional(sequence)": "optional sequence of "}[self.kind]
        return f"{self.name} {kind}{self.dtype}[{'?' if self.dims is None else ', '.join(map(str, self.dims))}]"


def model_inputs(proto, input_shapes: Mapping[str, Sequence[int]] | None = None) -> tuple[ModelInput, ...]:
    """The graph inputs of `proto` (initializers excluded), their dims fixed by `input_shapes` where given."""
    shapes = dict(input_shapes or {})
    g = proto.graph
    initializers = {t.name for t in g.initializer}
    graph_inputs = [vi for vi in g.input if vi.name not in initializers]
    unknown = sorted(set(shapes) - {vi.name for vi in graph_inputs})
    if unknown:
        raise ShapeError(f"input_shapes names {unknown}, which are not inputs of the model")
    uses = _value_uses(proto, {vi.name for vi in graph_inputs})
    out = []
    for vi in graph_inputs:
        kind, tensor = value_kind(vi.type, f"input {vi.name!r}")
        dtype = onnx_dtype(tensor.elem_type, f"input {vi.name!r}")
        dims = _declared_dims(tensor)
        if vi.name in shapes:
            dims = _fixed(vi.name, shapes[vi.name], dims)
        empty = dims is not None and 0 in dims  # its value is known: no elements
        out.append(ModelInput(vi.name, dtype, dims, () if empty else tuple(uses.get(vi.name, ())), kind))
    return tuple(out)


def is_dynamic(inputs: Sequence[ModelInput]) -> bool:
    """True when the inputs leave shapes open: a symbolic dimension, a value input, or a sequence or optional
    (whose length or presence each call gives)."""
    return any(i.symbolic or i.value_needed or i.kind != TENSOR for i in inputs)


def specialize(proto, values: Mapping[str, np.ndarray]):
    """A copy of `proto` whose value inputs are initializers holding `values`, so the import folds them."""
    from onnx import ModelProto, numpy_helper

    out = ModelProto()
    out.CopyFrom(proto)
    kept = [vi for vi in out.graph.input if vi.name not in values]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    out.graph.initializer.extend(numpy_helper.from_array(np.asarray(a), name) for name, a in values.items())
    return out


def _value_uses(proto, names: set[str]) -> dict[str, list[str]]:
    """{graph input: the shape-like operands its value reaches}, by one walk over the nodes in order."""
    uses: dict[str, list[str]] = {}
    _walk(proto.graph, {n: frozenset([n]) for n in names}, uses, "")
    return uses


def _walk(graph, sources: MutableMapping[str, frozenset[str]], uses: dict[str, list[str]], prefix: str) -> None:
    """Follow the values of `sources` through the nodes of `graph` into `uses`. A subgraph (If's branches, a Loop
    or Scan body) reads the names of the graphs around it, so its shape-like operands count, and what its outputs
    carry flows out of its node."""
    for i, node in enumerate(graph.node):
        where = f"{prefix}{node.op_type} (node {node.name or f'{node.op_type}_{i}'!r})"
        default_domain = node.domain in ("", "ai.onnx")
        for k in SHAPE_OPERANDS.get(node.op_type, ()) if default_domain else ():
            if k < len(node.input):
                for src in sorted(sources.get(node.input[k], ())):
                    uses.setdefault(src, []).append(f"{where} input {k}")
        flowing = frozenset() if default_domain and node.op_type in _SHAPE_READERS else \
            frozenset().union(*(sources.get(x, frozenset()) for x in node.input))
        for attr, body in ((a.name, a.g) for a in node.attribute if a.HasField("g")):
            inner = ChainMap({formal.name: flowing for formal in body.input}, sources)
            _walk(body, inner, uses, f"{where} {attr}: ")
            flowing = flowing.union(*(inner.get(vo.name, frozenset()) for vo in body.output))
        for y in node.output:
            if y:
                sources[y] = flowing


def declared_dim(d) -> int | str:
    """One declared dimension: its size, or its name where it is symbolic ("?" unnamed). A negative `dim_value` is
    symbolic, as ONNX Runtime reads it (older exporters, paddle2onnx among them, write a dynamic batch as -1); a
    zero is a real empty dimension."""
    if d.HasField("dim_value") and d.dim_value >= 0:
        return d.dim_value
    return d.dim_param or "?"


def dimension_axes(inputs: Sequence[ModelInput]) -> dict[str, tuple[str | None, ...]] | None:
    """Per input, the name of the symbolic dimension each axis is (None where the axis is static), as
    `dynamic=` names them; None where an input is not a tensor of declared rank or is a value input (its values,
    not dimensions, decide shapes)."""
    if any(i.kind != TENSOR or i.value_needed or i.dims is None for i in inputs):
        return None
    return {i.name: tuple(d if isinstance(d, str) else None for d in _named_dims(i)) for i in inputs}


def _named_dims(i: ModelInput) -> tuple[int | str, ...] | None:
    """The input's dimensions, an unnamed symbolic one named by the input and its axis (`x[0]`)."""
    if i.dims is None:
        return None
    return tuple(f"{i.name}[{axis}]" if d == "?" else d for axis, d in enumerate(i.dims))


def _declared_dims(tt) -> tuple[int | str, ...] | None:
    if not tt.HasField("shape"):
        return None
    return tuple(declared_dim(d) for d in tt.shape.dim)


def _fixed(name: str, given: Sequence, declared: tuple[int | str, ...] | None) -> tuple[int, ...]:
    """The shape `given` by input_shapes, checked: whole numbers, the declared rank and static dimensions."""
    if not all(isinstance(d, numbers.Integral) and d >= 0 for d in given):
        raise ShapeError(f"input_shapes gives input {name!r} the shape {list(given)}: it fixes every dimension to a "
                         f"whole number; a dimension that varies keeps its name in the model, bounded by dynamic=")
    shape = tuple(int(d) for d in given)
    if declared is not None and len(shape) != len(declared):
        raise ShapeError(f"input_shapes gives input {name!r} {len(shape)} dimension(s), {shape}, but the model "
                         f"declares {len(declared)}")
    for i, (n, d) in enumerate(zip(shape, declared or ())):
        if isinstance(d, int) and d != n:
            raise ShapeError(f"input_shapes gives input {name!r} the shape {shape}, but the model fixes its "
                             f"dimension {i} to {d}")
    return shape


def symbolic_shapes(inputs: Sequence[ModelInput], dynamic: Mapping[str, tuple[int, int]]) -> dict[str, tuple]:
    """Each input's shape with the dimensions `dynamic` names (dim_params, with their bounds) as variables
    (`te/dims.dimension`), or fixed where it gives a size; a symbolic dimension it does not name, an unknown name,
    or an input that is not a tensor of declared shape is a ShapeError saying what to give. A dimension the model
    leaves unnamed (no dim_param, or a negative dim_value) is named by its input and axis, `x[0]`."""
    named = {i.name: _named_dims(i) for i in inputs}
    declared = {d for dims in named.values() if dims is not None for d in dims if isinstance(d, str)}
    unknown = sorted(set(dynamic) - declared)
    if unknown:
        raise ShapeError(f"dynamic names {unknown}, which no input declares as a dimension; the model's symbolic "
                         f"dimensions are {sorted(declared) or 'none'}")
    variables: dict = {}
    for name, bounds in dynamic.items():
        if type(bounds) is int and bounds >= 1:
            variables[name] = bounds  # fixed
        elif isinstance(bounds, (tuple, list)) and len(bounds) == 2 and all(type(b) is int for b in bounds):
            variables[name] = dimension(name, *bounds)
        else:
            raise ShapeError(f"dynamic gives dimension {name!r} {bounds!r}; expected bounds (lo, hi) or a size, "
                             f"positive ints")
    out, open_inputs = {}, []
    for i in inputs:
        if i.kind != TENSOR or i.value_needed or i.dims is None:
            open_inputs.append(i.describe())
            continue
        dims = named[i.name]
        left = [d for d in dims if isinstance(d, str) and d not in variables]
        if left:
            open_inputs.append(f"{i.describe()} (name {', '.join(map(repr, left))})")
        elif i.symbolic:
            out[i.name] = tuple(variables[d] if isinstance(d, str) else d for d in dims)
    if open_inputs:
        raise ShapeError(f"compiling with dynamic dimensions needs every input to be a tensor whose symbolic "
                         f"dimensions are named in dynamic= or fixed by input_shapes; not so: {'; '.join(open_inputs)}")
    return out
