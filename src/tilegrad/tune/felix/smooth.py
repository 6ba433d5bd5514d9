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
to reach, so the pass is a table keyed by node class (`_SMOOTHING`) run over the formulas' numbered DAG
(`te.program`) rather than a `Rewriter` rule set. The smooth forms are built with `te.expr`'s constructors, which
fold constants and the identities x + 0, x * 1, x / 1.

`SmoothFormulas` evaluates the smoothed features of a sketch structure as a differentiable PyTorch function of
x' = ln x (Felix substitutes x = e^x', so products of tile sizes become sums). The smoothed DAG has thousands of
nodes, and PyTorch's dispatch per node and step would dominate; so the smoothed formulas are numbered into a flat
tape that a C interpreter runs forwards and backwards over the whole batch (`tape.py`), wrapped as one autograd
function.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ...te import expr as E
from ...te.program import Numbering, Program, number, run
from ..features.extract import F64
from ..features.formulas import FeatureFormulas
from .tape import Tape, tape_of

# ---------------------------------------------------------------------------------------------------------------
# the rewriting pass


def smooth(e: E.Expr, tau: float) -> E.Expr:
    """`e` with every discontinuous node replaced by its smooth form at width `tau` (float64 throughout)."""
    return smooth_all([e], tau)[0]


def smooth_all(exprs: Sequence[E.Expr], tau: float) -> list[E.Expr]:
    """`smooth` of each expression, rewriting each distinct subexpression once across all of them."""
    return _Smoother(tau).rewrite(number(exprs))


def _shift(e: E.Expr) -> float:
    """Half a unit for operands that only take integer values, none for floats."""
    return 0.0 if E.is_float(e.dtype) else 0.5


class _Smoother:
    """One rewriting into smooth forms at width `tau`, float64 expressions built with `te.expr`'s constructors
    (which fold constants; calls of constants are folded here; a Python float operand is a constant). Every node
    built is numbered as it is built (`numbering`), so the tape of the forms has its rows in that order, which fixes
    the order its backward pass sums gradients in."""

    def __init__(self, tau: float):
        if not tau > 0:
            raise ValueError(f"the smoothing width tau must be positive, got {tau}")
        self.tau = tau
        self.r = math.exp(-2 * math.pi * tau)
        self.numbering = Numbering()
        self._number = self.numbering.slot
        self._consts: dict[float, E.Const] = {}

    def rewrite(self, program: Program) -> list[E.Expr]:
        """The smooth forms of the outputs of a numbered DAG: each slot rewritten once, operands first."""
        unknown = {type(e) for e in program.nodes} - set(_SMOOTHING)
        if unknown:
            e = next(e for e in program.nodes if type(e) in unknown)
            raise ValueError(f"cannot smooth {type(e).__name__} ({e}): feature formulas use only arithmetic, "
                             "comparisons, logic, select, casts and floor-like calls")
        return run(program, {}, {cls: functools.partial(rule, self) for cls, rule in _SMOOTHING.items()})

    def add(self, a, b) -> E.Expr:
        e = E.add(self._lift(a), self._lift(b))
        self._number(e)
        return e

    def sub(self, a, b) -> E.Expr:
        e = E.sub(self._lift(a), self._lift(b))
        self._number(e)
        return e

    def mul(self, a, b) -> E.Expr:
        e = E.mul(self._lift(a), self._lift(b))
        self._number(e)
        return e

    def div(self, a, b) -> E.Expr:
        e = E.div(self._lift(a), self._lift(b))
        self._number(e)
        return e

    def call(self, cls: type[E.Call], x: E.Expr) -> E.Expr:
        e = E.Const(_CONST_CALLS[cls](x.value), F64) if type(x) is E.Const else cls(x)
        self._number(e)
        return e

    def _lift(self, x):
        """A Python float operand as one constant node per value (not a new node at every use)."""
        if type(x) is not float:
            return x
        c = self._consts.get(x)
        if c is None:
            c = self._consts[x] = E.Const(x, F64)
        return c

    def leaf(self, e: E.Expr) -> E.Expr:
        form = E.Const(float(e.value), F64) if type(e) is E.Const else E.Var(e.name, F64, e.lo, e.hi)
        self._number(form)
        return form

    def step(self, x):
        """S(x): the smoothed unit step."""
        return self.add(0.5, self.mul(self.call(E.Atan, self.mul(x, 1 / self.tau)), 1 / math.pi))

    def box(self, d):
        """The smoothed indicator of -1/2 < d < 1/2."""
        up = self.call(E.Atan, self.mul(self.add(d, 0.5), 1 / self.tau))
        down = self.call(E.Atan, self.mul(self.sub(d, 0.5), 1 / self.tau))
        return self.mul(self.sub(up, down), 1 / math.pi)

    def floor(self, y):
        turn = self.mul(y, 2 * math.pi)
        sin, cos = self.call(E.Sin, turn), self.call(E.Cos, turn)
        wave = self.call(E.Atan, self.div(self.mul(sin, self.r), self.sub(1.0, self.mul(cos, self.r))))
        return self.add(self.sub(y, 0.5), self.mul(wave, 1 / math.pi))

    def ramp(self, d):
        """max(d, 0) as d H(d) with the step smoothed."""
        return self.mul(d, self.step(d))

    def over(self, a, b):
        """a / b, as a product when b is a constant (cheaper, and no division to guard)."""
        return self.mul(a, 1 / b.value) if type(b) is E.Const else self.div(a, b)

    def neg(self, x):
        return self.sub(0.0, x)


