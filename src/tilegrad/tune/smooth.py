"""Felix's differentiable rewriting: feature formulas made smooth, and evaluated with gradients in batches.

Feature formulas step wherever a schedule decision flips (`select(extent == 1, ...)`, `max`, `//`), so their
gradient is zero or undefined almost everywhere. `smooth` replaces each such node f by its convolution with the
Cauchy kernel phi(t) = 1 / (pi tau (1 + (t / tau)^2)), in closed form. The Cauchy kernel's heavy tails are the
point: a Gaussian's gradient vanishes a few widths from a step, the Cauchy one decays only like tau / d^2, so a
point far from the step that would improve the features still feels it, and never with a zero or denormal slope.

With S(x) = 1/2 + atan(x / tau) / pi, the convolution of the unit step H:

    x < y,  x <= y        S(y - x - h),  S(y - x + h)      h = 1/2 for integer operands, 0 for floats
    x == y                S(d + 1/2) - S(d - 1/2)          d = x - y: the smoothed unit box
    x != y                1 - (x == y)
    a && b, a || b, !a    a b,  a + b - a b,  1 - a        products of the smoothed truth values
    select(c, t, f)       f + c (t - f)
    max(a, b), min(a, b)  b + d S(d),  a - d S(d)          d = a - b; the ramp's own convolution diverges
    abs(x)                x (2 S(x) - 1)                   (phi has no mean), so the step inside it is smoothed
    floor(y)              y - 1/2 + atan(r sin 2 pi y / (1 - r cos 2 pi y)) / pi,   r = e^(-2 pi tau)
    ceil(y), round(y)     -floor(-y),  floor(y + 1/2)
    a // b, a % b         floor((a + h) / b),  a - b floor((a + h) / b)
    cast(x)               x                                (booleans are already their smoothed 0..1 value)

The floor follows from floor(y) = y - 1/2 + sum_k sin(2 pi k y) / (pi k): phi's Fourier transform e^(-tau |w|)
damps the k-th harmonic by r^k, and sum_k r^k sin(k t) / k = atan(r sin t / (1 - r cos t)). Its denominator is at
least 1 - r > 0, so the form is smooth for every y.

The shift h places each step midway between the integers where an integer comparison or division changes, so as
tau -> 0 the smooth forms give the originals exactly at every integer point (a step at the integer itself would
give its midpoint 1/2 there): x < y is y - x - 1/2 > 0, and floor(a / b) = floor((a + 1/2) / b) for b >= 1 (every
divisor in a feature formula is a positive extent or tile size). Equality is the unit box for floats too: exact
float equality holds on a set of measure zero, which no convolution sees. The limit at a finite point is exact only
once tau is small against the spacing of the steps there, and a step of a product of tile sizes can lie 1/2 away
in a quantity of size 1e5: the features of a real conv task match at integer points to ~1e-5 (in log2(1 + x)) at
tau = 1e-12, to ~1e-3 at 1e-10.

Every node is rewritten exactly once, bottom-up, from integers and booleans into float64 reals; there is no fixpoint
to reach, so the pass is a table keyed by node class (`_SMOOTHING`) rather than a `Rewriter` rule set.

`SmoothFormulas` evaluates the smoothed features of a sketch structure as a differentiable PyTorch function of
x' = ln x (Felix substitutes x = e^x', so products of tile sizes become sums). The smoothed DAG has thousands of
nodes, and PyTorch spends ~16 us per node and step on its own dispatch; so the nodes are grouped instead (each
group: nodes of one operation whose operands are already computed), each group is a handful of NumPy calls over
all its nodes and the whole batch, and a hand-written reverse pass runs the groups backwards. A step then costs
hundreds of array operations rather than thousands of PyTorch ones.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..te import expr as E
from .features import F64
from .formulas import FeatureFormulas

# ---------------------------------------------------------------------------------------------------------------
# the rewriting pass


def smooth(e: E.Expr, tau: float) -> E.Expr:
    """`e` with every discontinuous node replaced by its smooth form at width `tau` (float64 throughout)."""
    return smooth_all([e], tau)[0]


def smooth_all(exprs: Sequence[E.Expr], tau: float) -> list[E.Expr]:
    """`smooth` of each expression, rewriting each distinct subexpression once across all of them."""
    smoother = _Smoother(tau)
    return [smoother(e) for e in exprs]


def _const(value) -> E.Const:
    return E.Const(float(value), F64)


def _call(cls: type[E.Call], fn: Callable[[float], float], x: E.Expr) -> E.Expr:
    return _const(fn(x.value)) if type(x) is E.Const else cls(x)


def _over(a: E.Expr, b: E.Expr) -> E.Expr:
    """a / b, as a product when b is a constant (cheaper, and no division to guard)."""
    return a * (1 / b.value) if type(b) is E.Const else a / b


def _shift(e: E.Expr) -> float:
    """Half a unit for operands that only take integer values, none for floats."""
    return 0.0 if E.is_float(e.dtype) else 0.5


class _Smoother:
    """One rewriting of a DAG: smooth forms at width `tau`, each distinct node rewritten once."""

    def __init__(self, tau: float):
        if not tau > 0:
            raise ValueError(f"the smoothing width tau must be positive, got {tau}")
        self.tau = tau
        self.r = math.exp(-2 * math.pi * tau)
        self.done: dict[int, E.Expr] = {}  # id of a node (alive in the caller's formulas) -> its smooth form
        # A node's class and dtype, and its children's smooth forms (by identity) and dtypes -> its smooth form:
        # structurally equal nodes share one form, found without comparing whole subtrees.
        self.forms: dict[object, E.Expr] = {}

    def __call__(self, root: E.Expr) -> E.Expr:
        done, stack = self.done, [root]
        while stack:  # post-order without recursion: formulas can be deeper than Python's stack
            e = stack[-1]
            if id(e) in done:
                stack.pop()
                continue
            todo = [k for k in e.children() if id(k) not in done]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            kids = tuple(done[id(k)] for k in e.children())
            key = (type(e), e.dtype, tuple((id(s), k.dtype) for s, k in zip(kids, e.children()))) if kids else e
            form = self.forms.get(key)
            if form is None:
                rule = _SMOOTHING.get(type(e))
                if rule is None:
                    raise ValueError(f"cannot smooth {type(e).__name__} ({e}): feature formulas use only "
                                     "arithmetic, comparisons, logic, select, casts and floor-like calls")
                form = self.forms[key] = rule(self, e, *kids)
            done[id(e)] = form
        return done[id(root)]

    def step(self, x: E.Expr) -> E.Expr:
        """S(x): the smoothed unit step."""
        return 0.5 + _call(E.Atan, math.atan, x * (1 / self.tau)) * (1 / math.pi)

    def box(self, d: E.Expr) -> E.Expr:
        """The smoothed indicator of -1/2 < d < 1/2."""
        up = _call(E.Atan, math.atan, (d + 0.5) * (1 / self.tau))
        down = _call(E.Atan, math.atan, (d - 0.5) * (1 / self.tau))
        return (up - down) * (1 / math.pi)

    def floor(self, y: E.Expr) -> E.Expr:
        turn = y * (2 * math.pi)
        sin, cos = _call(E.Sin, math.sin, turn), _call(E.Cos, math.cos, turn)
        wave = _call(E.Atan, math.atan, (sin * self.r) / (1.0 - cos * self.r))
        return y - 0.5 + wave * (1 / math.pi)

    def ramp(self, d: E.Expr) -> E.Expr:
        """max(d, 0) as d H(d) with the step smoothed."""
        return d * self.step(d)


def _leaf(s: _Smoother, e: E.Expr) -> E.Expr:
    if type(e) is E.Const:
        return _const(e.value)
    return E.Var(e.name, F64, e.lo, e.hi)


_SMOOTHING: dict[type, Callable[..., E.Expr]] = {
    E.Const: _leaf,
    E.Var: _leaf,
    E.Add: lambda s, e, a, b: a + b,
    E.Sub: lambda s, e, a, b: a - b,
    E.Mul: lambda s, e, a, b: a * b,
    E.Div: lambda s, e, a, b: a / b,
    E.Cast: lambda s, e, a: a,
    E.LT: lambda s, e, a, b: s.step(b - a - _shift(e.a)),
    E.LE: lambda s, e, a, b: s.step(b - a + _shift(e.a)),
    E.EQ: lambda s, e, a, b: s.box(a - b),
    E.NE: lambda s, e, a, b: 1.0 - s.box(a - b),
    E.And: lambda s, e, a, b: a * b,
    E.Or: lambda s, e, a, b: a + b - a * b,
    E.Not: lambda s, e, a: 1.0 - a,
    E.Select: lambda s, e, c, t, f: f + c * (t - f),
    E.Max: lambda s, e, a, b: b + s.ramp(a - b),
    E.Min: lambda s, e, a, b: a - s.ramp(a - b),
    E.FloorDiv: lambda s, e, a, b: s.floor(_over(a + _shift(e.a), b)),
    E.FloorMod: lambda s, e, a, b: a - b * s.floor(_over(a + _shift(e.a), b)),
    E.Floor: lambda s, e, a: s.floor(a),
    E.Ceil: lambda s, e, a: -s.floor(-a),
    E.Round: lambda s, e, a: s.floor(a + 0.5),
    E.Abs: lambda s, e, a: a * (2.0 * s.step(a) - 1.0),
    E.Sin: lambda s, e, a: _call(E.Sin, math.sin, a),
    E.Cos: lambda s, e, a: _call(E.Cos, math.cos, a),
    E.Atan: lambda s, e, a: _call(E.Atan, math.atan, a),
}


# ---------------------------------------------------------------------------------------------------------------
# batched evaluation with gradients

# Below this magnitude a divisor is clamped (keeping its sign): a smoothed count can pass near zero where the exact
# one never does, and 1/0 would poison every gradient that flows through it.
_TINY = 1e-9


class SmoothFormulas:
    """The smoothed features of a symbolic kernel as a differentiable function of ln(schedule variables).

    Calling it with `log_values` of shape (batch, len(variables)), column j holding ln of `variables[j]`, gives
    features of shape (batch, n_stores, n_features) that autograd differentiates with respect to `log_values`.
    `n_nodes` is the number of distinct nodes of the smoothed formulas."""

    def __init__(self, formulas: FeatureFormulas, tau: float = 1.0):
        self.tau = tau
        self.variables = formulas.variables
        self.names, self.stores = formulas.names, formulas.stores
        exprs = [e for row in formulas.rows.rows for e in row]
        self._tape = _Tape(smooth_all(exprs, tau), self.variables)
        self.n_nodes = self._tape.n_rows

    def __call__(self, log_values: torch.Tensor) -> torch.Tensor:
        if log_values.ndim != 2 or log_values.shape[1] != len(self.variables):
            raise ValueError(f"log_values must have shape (batch, {len(self.variables)}) for the variables "
                             f"{list(self.variables)}, got {tuple(log_values.shape)}")
        flat = _Evaluate.apply(torch.exp(log_values.to(torch.float64)), self._tape)
        return flat.reshape(log_values.shape[0], len(self.stores), len(self.names))

    def features_at(self, assignments: dict[str, np.ndarray]) -> np.ndarray:
        """Smoothed features (no gradients) for a batch given as for `FeatureFormulas.evaluate`: each variable's
        name to an array of its values. Shape (batch, n_stores, n_features)."""
        missing = [v for v in self.variables if v not in assignments]
        if missing:
            raise ValueError(f"no values for schedule variables {missing}")
        values = np.stack([np.asarray(assignments[v], np.float64) for v in self.variables], axis=1)
        if values.ndim != 2:
            raise ValueError(f"assignments must be 1-D arrays of one length, got shape {values.shape[::-1]}")
        rows = self._tape.forward(values)[self._tape.outputs]
        return rows.T.reshape(values.shape[0], len(self.stores), len(self.names))


class _Evaluate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values: torch.Tensor, tape: _Tape) -> torch.Tensor:
        rows = tape.forward(values.detach().numpy())
        ctx.tape, ctx.rows = tape, rows
        return torch.from_numpy(rows[tape.outputs].T.copy())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return torch.from_numpy(ctx.tape.backward(ctx.rows, grad.detach().numpy())), None


class _Group:
    """Nodes of one operation, computed together: rows start..stop of the values, from the operand rows `args`
    (one array per operand). `positions` caches, per batch size, the elements the reverse pass scatters to."""

    __slots__ = ("_positions", "args", "op", "start", "stop")

    def __init__(self, op: type, start: int, stop: int, args: tuple[np.ndarray, ...]):
        self.op, self.start, self.stop, self.args = op, start, stop, args
        self._positions: dict[int, tuple[np.ndarray, ...]] = {}

    def positions(self, batch: int) -> tuple[np.ndarray, ...]:
        hit = self._positions.get(batch)
        if hit is None:
            hit = self._positions[batch] = tuple(_elements(rows, batch) for rows in self.args)
        return hit


def _elements(rows: np.ndarray, batch: int) -> np.ndarray:
    """Positions in a flattened (rows, batch) array of every element of `rows`."""
    return (rows[:, None] * batch + np.arange(batch)).ravel()


def _guard(den: np.ndarray) -> np.ndarray:
    return np.where(np.abs(den) < _TINY, np.copysign(_TINY, den), den)


def _divide(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.divide(a, _guard(b), out=out)


def _divide_grads(up: np.ndarray, arg: Callable[[int], np.ndarray], out: np.ndarray) -> tuple[np.ndarray, ...]:
    den = arg(1)
    safe = _guard(den)
    slope = -up * out / safe
    slope[np.abs(den) < _TINY] = 0.0  # the clamp is flat there
    return up / safe, slope


# Each operation a smoothed formula may contain: its value from its operands' rows (written into `out`), and the
# gradients it passes to each operand given its own gradient `up`, its operands (`arg(j)`) and its value.
_FORWARD: dict[type, Callable[..., None]] = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: _divide,
    E.Atan: np.arctan, E.Sin: np.sin, E.Cos: np.cos,
}
_GRADIENTS: dict[type, Callable[..., tuple[np.ndarray, ...]]] = {
    E.Add: lambda up, arg, out: (up, up),
    E.Sub: lambda up, arg, out: (up, -up),
    E.Mul: lambda up, arg, out: (up * arg(1), up * arg(0)),
    E.Div: _divide_grads,
    E.Atan: lambda up, arg, out: (up / (1.0 + arg(0) ** 2),),
    E.Sin: lambda up, arg, out: (up * np.cos(arg(0)),),
    E.Cos: lambda up, arg, out: (-up * np.sin(arg(0)),),
}


class _Tape:
    """The distinct nodes of a smoothed DAG as rows of a (rows, batch) array: constants, then the variables, then
    the groups in an order where every operand precedes its use."""

    def __init__(self, roots: list[E.Expr], variables: tuple[str, ...]):
        nodes, kids, outputs = _distinct(roots)
        column = {v: j for j, v in enumerate(variables)}
        consts = [i for i, e in enumerate(nodes) if type(e) is E.Const]
        row = {i: k for k, i in enumerate(consts)}
        ops = []
        for i, e in enumerate(nodes):
            if type(e) is E.Var:
                if e.name not in column:
                    raise ValueError(f"the smoothed features read {e.name}, which is not among {list(variables)}")
                row[i] = len(consts) + column[e.name]
            elif type(e) is not E.Const:
                if type(e) not in _FORWARD:
                    raise ValueError(f"cannot evaluate {type(e).__name__} in a smoothed formula ({e})")
                ops.append(i)
        self.consts = np.array([nodes[i].value for i in consts], np.float64)
        self.n_vars = len(variables)
        self.groups: list[_Group] = []
        n = len(consts) + len(variables)
        for op, members in _schedule(nodes, kids, ops):
            row.update((i, n + k) for k, i in enumerate(members))
            args = tuple(np.array([row[kids[i][j]] for i in members], np.intp) for j in range(len(kids[members[0]])))
            self.groups.append(_Group(op, n, n + len(members), args))
            n += len(members)
        self.n_rows = n
        self.outputs = np.array([row[i] for i in outputs], np.intp)

    def forward(self, values: np.ndarray) -> np.ndarray:
        """Every row for a batch of the variables' values (batch, variables); shape (rows, batch)."""
        v = np.empty((self.n_rows, values.shape[0]))
        nc = len(self.consts)
        v[:nc] = self.consts[:, None]
        v[nc:nc + self.n_vars] = values.T
        for grp in self.groups:
            _FORWARD[grp.op](*(v.take(rows, axis=0) for rows in grp.args), out=v[grp.start:grp.stop])
        return v

    def backward(self, v: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """d(sum of grad * outputs) / d(values), from the forward rows `v`; grad has shape (batch, roots)."""
        batch = v.shape[1]
        g = np.zeros_like(v)
        flat = g.reshape(-1)
        np.add.at(flat, _elements(self.outputs, batch), grad.T.reshape(-1))
        for grp in reversed(self.groups):
            up = g[grp.start:grp.stop].copy()  # scattering a view of the target itself takes a slow path

            def arg(j: int, grp=grp) -> np.ndarray:
                return v.take(grp.args[j], axis=0)

            sent = _GRADIENTS[grp.op](up, arg, v[grp.start:grp.stop])
            for at, part in zip(grp.positions(batch), sent):
                np.add.at(flat, at, part.reshape(-1))
        nc = len(self.consts)
        return g[nc:nc + self.n_vars].T.copy()


def _distinct(roots: list[E.Expr]) -> tuple[list[E.Expr], list[tuple[int, ...]], list[int]]:
    """The distinct nodes under `roots` (structurally equal ones once) with children before parents, each node's
    children as indices, and the index of each root."""
    index: dict[E.Expr, int] = {}
    nodes: list[E.Expr] = []
    kids: list[tuple[int, ...]] = []
    for root in roots:
        stack = [root]
        while stack:
            e = stack[-1]
            if e in index:
                stack.pop()
                continue
            todo = [k for k in e.children() if k not in index]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            index[e] = len(nodes)
            nodes.append(e)
            kids.append(tuple(index[k] for k in e.children()))
    return nodes, kids, [index[r] for r in roots]


def _schedule(nodes: list[E.Expr], kids: list[tuple[int, ...]], ops: list[int]) -> list[tuple[type, list[int]]]:
    """Groups of same-operation nodes, each computable once the groups before it are: repeatedly run every ready
    node of one operation, the one with the ready node farthest from the roots (list scheduling by critical path;
    a third fewer groups than picking the largest batch, and fewer groups mean fewer array calls). `ops` are in
    topological order."""
    height = dict.fromkeys(ops, 0)  # the longest path of operations above each one
    for i in reversed(ops):
        for k in kids[i]:
            if k in height:
                height[k] = max(height[k], height[i] + 1)
    pending = dict.fromkeys(ops, 0)
    users: dict[int, list[int]] = defaultdict(list)
    for i in ops:
        for k in kids[i]:
            if k in pending:
                pending[i] += 1
                users[k].append(i)
    ready: dict[type, list[int]] = defaultdict(list)
    for i in ops:
        if pending[i] == 0:
            ready[type(nodes[i])].append(i)
    out = []
    while ready:
        op = max(ready, key=lambda t: max(height[i] for i in ready[t]))
        members = ready.pop(op)
        out.append((op, members))
        for i in members:
            for u in users[i]:
                pending[u] -= 1
                if pending[u] == 0:
                    ready[type(nodes[u])].append(u)
    return out
