"""Composite-op expansion: ops whose declarations give an `expand=` formula (layer norm, softmax, log-softmax,
GELU, instance norm, batch norm) become the basic ops they are made of (reductions with keepdims and element-wise
arithmetic).

This is the first step of MindSpore's "expand, aggregate, re-split". A composite op is a wall that fusion cannot
see through; its basic ops can be regrouped with their neighbours into row-wise kernels, which the fusion pass
(last in the pipeline) does. A declaration writes its formula over `_Term`s, whose arithmetic (+ - * / with terms or
numbers, `exp`, `log`, `erf`, `rsqrt`, `max`/`sum`/`mean` over axes, `per_channel`) emits the ops.

`ctx.options["expand"]`, a set of op names, picks the composites to expand (default: all of them), so that a
benchmark can compare an expanded op with its hand-written kernel.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

import numpy as np

from ..errors import TilegradError
from ..ir.graph import Graph, Node, Value, infer_types
from ..ir.registry import declared_ops, lookup
from .editor import GraphEditor, map_nodes
from .context import PassContext


class _Emitter:
    """Adds the basic ops of one composite node to the editor, named after that node.

    An op whose inputs are all constants is evaluated at once (by its reference) instead of emitted: a batch
    norm's per-channel factors and a reshaped per-channel scale are constants, and constant folding has already
    run by the time this pass does.
    """

    def __init__(self, ed: GraphEditor, node: Node):
        self.ed, self.node = ed, node

    def term(self, v: Value) -> _Term:
        return _Term(v, self)

    def apply(self, op: str, *operands: _Term | float, **attrs) -> _Term:
        """`op` over terms and plain numbers (a number becomes a scalar of the terms' dtype)."""
        dtype = next(t.value.dtype for t in operands if isinstance(t, _Term))
        inputs = [t.value if isinstance(t, _Term) else self.ed.const(np.array(t, dtype), f"{self.node.name}_c")
                  for t in operands]
        name = f"{self.node.name}_{op}"
        if all(v.is_constant for v in inputs):
            (out,) = infer_types(op, [v.type for v in inputs], attrs, name)
            bound = lookup(op).bind_attrs(attrs, f"node {name!r}")
            data = np.asarray(lookup(op).reference(*(v.data for v in inputs), **bound))
            return self.term(self.ed.const(data.astype(out.dtype).reshape(out.shape), name))
        return self.term(self.ed.op(op, *inputs, name=name, **attrs))


@dataclasses.dataclass(frozen=True, eq=False)
class _Term:
    """A value of the expansion being built: arithmetic on terms emits basic ops, so that an expansion reads like
    its formula. Reductions keep the reduced axes (extent 1), so their results broadcast back over the rows."""

    value: Value
    emitter: _Emitter

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    def __add__(self, other):
        return self.emitter.apply("add", self, other)

    def __radd__(self, other):
        return self.emitter.apply("add", other, self)

    def __sub__(self, other):
        return self.emitter.apply("sub", self, other)

    def __mul__(self, other):
        return self.emitter.apply("mul", self, other)

    def __rmul__(self, other):
        return self.emitter.apply("mul", other, self)

    def __truediv__(self, other):
        return self.emitter.apply("div", self, other)

    def exp(self) -> _Term:
        return self.emitter.apply("exp", self)

    def log(self) -> _Term:
        return self.emitter.apply("log", self)

    def erf(self) -> _Term:
        return self.emitter.apply("erf", self)

    def rsqrt(self) -> _Term:
        """1 / sqrt(self): a reciprocal per row and a product per element, rather than a division per element."""
        return self.emitter.apply("reciprocal", self.emitter.apply("sqrt", self))

    def max(self, axes: int | Iterable[int]) -> _Term:
        return self._reduce("reduce_max", axes)

    def sum(self, axes: int | Iterable[int]) -> _Term:
        return self._reduce("reduce_sum", axes)

    def mean(self, axes: int | Iterable[int]) -> _Term:
        return self._reduce("reduce_mean", axes)

    def _reduce(self, op: str, axes: int | Iterable[int]) -> _Term:
        axes = (axes,) if isinstance(axes, int) else axes
        return self.emitter.apply(op, self, axes=tuple(a % self.ndim for a in axes), keepdims=1)

    def per_channel(self, ndim: int) -> _Term:
        """A (C,) parameter shaped (C, 1, ..., 1) to broadcast along axis 1 of a rank-`ndim` (N, C, ...) tensor."""
        shape = (self.value.shape[0],) + (1,) * (ndim - 2)
        return self if shape == self.value.shape else self.emitter.apply("reshape", self, shape=shape)


def expandable() -> frozenset[str]:
    """The ops whose declarations give an expansion."""
    return frozenset(name for name, op in declared_ops().items() if op.expand is not None)


def _chosen(names: Iterable[str] | None) -> frozenset[str]:
    ops = expandable()
    if names is None:
        return ops
    names = frozenset(names)
    unknown = names - ops
    if unknown:
        raise TilegradError(f"expand: cannot expand {sorted(unknown)}; the expandable ops are "
                            f"{', '.join(sorted(ops))}")
    return names


def expand_composites(g: Graph, ctx: PassContext) -> Graph:
    """Rewrite composite ops into basic ops, so that fusion can regroup them with their neighbours."""
    chosen = _chosen(ctx.options.get("expand"))
    if not any(n.op in chosen for n in g.nodes):
        return g
    expanded: Counter[str] = Counter()

    def rewrite(ed: GraphEditor, node: Node) -> Value | None:
        if node.op not in chosen:
            return None
        emitter = _Emitter(ed, node)
        expanded[node.op] += 1
        return lookup(node.op).expand(*map(emitter.term, ed.inputs_of(node)), **node.attrs).value

    g = map_nodes(g, rewrite)
    ctx.note("expanded " + ", ".join(f"{op} x{n}" for op, n in sorted(expanded.items())))
    return g
