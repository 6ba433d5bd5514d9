"""Feature formulas of a symbolic kernel, compiled once into one vectorised NumPy function.

A sketch lowered with its parameters left as variables gives features that are formulas of those variables
(`features.extract`). The tuner scores thousands of assignments per second, so the formulas are turned into Python
source once: one statement per distinct subexpression (structurally equal nodes are computed once, across all
features and stores), each a NumPy call over arrays holding one value per candidate. `evaluate` then runs that
function on a whole batch of assignments.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..loop.ir import Kernel
from ..te import expr as E
from .features import FeatureRows, extract

# Every node a feature formula can contain: arithmetic, comparisons, logic, select and casts (features.py builds
# nothing else).
_CALLS = {
    E.Add: "np.add", E.Sub: "np.subtract", E.Mul: "np.multiply", E.Div: "np.true_divide",
    E.FloorDiv: "np.floor_divide", E.FloorMod: "np.mod", E.Min: "np.minimum", E.Max: "np.maximum",
    E.EQ: "np.equal", E.NE: "np.not_equal", E.LT: "np.less", E.LE: "np.less_equal",
    E.And: "np.logical_and", E.Or: "np.logical_or", E.Not: "np.logical_not", E.Select: "np.where",
}
_NP_DTYPES = {"bool": "np.bool_", "float16": "np.float16", "float32": "np.float32", "float64": "np.float64",
              "int8": "np.int8", "int16": "np.int16", "int32": "np.int32", "int64": "np.int64", "uint8": "np.uint8"}


class FeatureFormulas:
    """The features of a symbolic kernel as formulas of its schedule variables, compiled for batches.

    `variables` are the schedule variables (Vars or names) an assignment gives; by default every free variable of
    the formulas. `derive_seconds` records how long extracting and compiling took."""

    def __init__(self, kernel: Kernel, variables: Sequence[E.Var | str] | None = None):
        start = time.perf_counter()
        self.rows: FeatureRows = extract(kernel)
        exprs = [e for row in self.rows.rows for e in row]
        self.source, self.n_nodes, free = generate_source(exprs)
        if variables is None:
            self.variables = tuple(free)
        else:
            self.variables = tuple(v.name if isinstance(v, E.Var) else v for v in variables)
            missing = sorted(set(free) - set(self.variables))
            if missing:
                raise ValueError(f"the features of kernel {kernel.name} depend on {missing}, which are not among "
                                 f"the variables {list(self.variables)}")
        namespace: dict = {"np": np}
        exec(compile(self.source, f"<features of {kernel.name}>", "exec"), namespace)
        self._fn = namespace["features"]
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
            self._fn(arrays, out.reshape(-1, batch))
        return out.transpose(2, 0, 1)


def generate_source(exprs: list[E.Expr]) -> tuple[str, int, list[str]]:
    """Python source of `def features(env, out)` setting out[k] to the value of exprs[k], one line per distinct
    node; also the number of those nodes and the names of the variables read. Each temporary array is deleted
    after its last use, which keeps the working set of a large batch small."""
    names: dict[E.Expr, str] = {}
    variables: set[str] = set()
    by_id: dict[int, str] = {}
    steps: list[tuple[str, list[str]]] = []  # (statement, temporaries it reads)

    def emit(e: E.Expr) -> str:
        hit = by_id.get(id(e))
        if hit is not None:
            return hit
        if type(e) is E.Const:
            return _literal(e)
        hit = names.get(e)
        if hit is None:
            if type(e) is E.Var:
                variables.add(e.name)
                code, reads = f"env[{e.name!r}]", []
            else:
                args = [emit(k) for k in e.children()]
                code, reads = _call(e, args), [a for a in args if a.startswith("t")]
            hit = names[e] = f"t{len(names)}"
            steps.append((f"{hit} = {code}", reads))
        by_id[id(e)] = hit
        return hit

    for k, e in enumerate(exprs):
        value = emit(e)
        steps.append((f"out[{k}] = {value}", [value] if value.startswith("t") else []))
    last = {t: i for i, (_, reads) in enumerate(steps) for t in reads}
    lines = ["def features(env, out):"]
    for i, (stmt, reads) in enumerate(steps):
        lines.append(f"    {stmt}")
        dead = sorted({t for t in reads if last[t] == i})
        if dead:
            lines.append(f"    del {', '.join(dead)}")
    return "\n".join(lines) + "\n", len(names), sorted(variables)


def _literal(c: E.Const) -> str:
    v = c.value
    if isinstance(v, float) and not np.isfinite(v):
        return "np.nan" if np.isnan(v) else ("np.inf" if v > 0 else "-np.inf")
    return repr(v)


def _call(e: E.Expr, args: list[str]) -> str:
    t = type(e)
    if t is E.Cast:
        return f"np.asarray({args[0]}).astype({_NP_DTYPES[e.dtype]})"
    fn = _CALLS.get(t)
    if fn is None:
        raise ValueError(f"feature formulas cannot contain {t.__name__} ({e})")
    return f"{fn}({', '.join(args)})"
