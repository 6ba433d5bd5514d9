"""Tensor expressions: placeholders, computes over index variables, and reductions.

A compute declares *what* each output element is (an expression of its index variables, reading other tensors);
the schedule decides *how* the loops run. A reduction appears only at the root of a compute's body, as in TVM.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Callable, Sequence

from ..dtype import BUFFER_DTYPES as DTYPES
from ..errors import ShapeError
from . import expr as E


def _check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ShapeError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


def _check_shape(shape, what: str) -> tuple:
    """`shape` as ints, and index expressions where a dimension is dynamic (`te/dims.py`)."""
    try:
        out = tuple(s if isinstance(s, E.Expr) and s.dtype == E.INDEX else int(s) for s in shape)
    except TypeError:
        raise ShapeError(f"{what}: shape must be a sequence of integers, got {shape!r}") from None
    if any(not isinstance(s, E.Expr) and s <= 0 for s in out):
        raise ShapeError(f"{what}: every dimension must be positive, got {out}")
    return out


def axis_var(name: str, extent) -> E.Var:
    """An index variable ranging over [0, extent); a dynamic extent bounds it by its largest value."""
    if isinstance(extent, E.Expr):
        return E.Var(name, E.INDEX, 0, extent.hi - 1, extent)
    return E.Var(name, E.INDEX, 0, extent - 1, E.Const(extent, E.INDEX))


class Operation:
    """What produces a tensor: a placeholder (an input) or a compute."""

    name: str


class PlaceholderOp(Operation):
    def __init__(self, name: str):
        self.name = name


class ComputeOp(Operation):
    """`output[axes] = body`; `body` may be a Reduce over `reduce_axes`."""

    def __init__(self, name: str, axes: tuple[E.Var, ...], body: E.Expr, tag: str, attrs: dict):
        self.name = name
        self.axes = axes
        self.body = body
        self.tag = tag
        self.attrs = attrs

    @property
    def reduce_axes(self) -> tuple[E.Var, ...]:
        return self.body.axes if type(self.body) is E.Reduce else ()

    @property
    def inputs(self) -> list["Tensor"]:
        """Tensors the body reads, in order of first appearance."""
        seen: dict[int, Tensor] = {}
        stack = [self.body]
        order: list[Tensor] = []
        while stack:
            x = stack.pop()
            if type(x) is E.Load and id(x.buffer) not in seen:
                seen[id(x.buffer)] = x.buffer
                order.append(x.buffer)
            stack.extend(reversed(x.children()))
        return order


class Tensor:
    """A named n-dimensional array of one dtype, produced by an operation. Identity is the object."""

    __hash__ = object.__hash__

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str, op: Operation):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.op = op

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> E.Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) == 1 and isinstance(indices[0], tuple):
            indices = indices[0]
        if len(indices) != len(self.shape):
            raise ShapeError(f"{self.name} has {len(self.shape)} dimensions, indexed with {len(indices)}")
        return E.Load(self, tuple(E.as_expr(i) for i in indices))

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "input") -> Tensor:
    shape = _check_shape(shape, f"placeholder {name!r}")
    return Tensor(name, shape, _check_dtype(dtype), PlaceholderOp(name))


def reduce_axis(extent, name: str = "k") -> E.Var:
    if isinstance(extent, E.Expr):
        return axis_var(name, extent)
    if int(extent) <= 0:
        raise ShapeError(f"reduce_axis {name!r}: extent must be positive, got {extent}")
    return axis_var(name, int(extent))


def _param_names(fcompute: Callable, ndim: int) -> list[str]:
    params = list(inspect.signature(fcompute).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(ndim)]
    if len(params) != ndim:
        raise ShapeError(f"compute lambda takes {len(params)} indices but the shape has {ndim} dimensions")
    return [p.name for p in params]


def compute(shape: Sequence[int], fcompute: Callable, name: str = "compute", tag: str = "", attrs: dict | None = None,
            dtype: str | None = None) -> Tensor:
    """A tensor whose element at `idx` is `fcompute(*idx)`; index variables take the lambda's parameter names."""
    shape = _check_shape(shape, f"compute {name!r}")
    names = _param_names(fcompute, len(shape))
    axes = tuple(axis_var(n, s) for n, s in zip(names, shape))
    body = E.as_expr(fcompute(*axes))
    if dtype is not None and body.dtype != dtype:
        body = _cast_body(body, dtype)
    if type(body) is E.Reduce:
        clash = {a.name for a in body.axes} & set(names)
        if clash:
            raise ShapeError(f"compute {name!r}: reduce axes {sorted(clash)} reuse the names of index variables")
    op = ComputeOp(name, axes, body, tag, dict(attrs or {}))
    return Tensor(name, shape, _check_dtype(body.dtype), op)


