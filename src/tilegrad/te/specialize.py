"""A computation over dynamic dimensions made concrete at chosen values, tensor by tensor.

The default schedule rules read extents as numbers. A kernel whose extents are expressions of dynamic dimensions
is scheduled on its specialisation at representative values (`te/dims.representative`), and the trace is replayed
on the symbolic computation: the loops' names and structure are the same in both, only the extents differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import expr as E
from .simplify import simplify
from .tensor import ComputeOp, PlaceholderOp, Tensor, axis_var, topo_order


def specialize(outputs: Sequence[Tensor], values: Mapping[str, int]) -> dict[Tensor, Tensor]:
    """Each tensor reachable from `outputs` -> the same tensor with every dynamic dimension in `values` fixed."""
    made: dict[Tensor, Tensor] = {}
    for t in topo_order(outputs):
        shape = tuple(_fixed(d, values) for d in t.shape)
        if not isinstance(t.op, ComputeOp):
            made[t] = Tensor(t.name, shape, t.dtype, PlaceholderOp(t.op.name))
            continue
        op = t.op
        axes = tuple(axis_var(a.name, n) for a, n in zip(op.axes, shape))
        mapping: dict = {**values, **{a.name: b for a, b in zip(op.axes, axes)}}
        body = _rewrite(op.body, mapping, made, values)
        dynamic = tuple(a.name for a, d in zip(op.axes, t.shape) if isinstance(d, E.Expr))
        attrs = {**op.attrs, DYNAMIC_AXES: dynamic} if dynamic else op.attrs
        made[t] = Tensor(t.name, shape, t.dtype, ComputeOp(op.name, axes, body, op.tag, attrs))
    return made


DYNAMIC_AXES = "dynamic_axes"
"""The attribute naming the axes of a specialised stage whose extents were dynamic: a rule that chooses by how a
tile divides an extent (`rules_nchwc.default_blocks`) weighs the values the extent will take, not the one it is
specialised at."""


def _fixed(d, values: Mapping[str, int]):
    if not isinstance(d, E.Expr):
        return d
    out = simplify(E.substitute(d, values))
    return out.value if type(out) is E.Const else out


def _rewrite(x: E.Expr, mapping: dict, made: dict, values: Mapping[str, int]) -> E.Expr:
    if type(x) is E.Reduce:
        axes = tuple(axis_var(a.name, _fixed(a.upper, values)) for a in x.axes)
        inner = {**mapping, **{a.name: b for a, b in zip(x.axes, axes)}}
        return E.Reduce(x.combiner, _rewrite(x.source, inner, made, values), axes)
    if type(x) is E.Load:
        return E.Load(made[x.buffer], tuple(_rewrite(i, mapping, made, values) for i in x.indices))
    if type(x) is E.Var:
        return E.as_expr(mapping[x.name], x.dtype) if x.name in mapping else x
    if type(x) is E.Const:
        return x
    return E.map_children(x, lambda k: _rewrite(k, mapping, made, values))