_CONST_CALLS = {E.Atan: math.atan, E.Sin: math.sin, E.Cos: math.cos}

_SMOOTHING: dict[type, Callable[..., E.Expr]] = {
    E.Const: lambda s, e: s.leaf(e),
    E.Var: lambda s, e: s.leaf(e),
    E.Add: lambda s, e, a, b: s.add(a, b),
    E.Sub: lambda s, e, a, b: s.sub(a, b),
    E.Mul: lambda s, e, a, b: s.mul(a, b),
    E.Div: lambda s, e, a, b: s.div(a, b),
    E.Cast: lambda s, e, a: a,
    E.LT: lambda s, e, a, b: s.step(s.sub(s.sub(b, a), _shift(e.a))),
    E.LE: lambda s, e, a, b: s.step(s.add(s.sub(b, a), _shift(e.a))),
    E.EQ: lambda s, e, a, b: s.box(s.sub(a, b)),
    E.NE: lambda s, e, a, b: s.sub(1.0, s.box(s.sub(a, b))),
    E.And: lambda s, e, a, b: s.mul(a, b),
    E.Or: lambda s, e, a, b: s.sub(s.add(a, b), s.mul(a, b)),
    E.Not: lambda s, e, a: s.sub(1.0, a),
    E.Select: lambda s, e, c, t, f: s.add(f, s.mul(c, s.sub(t, f))),
    E.Max: lambda s, e, a, b: s.add(b, s.ramp(s.sub(a, b))),
    E.Min: lambda s, e, a, b: s.sub(a, s.ramp(s.sub(a, b))),
    E.FloorDiv: lambda s, e, a, b: s.floor(s.over(s.add(a, _shift(e.a)), b)),
    E.FloorMod: lambda s, e, a, b: s.sub(a, s.mul(b, s.floor(s.over(s.add(a, _shift(e.a)), b)))),
    E.Floor: lambda s, e, a: s.floor(a),
    E.Ceil: lambda s, e, a: s.neg(s.floor(s.neg(a))),
    E.Round: lambda s, e, a: s.floor(s.add(a, 0.5)),
    E.Abs: lambda s, e, a: s.mul(a, s.sub(s.mul(2.0, s.step(a)), 1.0)),
    E.Sin: lambda s, e, a: s.call(E.Sin, a),
    E.Cos: lambda s, e, a: s.call(E.Cos, a),
    E.Atan: lambda s, e, a: s.call(E.Atan, a),
}


# ---------------------------------------------------------------------------------------------------------------
# batched evaluation with gradients

class SmoothFormulas:
    """The smoothed features of a symbolic kernel as a differentiable function of ln(schedule variables).

    Calling it with `log_values` of shape (batch, len(variables)), column j holding ln of `variables[j]`, gives
    features of shape (batch, n_stores, n_features) that autograd differentiates with respect to `log_values`.
    `n_nodes` is the number of distinct nodes of the smoothed formulas."""

    def __init__(self, formulas: FeatureFormulas, tau: float = 1.0):
        self.tau = tau
        self.variables = formulas.variables
        self.names, self.stores = formulas.names, formulas.stores
        smoother = _Smoother(tau)
        forms = smoother.rewrite(formulas.dag)
        self._tape = tape_of(smoother.numbering.program(forms), self.variables)
        self.n_nodes = self._tape.n_rows

    def __call__(self, log_values: torch.Tensor) -> torch.Tensor:
        if log_values.ndim != 2 or log_values.shape[1] != len(self.variables):
            raise ValueError(f"log_values must have shape (batch, {len(self.variables)}) for the variables "
                             f"{list(self.variables)}, got {tuple(log_values.shape)}")
        flat = _Evaluate.apply(torch.exp(log_values.to(torch.float64)), self._tape)
        return flat.reshape(log_values.shape[0], len(self.stores), len(self.names))

    def value_and_vjp(self, log_values: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """`__call__` in NumPy, for the search's inner loop: the features at `log_values` (batch, variables), and
        the function taking a gradient with respect to them to the gradient with respect to `log_values`."""
        values = np.exp(np.asarray(log_values, np.float64))
        rows = self._tape.forward(values)
        shape = (len(values), len(self.stores), len(self.names))

        def vjp(grad: np.ndarray) -> np.ndarray:
            return self._tape.backward(rows, grad.reshape(len(values), -1)) * values

        return rows[self._tape.outputs].T.reshape(shape), vjp

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
    def forward(ctx, values: torch.Tensor, tape: Tape) -> torch.Tensor:
        rows = tape.forward(values.detach().numpy())
        ctx.tape, ctx.rows = tape, rows
        return torch.from_numpy(rows[tape.outputs].T.copy())

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return torch.from_numpy(ctx.tape.backward(ctx.rows, grad.detach().numpy())), None
