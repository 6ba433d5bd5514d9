"""Feature formulas of a symbolic kernel, numbered once into a program of vectorised NumPy calls.

A sketch lowered with its parameters left as variables gives features that are formulas of those parameters
(`features.extract`). The tuner scores thousands of assignments per second, so the formulas are numbered once
(`te.program.number`: one slot per distinct subexpression, across all features and stores) into a straight-line
program of NumPy calls (`te.evaluate.EVAL_NUMPY`) over arrays holding one value per candidate; `evaluate` runs it
on a whole batch of assignments. The program is interpreted rather than written out as Python source and
compiled: a search derives formulas for every structure it meets but evaluates each only a few times per round,
and compiling the source cost more than the interpretation saves. The numbered DAG (`dag`) is also what Felix's
smoothing rewrites (`smooth.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ...loop.ir import Kernel
from ...te import expr as E
from ...te.evaluate import EVAL_NUMPY
from ...te.program import Program, number
from .extract import FeatureRows, extract


class FeatureFormulas:
    """The features of a symbolic kernel as formulas of its schedule variables, numbered for batches.

    `variables` are the schedule variables (Vars or names) an assignment gives; by default every free variable of
    the formulas. `gpu` as for `extract`; `rows`, the kernel's features where they are extracted already (bound
    at one point of its dynamic dimensions: `FeatureRows.at`). `derive_seconds` records how long extracting and
    numbering took."""

    def __init__(self, kernel: Kernel, variables: Sequence[E.Var | str] | None = None, gpu: bool | None = None,
                 rows: FeatureRows | None = None):
        start = time.perf_counter()
        self.rows: FeatureRows = rows if rows is not None else extract(kernel, gpu)
        self.dag = number([e for row in self.rows.rows for e in row])
        self.program = BatchProgram(self.dag)
        free = self.program.variables
        if variables is None:
            self.variables = free
        else:
            self.variables = tuple(v.name if isinstance(v, E.Var) else v for v in variables)
            missing = sorted(set(free) - set(self.variables))
            if missing:
                raise ValueError(f"the features of kernel {kernel.name} depend on {missing}, which are not among "
                                 f"the variables {list(self.variables)}")
        self.derive_seconds = time.perf_counter() - start

    @property
    def names(self) -> tuple[str, ...]:
        return self.rows.names

    @property
    def stores(self) -> tuple[str, ...]:
        return self.rows.stores

    def evaluate(self, assignments: dict[str, np.ndarray]) -> np.ndarray:
        """Features for a batch: `assignments` maps each variable's name to an array (one value per candidate,
        all of one length). Returns float64 of shape (batch, n_stores, n_features)."""
        missing = [v for v in self.variables if v not in assignments]
        if missing:
            raise ValueError(f"no values for schedule variables {missing}")
        arrays = {v: np.asarray(assignments[v]) for v in self.variables}
        sizes = {a.shape for a in arrays.values()}
        if len(sizes) > 1 or any(a.ndim != 1 for a in arrays.values()):
            raise ValueError(f"assignments must be 1-D arrays of one length, got shapes {sorted(sizes)}")
        batch = next(iter(arrays.values())).shape[0] if arrays else 1
        out = np.empty((len(self.rows.rows), len(self.rows.names), batch), np.float64)
        with np.errstate(all="ignore"):  # np.where evaluates both branches; the untaken one may divide by 0
            self.program.run(arrays, out.reshape(-1, batch))
        return out.transpose(2, 0, 1)


class BatchProgram:
    """Numbered formulas (`te.program.number`) as NumPy calls over arrays of one value per candidate: the
    constants and variables first, then one step per distinct operation node, each `slots[target] =
    fn(*slots[args])` with `fn` from `te.evaluate.EVAL_NUMPY`."""

    def __init__(self, program: Program):
        self._consts: list[tuple[int, object]] = []
        self._vars: list[tuple[int, str]] = []
        steps: list[tuple[int, Callable, tuple[int, ...]]] = []
        for slot, (e, args) in enumerate(zip(program.nodes, program.args)):
            t = type(e)
            if t is E.Const:  # a Python number, which NumPy promotes as the formulas' other operand
                self._consts.append((slot, e.value))
            elif t is E.Var:
                self._vars.append((slot, e.name))
            else:
                steps.append((slot, _call(e), args))
        self.n_slots, self.n_nodes = len(program), len(steps)
        self.variables = tuple(sorted({name for _, name in self._vars}))
        # A step writes the formulas it computes into `out` at once, and empties each temporary it reads for the
        # last time (itself too, if nothing reads it), so a large batch keeps few arrays alive.
        writes: dict[int, list[int]] = {}
        for k, slot in enumerate(program.outputs):
            writes.setdefault(slot, []).append(k)
        last = {target: i for i, (target, _, _) in enumerate(steps)}
        last.update({a: i for i, (_, _, args) in enumerate(steps) for a in args if a in last})
        dead: list[list[int]] = [[] for _ in steps]
        for a, i in last.items():
            dead[i].append(a)
        self._steps = [(target, fn, args, _index(writes.get(target)), tuple(d))
                       for (target, fn, args), d in zip(steps, dead)]
        self._leaf_writes = [(slot, _index(ks)) for slot, ks in writes.items() if slot not in last]
        self._template: list = [None] * self.n_slots
        for slot, value in self._consts:
            self._template[slot] = value

    def run(self, env: dict[str, np.ndarray], out: np.ndarray) -> None:
        """out[k] = the value of the k-th formula, for the variables' arrays in `env`."""
        values = self._template.copy()
        for slot, name in self._vars:
            values[slot] = env[name]
        for slot, ks in self._leaf_writes:
            out[ks] = values[slot]
        for target, fn, args, ks, dead in self._steps:
            if len(args) == 2:
                value = fn(values[args[0]], values[args[1]])
            else:
                value = fn(*[values[a] for a in args])
            values[target] = value
            if ks is not None:
                out[ks] = value
            for a in dead:
                values[a] = None


def _index(ks: list[int] | None) -> int | list[int] | None:
    """The rows of `out` one value goes to, as the cheapest index: most values are one formula or none."""
    if ks is None or len(ks) > 1:
        return ks
    return ks[0]


def _call(e: E.Expr) -> Callable:
    t = type(e)
    if t is E.Cast:
        dtype = np.dtype(e.dtype).type
        return lambda x: np.asarray(x).astype(dtype)
    fn = EVAL_NUMPY.get(t)
    if fn is None:
        raise ValueError(f"feature formulas cannot contain {t.__name__} ({e})")
    return fn
