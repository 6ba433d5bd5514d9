"""A reference interpreter for computes: NumPy over whole index grids, independent of schedules and codegen.

Every compute is evaluated over a whole index grid: axis `d` of its output is an `np.arange` varying along grid
dimension `d`, each reduce axis varies along one extra trailing dimension, the body is evaluated by broadcasting,
and the trailing dimensions are then summed (or max/min-ed) away. Large grids go in blocks of the outermost axis.
That is slow but short enough to trust, which is what a correctness oracle for the compiler needs.

The body is numbered once (`program.py`) and run with `evaluate_numpy`'s table, `EVAL_NUMPY`. Two choices differ
from `evaluate_numpy`:

- Loads clip their indices into bounds. NumPy's `where` evaluates both branches of a select, so the branch a
  padding guard does *not* take may read outside the tensor; clipping keeps that harmless, and the taken branch
  never needs it.
- Tensors are found by identity, not by name, so two computes that share a default name do not collide.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..errors import ExprError, ShapeError
from . import expr as E
from .evaluate import EVAL_NUMPY, numpy_cast, numpy_const
from .program import Program, number, run
from .tensor import ComputeOp, Reducer, Tensor, topo_order


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


_BLOCK_ELEMENTS = 1 << 22  # grid points evaluated at once, which bounds memory on large computes


def _run_compute(t: Tensor, values: dict[Tensor, np.ndarray]) -> np.ndarray:
    """The compute's value, evaluated in blocks of its outermost axis (its body numbered once for all of them)."""
    op = t.op
    reduce = op.body if type(op.body) is E.Reduce else None
    program = number([reduce.source if reduce is not None else op.body])
    if any(type(x) is E.Reduce for x in program.nodes):
        raise ExprError(f"compute {op.name!r} has a reduction inside its body; a reduction must be the root")
    axes = op.axes + op.reduce_axes
    ranges = [(int(v.lo), int(v.hi) + 1) for v in axes]
    if not op.axes:
        return _run_block(op, program, values, ranges).astype(t.dtype)
    lo, hi = ranges[0]
    rows = max(1, _BLOCK_ELEMENTS // math.prod(b - a for a, b in ranges[1:]))
    blocks = [_run_block(op, program, values, [(start, min(start + rows, hi)), *ranges[1:]])
              for start in range(lo, hi, rows)]
    return np.concatenate(blocks).astype(t.dtype)


def _run_block(op: ComputeOp, program: Program, values: dict[Tensor, np.ndarray],
               ranges: list[tuple[int, int]]) -> np.ndarray:
    """The compute's body `program` over the grid `ranges` of its axes then reduce axes; the reduce dimensions
    are reduced away."""
    axes = op.axes + op.reduce_axes
    env = {}
    for d, (v, (lo, hi)) in enumerate(zip(axes, ranges)):
        grid = [1] * len(axes)
        grid[d] = hi - lo
        env[v.name] = np.arange(lo, hi, dtype=np.int64).reshape(grid)
    with np.errstate(all="ignore"):  # the untaken branch of a select may overflow or divide by zero
        value = np.broadcast_to(_evaluate(program, env, values, op.name), tuple(hi - lo for lo, hi in ranges))
        if type(op.body) is E.Reduce:
            value = _reduce(op.body.combiner, value, tuple(range(len(op.axes), len(axes))))
    return np.asarray(value)


def _reduce(combiner: str | Reducer, value: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    if isinstance(combiner, Reducer):
        return _fold(combiner, value, dims)
    if combiner == "sum":
        wide = np.float64 if E.is_float(str(value.dtype)) else None  # float sums in double: the oracle should be exact
        return np.sum(value, axis=dims, dtype=wide)
    if combiner == "prod":
        return np.prod(value, axis=dims)
    if combiner == "max":
        return np.max(value, axis=dims)
    if combiner == "min":
        return np.min(value, axis=dims)
    raise ExprError(f"unknown reduction combiner {combiner!r}")


def _fold(reducer: Reducer, value: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """`reducer` over the `dims` of `value` in order (row-major over those dims), as the lowered loops run it."""
    steps = np.moveaxis(value, dims, tuple(range(value.ndim - len(dims), value.ndim)))
    steps = steps.reshape(*steps.shape[:value.ndim - len(dims)], -1)
    dtype = str(value.dtype)
    names = [f"state{k}" for k in range(len(reducer.identity))]
    state_vars = tuple(E.Var(n, dtype) for n in names)
    update = number(list(reducer.update(state_vars, E.Var("x", dtype))))
    result = number([reducer.result(state_vars)])
    state = [np.full(steps.shape[:-1], ident, dtype) for ident in reducer.identity]
    with np.errstate(all="ignore"):
        for t in range(steps.shape[-1]):
            state = _run_on(update, {**dict(zip(names, state)), "x": steps[..., t]})
        return _run_on(result, dict(zip(names, state)))[0]


def _run_on(program: Program, env: dict) -> list[np.ndarray]:
    structural = {E.Const: numpy_const, E.Var: lambda x: env[x.name], E.Cast: numpy_cast}
    return [np.asarray(v) for v in run(program, EVAL_NUMPY, structural)]


def _evaluate(program: Program, env: dict, values: dict[Tensor, np.ndarray], where: str):
    def var(x: E.Var):
        if x.name not in env:
            raise ExprError(f"compute {where!r} reads variable {x.name!r}, which is neither an index nor a "
                            f"reduce axis of it")
        return env[x.name]

    def load(x: E.Load, *indices):
        arr = values.get(x.buffer)
        if arr is None:
            raise ExprError(f"compute {where!r} reads {x.buffer.name!r}, which is not a tensor of this graph")
        return arr[tuple(np.clip(np.asarray(i).astype(np.int64), 0, n - 1) for i, n in zip(indices, arr.shape))]

    structural = {E.Const: numpy_const, E.Var: var, E.Cast: numpy_cast, E.Load: load}
    return run(program, EVAL_NUMPY, structural)[0]
