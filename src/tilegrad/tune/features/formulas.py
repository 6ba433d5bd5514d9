"""Feature formulas of a symbolic kernel, numbered once into a program of vectorised NumPy calls.

A sketch lowered with its parameters left as variables gives features that are formulas of those parameters
(`features.extract`). The tuner scores thousands of assignments per second, so the formulas are numbered once
into a straight-line program: one step per distinct subexpression (structurally equal nodes are computed once,
across all features and stores), each a NumPy call over arrays holding one value per candidate. `evaluate` runs
that program on a whole batch of assignments. The program is interpreted rather than written out as Python source
and compiled: numbering halves the derivation (`benchmarks/features.py`: 17 ms against 35 ms for a tiled matmul,
whose `compile` was most of it), while looping over ~1,700 steps costs 0.2-0.5 ms more per batch, which a search
evaluates a few times per round but derives for every structure it meets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ...loop.ir import Kernel
from ...te import expr as E
from .extract import FeatureRows, extract

# Every node a feature formula can contain: arithmetic, comparisons, logic, select and casts (features.py builds
# nothing else).
_CALLS = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.true_divide,
    E.FloorDiv: np.floor_divide, E.FloorMod: np.mod, E.Min: np.minimum, E.Max: np.maximum,
    E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal,
    E.And: np.logical_and, E.Or: np.logical_or, E.Not: np.logical_not, E.Select: np.where,
}
_NP_DTYPES = {"bool": np.bool_, "float16": np.float16, "float32": np.float32, "float64": np.float64,
              "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}


class FeatureFormulas:
    """The features of a symbolic kernel as formulas of its schedule variables, numbered for batches.

    `variables` are the schedule variables (Vars or names) an assignment gives; by default every free variable of
    the formulas. `derive_seconds` records how long extracting and numbering took."""

    def __init__(self, kernel: Kernel, variables: Sequence[E.Var | str] | None = None):
        start = time.perf_counter()
        self.rows: FeatureRows = extract(kernel)
        exprs = [e for row in self.rows.rows for e in row]
        self.program = Program(exprs)
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


class Program:
    """Formulas as a straight-line program over numbered slots: the constants and variables first, then one step
    per distinct operation node, each `slots[target] = fn(*slots[args])`."""

    def __init__(self, exprs: list[E.Expr]):
        slots: dict[object, int] = {}
        by_id: dict[int, int] = {}
        self._consts: list[tuple[int, object]] = []
        self._vars: list[tuple[int, str]] = []
        steps: list[tuple[int, Callable, tuple[int, ...]]] = []

        def number(e: E.Expr) -> int:
            hit = by_id.get(id(e))
            if hit is not None:
                return hit
            # A constant is keyed by its Python type too: 1 and 1.0 are equal, but NumPy promotes an int64 array
            # with the one to int64 and with the other to float64.
            key = (e.dtype, type(e.value), e.value) if type(e) is E.Const else e
            hit = slots.get(key)
            if hit is None:
                args = tuple(number(k) for k in e.children())  # the children take their slots first
                hit = slots[key] = len(slots)
                if type(e) is E.Const:
                    self._consts.append((hit, e.value))
                elif type(e) is E.Var:
                    self._vars.append((hit, e.name))
                else:
                    steps.append((hit, _call(e), args))
            by_id[id(e)] = hit
            return hit

        outputs = [number(e) for e in exprs]
        self.n_slots, self.n_nodes = len(slots), len(steps)
        self.variables = tuple(sorted({name for _, name in self._vars}))
        # A step writes the formulas it computes into `out` at once, and empties each temporary it reads for the
        # last time (itself too, if nothing reads it), so a large batch keeps few arrays alive.
        writes: dict[int, list[int]] = {}
        for k, slot in enumerate(outputs):
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
        dtype = _NP_DTYPES[e.dtype]
        return lambda x: np.asarray(x).astype(dtype)
    fn = _CALLS.get(t)
    if fn is None:
        raise ValueError(f"feature formulas cannot contain {t.__name__} ({e})")
    return fn
