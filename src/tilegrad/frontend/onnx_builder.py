"""The GraphBuilder every ONNX mapping builds with: it folds nodes whose inputs are all constants, refuses tensor
types tilegrad cannot compile, and carries what a mapping may need to know of the model and the node being
converted (the opset, the node's output count, the values in scope)."""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..errors import ExprError, ShapeError, UnsupportedFeatureError
from ..ir.graph import GraphBuilder, Value, infer_types
from ..ir.registry import lookup
from ..te.dims import is_static, is_symbolic_array
from .onnx_tensors import check_constant, check_dtype, check_size


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
        if inputs and all(v.is_constant for v in inputs) and all(is_static(t.shape) for t in types):
            folded = self._fold(op, inputs, types, name or op, attrs)
            if folded is not None:
                return folded
        inputs = tuple(self._materialized(v) for v in inputs)
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
        """The op computed on its constant inputs by its NumPy reference; inputs holding dynamic dimensions (a
        Shape's) fold where NumPy's integer arithmetic on them gives integers again, and give None where not (the
        op then runs as a kernel, their values computed at run time)."""
        where = f"node {name!r}"
        for t in types:
            check_constant(t.shape, t.dtype, f"{where} ({op})")
        opdef = lookup(op)
        bound = opdef.bind_attrs(attrs, where)
        symbolic = any(is_symbolic_array(v.data) for v in inputs)
        try:
            with np.errstate(all="ignore"):
                out = opdef.reference(*(v.data for v in inputs), **bound)
        except (IndexError, ValueError, TypeError, ArithmeticError, ExprError) as exc:  # the data breaks the op
            if symbolic:
                return None
            raise ShapeError(f"{where} ({op}) fails on its constant inputs: {type(exc).__name__}: {exc}") from None
        outs = [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
        if symbolic and not all(o.dtype != object or t.dtype == "int64" for o, t in zip(outs, types)):
            return None
        values = tuple(self.const((o if o.dtype == object else o.astype(t.dtype)).reshape(t.shape), name)
                       for o, t in zip(outs, types))
        return values[0] if len(values) == 1 else values

    def _materialized(self, v: Value) -> Value:
        """`v`, or where it is a constant holding dynamic dimensions, a node computing it at run time."""
        if not (v.is_constant and is_symbolic_array(v.data)):
            return v
        return super().op("dim_values", name=f"{v.name}_values", values=tuple(v.data.reshape(-1)),
                          shape=v.shape, dtype=v.dtype)
