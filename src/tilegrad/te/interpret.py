"""A reference interpreter for computes: NumPy over whole index grids, independent of schedules and codegen.

Every compute is evaluated at once: axis `d` of its output is an `np.arange` varying along grid dimension `d`, each
reduce axis varies along one extra trailing dimension, the body is evaluated by broadcasting, and the trailing
dimensions are then summed (or max/min-ed) away. That is slow and memory-hungry but short enough to trust, which
is what a correctness oracle for the compiler needs.

Two choices differ from `evaluate_numpy`:

- Loads clip their indices into bounds. NumPy's `where` evaluates both branches of a select, so the branch a
  padding guard does *not* take may read outside the tensor; clipping keeps that harmless, and the taken branch
  never needs it.
- Tensors are found by identity, not by name, so two computes that share a default name do not collide.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ExprError, ShapeError
from . import expr as E
from .evaluate import EVAL_NUMPY
from .tensor import ComputeOp, Tensor, topo_order


def interpret(outputs: Tensor | Sequence[Tensor], inputs: dict[str, np.ndarray]) -> np.ndarray | list[np.ndarray]:
    """The values of `outputs` given arrays for their placeholders, keyed by placeholder name.

    Returns one array for one tensor, a list for a list. Every placeholder the outputs read must be given, with
    exactly its shape and dtype; names that no placeholder has are rejected as likely typos.
    """
    single = isinstance(outputs, Tensor)
    outs = [outputs] if single else list(outputs)
    order = topo_order(outs)
    _check_input_names(order, inputs)
    values: dict[Tensor, np.ndarray] = {}
    for t in order:
        if isinstance(t.op, ComputeOp):
            values[t] = _run_compute(t, values)
        else:
            values[t] = _bind_input(t, inputs)
    results = [values[t] for t in outs]
    return results[0] if single else results


def _check_input_names(order: list[Tensor], inputs: dict) -> None:
    placeholders = [t for t in order if not isinstance(t.op, ComputeOp)]
    names = [t.name for t in placeholders]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ShapeError(f"placeholders {dupes} share a name, so an inputs dict cannot tell them apart; rename them")
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise ShapeError(f"inputs {unknown} match no placeholder; the placeholders are {sorted(names)}")


def _bind_input(t: Tensor, inputs: dict) -> np.ndarray:
    if t.name not in inputs:
        raise ShapeError(f"no array given for placeholder {t.name!r} {t.shape} {t.dtype}")
    arr = np.asarray(inputs[t.name])
    if arr.shape != t.shape:
        raise ShapeError(f"input {t.name!r}: expected shape {t.shape}, got {arr.shape}")
    if arr.dtype != np.dtype(t.dtype):
        raise ShapeError(f"input {t.name!r}: expected dtype {t.dtype}, got {arr.dtype}; convert with .astype")
    return arr


def _run_compute(t: Tensor, values: dict[Tensor, np.ndarray]) -> np.ndarray:
    op = t.op
    axes = op.axes + op.reduce_axes
    env = {}
    for d, v in enumerate(axes):
        grid = [1] * len(axes)
        grid[d] = int(v.hi) - int(v.lo) + 1
        env[v.name] = np.arange(int(v.lo), int(v.hi) + 1, dtype=np.int64).reshape(grid)
    reduce = op.body if type(op.body) is E.Reduce else None
    source = reduce.source if reduce is not None else op.body
    with np.errstate(all="ignore"):  # the untaken branch of a select may overflow or divide by zero
        value = _evaluate(source, env, values, op.name)
        value = np.broadcast_to(value, tuple(int(v.hi) - int(v.lo) + 1 for v in axes))
        if reduce is not None:
            value = _reduce(reduce.combiner, value, tuple(range(len(op.axes), len(axes))))
    return np.asarray(value).astype(t.dtype)


def _reduce(combiner: str, value: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    if combiner == "sum":
        wide = np.float64 if value.dtype.kind == "f" else None  # float sums in double: the oracle should be exact
        return np.sum(value, axis=dims, dtype=wide)
    if combiner == "max":
        return np.max(value, axis=dims)
    if combiner == "min":
        return np.min(value, axis=dims)
    raise ExprError(f"unknown reduction combiner {combiner!r}")


def _evaluate(e: E.Expr, env: dict, values: dict[Tensor, np.ndarray], where: str):
    memo: dict[int, object] = {}

    def go(x: E.Expr):
        key = id(x)
        if key not in memo:
            memo[key] = visit(x)
        return memo[key]

    def visit(x: E.Expr):
        t = type(x)
        if t is E.Const:
            return np.asarray(x.value, dtype=x.dtype)
        if t is E.Var:
            if x.name not in env:
                raise ExprError(f"compute {where!r} reads variable {x.name!r}, which is neither an index nor a "
                                f"reduce axis of it")
            return env[x.name]
        if t is E.Cast:
            return np.asarray(go(x.a)).astype(x.dtype)
        if t is E.Load:
            return load(x)
        if t is E.Reduce:
            raise ExprError(f"compute {where!r} has a reduction inside its body; a reduction must be the root")
        return EVAL_NUMPY[t](*(go(k) for k in x.children()))

    def load(x: E.Load):
        arr = values.get(x.buffer)
        if arr is None:
            raise ExprError(f"compute {where!r} reads {x.buffer.name!r}, which is not a tensor of this graph")
        idx = tuple(np.clip(np.asarray(go(i)).astype(np.int64), 0, n - 1) for i, n in zip(x.indices, arr.shape))
        return arr[idx]

    return go(e)
