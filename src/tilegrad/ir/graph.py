"""Graph IR: values with tensor types, nodes applying registered ops, and graphs in topological order.

Values and nodes are immutable and compared by identity (two nodes that compute the same thing are still two
nodes until a pass merges them). A `GraphBuilder` runs each op's type rule as nodes are added, so a graph is typed
by construction and a mismatch names the node and the shapes at the point it happens. `str(g)` prints a graph
one line per node (`format_graph`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from ..te.dims import dim, symbolic_ints
from .registry import TensorType, lookup


@dataclasses.dataclass(frozen=True, eq=False)
class Value:
    """A tensor flowing through the graph: a graph input, a constant (`data` set), or a node's output."""

    name: str
    type: TensorType
    data: np.ndarray | None = None
    origin: "Derivation | None" = None  # how a constant was computed ahead of time from another, where known

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclasses.dataclass(frozen=True, eq=False)
class Derivation:
    """A constant that is `op(source, **attrs)`, computed ahead of time (a weight laid out for its kernel). Kept so
    that a saved module can store the source where it is smaller and compute the constant again on load."""

    op: str
    source: Value
    attrs: dict


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    name: str
    op: str
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    attrs: dict


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """Inputs, outputs and nodes in topological order; constants are the inputs of nodes that carry `data`."""

    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    nodes: tuple[Node, ...]

    @property
    def constants(self) -> list[Value]:
        seen: dict[int, Value] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v.is_constant:
                    seen.setdefault(id(v), v)
        return list(seen.values())

    def producers(self) -> dict[int, Node]:
        """id(value) -> the node that produces it."""
        return {id(v): n for n in self.nodes for v in n.outputs}

    def consumers(self) -> dict[int, list[Node]]:
        """id(value) -> the nodes that read it, in order."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                out.setdefault(id(v), []).append(n)
        return out

    def verify(self) -> None:
        """Check that every value is defined before use and that every node's types follow its op's rule."""
        defined = {id(v) for v in self.inputs} | {id(c) for c in self.constants}
        names: set[str] = set()
        for n in self.nodes:
            for v in n.inputs:
                if id(v) not in defined:
                    raise ShapeError(f"node {n.name!r} ({n.op}) reads {v.name!r} before it is defined")
            want = infer_types(n.op, [v.type for v in n.inputs], n.attrs, n.name)
            got = [v.type for v in n.outputs]
            if want != got:
                raise ShapeError(f"node {n.name!r} ({n.op}): outputs typed {_types(got)} but the op gives "
                                 f"{_types(want)}")
            for v in n.outputs:
                if v.name in names:
                    raise ShapeError(f"value name {v.name!r} is defined twice (again by node {n.name!r})")
                names.add(v.name)
                defined.add(id(v))
        for v in self.outputs:
            if id(v) not in defined and not v.is_constant:
                raise ShapeError(f"graph output {v.name!r} is never computed")

    def __str__(self) -> str:
        return format_graph(self)


def _types(types: Sequence[TensorType]) -> str:
    return ", ".join(str(t) for t in types)


def infer_types(op: str, types: Sequence[TensorType], attrs: dict, where: str) -> list[TensorType]:
    """The output types of `op` applied to inputs of `types`; errors name the node and the input shapes."""
    opdef = lookup(op)
    opdef.check_arity(len(types), f"node {where!r}")
    bound = opdef.bind_attrs(attrs, f"node {where!r}")
    try:
        return list(opdef.infer(*types, **bound))
    except ShapeError as exc:  # an UnsupportedFeatureError stays one: a known op used in a way not compiled
        kind = UnsupportedFeatureError if isinstance(exc, UnsupportedFeatureError) else ShapeError
        raise kind(f"node {where!r} ({op}) with inputs {_types(types)}: {exc}") from None


class GraphBuilder:
    """Adds typed nodes in order; `build` returns the graph."""

    def __init__(self):
        self._inputs: list[Value] = []
        self._nodes: list[Node] = []
        self._names: dict[str, int] = {}  # base -> how many names were made from it
        self._given: set[str] = set()

    def _fresh(self, base: str) -> str:
        """`base`, or `base_N` with the first N that no earlier name took (`x_3` may be a name of its own)."""
        n = self._names.get(base, 0)
        name = base if n == 0 else f"{base}_{n}"
        while name in self._given:
            n += 1
            name = f"{base}_{n}"
        self._names[base] = n + 1
        self._given.add(name)
        return name

    def input(self, name: str, shape: Sequence[int], dtype: str = "float32") -> Value:
        v = Value(self._fresh(name), TensorType(tuple(dim(d) for d in shape), dtype))
        self._inputs.append(v)
        return v

    def const(self, data, name: str = "const") -> Value:
        """A constant; an array of integers some of which are expressions of dynamic dimensions (a Shape's result,
        `te/dims.py`) is an int64 constant whose data holds them as objects."""
        arr = np.asarray(data)
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would also turn a scalar into shape (1,))
            arr = arr.copy(order="C")
        if arr.dtype == object:
            arr = symbolic_ints(arr)
            if arr.dtype != object:
                return self.const(arr, name)
            return Value(self._fresh(name), TensorType(arr.shape, "int64"), arr)
        return Value(self._fresh(name), TensorType(arr.shape, str(arr.dtype)), arr)

    def op(self, op: str, *inputs: Value, name: str | None = None, **attrs) -> Value | tuple[Value, ...]:
        """Add a node; returns its output (or outputs, for an op with several)."""
        node_name = self._fresh(name or op)
        types = infer_types(op, [v.type for v in inputs], attrs, node_name)
        bound = lookup(op).bind_attrs(attrs, f"node {node_name!r}")
        outs = tuple(Value(node_name if len(types) == 1 else self._fresh(f"{node_name}_out"), t) for t in types)
        self._nodes.append(Node(node_name, op, tuple(inputs), outs, bound))
        return outs[0] if len(outs) == 1 else outs

    def build(self, outputs: Value | Sequence[Value], names: Sequence[str] | None = None) -> Graph:
        """The graph; `names` renames the outputs (a frontend keeps the model's output names)."""
        outs = (outputs,) if isinstance(outputs, Value) else tuple(outputs)
        nodes = tuple(self._nodes)
        if names is not None:
            produced = {id(v) for node in nodes for v in node.outputs}  # inputs and constants keep their names
            renamed = {id(v): dataclasses.replace(v, name=n) for v, n in zip(outs, names)
                       if v.name != n and id(v) in produced}
            nodes = tuple(rename_values(node, renamed) for node in nodes)
            outs = tuple(renamed.get(id(v), v) for v in outs)
        g = Graph(tuple(self._inputs), outs, nodes)
        g.verify()
        return g


def rename_values(node: Node, renamed: dict[int, Value]) -> Node:
    """`node` reading and producing the renamed copies in `renamed` (id of a value -> its copy) instead of the
    originals; `node` itself when it touches none."""
    if not any(id(v) in renamed for v in node.inputs + node.outputs):
        return node
    return dataclasses.replace(node, inputs=tuple(renamed.get(id(v), v) for v in node.inputs),
                               outputs=tuple(renamed.get(id(v), v) for v in node.outputs))


# ---------------------------------------------------------------------------------------------------------------
# printing: one line per node, types on every value, constants marked (what `str(g)` gives)


def _value(v: Value) -> str:
    return f"%{v.name}" + (f": const {v.type}" if v.is_constant else "")


def _attr(v) -> str:
    if isinstance(v, Graph):
        return "<" + " -> ".join(n.op for n in v.nodes) + ">"
    if isinstance(v, tuple):
        return "(" + ", ".join(_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v)


def format_graph(g: Graph) -> str:
    head = ", ".join(f"%{v.name}: {v.type}" for v in g.inputs)
    lines = [f"graph({head}) {{"]
    for n in g.nodes:
        outs = ", ".join(f"%{v.name}" for v in n.outputs)
        args = ", ".join(_value(v) for v in n.inputs)
        attrs = ", ".join(f"{k}={_attr(v)}" for k, v in n.attrs.items())
        types = ", ".join(str(v.type) for v in n.outputs)
        lines.append(f"  {outs} = {n.op}({args}){' {' + attrs + '}' if attrs else ''} : {types}")
    lines.append(f"  return {', '.join('%' + v.name for v in g.outputs)}")
    lines.append("}")
    return "\n".join(lines)