def _cast_body(body: E.Expr, dtype: str) -> E.Expr:
    if type(body) is E.Reduce:
        return E.Reduce(body.combiner, E.cast(dtype, body.source), body.axes)
    return E.cast(dtype, body)


def _reducer(combiner: str):
    def reduce(source, axis) -> E.Reduce:
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        source = E.as_expr(source)
        return E.Reduce(combiner, source, axes)

    reduce.__name__ = combiner
    reduce.__doc__ = f"The {combiner} of `source` over the reduce axes `axis` (one Var or a list)."
    return reduce


sum = _reducer("sum")  # noqa: A001 - te.sum mirrors the math
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001
prod = _reducer("prod")


@dataclasses.dataclass(frozen=True)
class Reducer:
    """A reduction whose accumulator is several values updated together (TVM's tuple reducer): `identity` per
    component, `update(state, x)` the new components from the old ones and one source value, `result(state)` the
    output. The update need not be associative, so the reduction runs in order: a schedule may split its axes
    but not rfactor them, nor put a spatial loop inside them (the components live in scalars)."""

    name: str
    identity: tuple[float, ...]
    update: Callable[[tuple[E.Expr, ...], E.Expr], tuple[E.Expr, ...]]
    result: Callable[[tuple[E.Expr, ...]], E.Expr]

    def __str__(self) -> str:
        return self.name


def fold(reducer: Reducer, source, axis) -> E.Reduce:
    """`reducer` over `source` along the reduce axes `axis` (one Var or a list), in order."""
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    return E.Reduce(reducer, E.as_expr(source), axes)


def _running_max_sum(state, x):
    """The online softmax's step: m' = max(m, x), l' = l exp(m - m') + exp(x - m'); a maximum still -inf shifts
    by 0, so that rows of -inf sum to 0 instead of NaN."""
    m, total = state
    top = E.maximum(m, x)
    lowest = E.Const(-math.inf, x.dtype)
    shift = E.select(top.eq(lowest), E.Const(0.0, x.dtype), top)
    return top, total * E.exp(m - shift) + E.exp(x - shift)


logsumexp = Reducer("logsumexp", (-math.inf, 0.0), _running_max_sum, lambda state: state[0] + E.log(state[1]))
"""log(sum(exp(x))) in one pass, by the online softmax's running (maximum, sum of exp(x - maximum))."""


def reduce_identity(combiner: str, dtype: str) -> E.Const:
    """The initial value of an accumulator: 0 for sums, 1 for products, the lowest (highest) value for max (min)."""
    if combiner == "sum":
        return E.Const(0, dtype)
    if combiner == "prod":
        return E.Const(1, dtype)
    lowest = combiner == "max"
    if E.is_float(dtype):
        return E.Const(-math.inf if lowest else math.inf, dtype)
    if dtype == "bool":
        return E.Const(not lowest, dtype)
    import numpy as np

    info = np.iinfo(dtype)
    return E.Const(info.min if lowest else info.max, dtype)


def combine(combiner: str, acc: E.Expr, value: E.Expr) -> E.Expr:
    if combiner == "sum":
        return E.add(acc, value)
    if combiner == "prod":
        return E.mul(acc, value)
    if combiner == "max":
        return E.maximum(acc, value)
    return E.minimum(acc, value)


def topo_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    """All tensors reachable from `outputs`, producers before consumers."""
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor):
        if id(t) in seen:
            return
        seen.add(id(t))
        if isinstance(t.op, ComputeOp):
            for inp in t.op.inputs:
                visit(inp)
        order.append(t)

    for out in outputs:
        visit(out)
    return order


def replace_reads(t: Tensor, mapping: dict[Tensor, Tensor]) -> Tensor:
    """`t` recomputed with its reads of the keys of `mapping` redirected to the values (same indices)."""
    op = t.op

    def go(x: E.Expr) -> E.Expr:
        if type(x) is E.Load and x.buffer in mapping:
            return E.Load(mapping[x.buffer], tuple(go(i) for i in x.indices))
        return E.map_children(x, go)

    body = go(op.body)
    if body is op.body:
        return t
    return Tensor(t.name, t.shape, t.dtype, ComputeOp(op.name, op.axes, body, op.tag, op.attrs))
