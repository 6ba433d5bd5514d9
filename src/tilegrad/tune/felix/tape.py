"""The evaluator of smoothed feature formulas: a tape of arithmetic nodes run forwards and backwards in C.

Felix's search evaluates a structure's smoothed features and their gradient at every Adam step, for a batch of a
few points, on DAGs of thousands of nodes, where a NumPy or PyTorch call per node would cost far more in call
overhead than in arithmetic. Here the tape is flat arrays (operation, operand rows), written from the smoothed
formulas' numbered DAG (`tape_of`, over `te.program`), and one C loop runs every node over the batch. The
interpreter is generic, so it is compiled once (through the build cache) and every tape of every task reuses it.

Rows of the value array are constants, then the variables, then one row per operation node in an order where
operands come first. Divisors below `TINY` in magnitude are clamped (keeping their sign): a smoothed count can
pass near zero where the exact one never does, and 1/0 would poison every gradient through it.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ...runtime.build import build
from ...runtime.kernel import load_library
from ...te import expr as E
from ...te.program import Program

TINY = 1e-9

# Operation codes of the C source below (`_CODES`): 0 +, 1 -, 2 *, 3 /, 4 atan, 5 sin, 6 cos; unary operations
# leave their second operand unused.

_SOURCE = r"""
#include <math.h>
#include <stdint.h>

#define TINY %(tiny)r

static inline double guard(double d) { return fabs(d) < TINY ? copysign(TINY, d) : d; }

/* v: (rows, batch) row-major; node k writes row first + k from rows a[k] and b[k]. */
void tape_forward(int64_t n, const int8_t *op, const int32_t *a, const int32_t *b, int64_t first,
                  double *v, int64_t batch) {
    for (int64_t k = 0; k < n; k++) {
        const double *x = v + (int64_t)a[k] * batch, *y = v + (int64_t)b[k] * batch;
        double *out = v + (first + k) * batch;
        switch (op[k]) {
        case 0: for (int64_t j = 0; j < batch; j++) out[j] = x[j] + y[j]; break;
        case 1: for (int64_t j = 0; j < batch; j++) out[j] = x[j] - y[j]; break;
        case 2: for (int64_t j = 0; j < batch; j++) out[j] = x[j] * y[j]; break;
        case 3: for (int64_t j = 0; j < batch; j++) out[j] = x[j] / guard(y[j]); break;
        case 4: for (int64_t j = 0; j < batch; j++) out[j] = atan(x[j]); break;
        case 5: for (int64_t j = 0; j < batch; j++) out[j] = sin(x[j]); break;
        case 6: for (int64_t j = 0; j < batch; j++) out[j] = cos(x[j]); break;
        }
    }
}

/* g: (rows, batch), holding the gradient of the outputs' rows on entry; accumulates every row's gradient. */
void tape_backward(int64_t n, const int8_t *op, const int32_t *a, const int32_t *b, int64_t first,
                   const double *v, double *g, int64_t batch) {
    for (int64_t k = n - 1; k >= 0; k--) {
        const double *x = v + (int64_t)a[k] * batch, *y = v + (int64_t)b[k] * batch;
        const double *out = v + (first + k) * batch, *up = g + (first + k) * batch;
        double *gx = g + (int64_t)a[k] * batch, *gy = g + (int64_t)b[k] * batch;
        switch (op[k]) {
        case 0: for (int64_t j = 0; j < batch; j++) { gx[j] += up[j]; gy[j] += up[j]; } break;
        case 1: for (int64_t j = 0; j < batch; j++) { gx[j] += up[j]; gy[j] -= up[j]; } break;
        case 2: for (int64_t j = 0; j < batch; j++) { gx[j] += up[j] * y[j]; gy[j] += up[j] * x[j]; } break;
        case 3:
            for (int64_t j = 0; j < batch; j++) {
                double safe = guard(y[j]);
                gx[j] += up[j] / safe;
                if (fabs(y[j]) >= TINY) gy[j] -= up[j] * out[j] / safe;  /* the clamp is flat */
            }
            break;
        case 4: for (int64_t j = 0; j < batch; j++) gx[j] += up[j] / (1.0 + x[j] * x[j]); break;
        case 5: for (int64_t j = 0; j < batch; j++) gx[j] += up[j] * cos(x[j]); break;
        case 6: for (int64_t j = 0; j < batch; j++) gx[j] -= up[j] * sin(x[j]); break;
        }
    }
}
"""


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    lib = load_library(build(_SOURCE % {"tiny": TINY}))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.tape_forward.argtypes = [i64, ptr, ptr, ptr, i64, ptr, i64]
    lib.tape_backward.argtypes = [i64, ptr, ptr, ptr, i64, ptr, ptr, i64]
    lib.tape_forward.restype = lib.tape_backward.restype = None
    return lib


class Tape:
    """A flat program over named variables, as rows: constants, variables, then operations (operands first).
    `tape_of` writes one."""

    def __init__(self, consts: np.ndarray, n_vars: int, op: np.ndarray, a: np.ndarray, b: np.ndarray,
                 outputs: np.ndarray):
        self.consts = consts
        self.n_vars = n_vars
        self.first = len(consts) + n_vars
        self.n_rows = self.first + len(op)
        self._op, self._a, self._b = op, a, b
        self.outputs = outputs
        # The outputs a gradient flows from (constants have none), and whether one row is several of them.
        self._live = np.flatnonzero(outputs >= len(consts))
        self._repeated = len(np.unique(outputs[self._live])) < len(self._live)

    def forward(self, values: np.ndarray) -> np.ndarray:
        """Every row for a batch of the variables' values (batch, variables); shape (rows, batch)."""
        batch = values.shape[0]
        v = np.empty((self.n_rows, batch))
        nc = len(self.consts)
        v[:nc] = self.consts[:, None]
        v[nc:self.first] = values.T
        _library().tape_forward(len(self._op), self._op.ctypes.data, self._a.ctypes.data, self._b.ctypes.data,
                                self.first, v.ctypes.data, batch)
        return v

    def backward(self, v: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """d(sum of grad * outputs) / d(values), from the forward rows `v`; grad has shape (batch, roots)."""
        v = np.ascontiguousarray(v)
        batch = v.shape[1]
        g = np.zeros_like(v)
        rows, grad = self.outputs[self._live], np.asarray(grad, np.float64).T[self._live]
        if self._repeated:  # a row that is several outputs gets the sum of their gradients
            np.add.at(g, rows, grad)
        else:
            g[rows] = grad
        _library().tape_backward(len(self._op), self._op.ctypes.data, self._a.ctypes.data, self._b.ctypes.data,
                                 self.first, v.ctypes.data, g.ctypes.data, batch)
        nc = len(self.consts)
        return g[nc:self.first].T.copy()


def tape_of(program: Program, variables: tuple[str, ...]) -> Tape:
    """The tape of a numbered DAG of float64 arithmetic (constants, `variables`, + - * / atan sin cos), whose
    outputs are the program's: one row per slot, the operations in the slots' order."""
    columns = {v: j for j, v in enumerate(variables)}
    consts = [e.value for e in program.nodes if type(e) is E.Const]
    first = len(consts) + len(variables)
    row: list[int] = []  # per slot, its row
    ops: list[tuple[int, int, int]] = []  # per operation, its code and its operands' slots
    n_consts = 0
    for e, args in zip(program.nodes, program.args):
        t = type(e)
        if t is E.Const:
            row.append(n_consts)
            n_consts += 1
        elif t is E.Var:
            if e.name not in columns:
                raise ValueError(f"the smoothed features read {e.name}, which is not among {list(variables)}")
            row.append(len(consts) + columns[e.name])
        else:
            code = _CODES.get(t)
            if code is None:
                raise ValueError(f"a tape has no operation {t.__name__} ({e})")
            row.append(first + len(ops))
            ops.append((code, args[0], args[-1]))  # a call's unused second operand repeats its first
    rows = np.array(row, np.int64)
    written = np.array(ops, np.int64).reshape(-1, 3)
    return Tape(np.array(consts, np.float64), len(variables), written[:, 0].astype(np.int8),
                rows[written[:, 1]].astype(np.int32), rows[written[:, 2]].astype(np.int32),
                rows[np.array(program.outputs, np.int64)].astype(np.intp))


_CODES = {E.Add: 0, E.Sub: 1, E.Mul: 2, E.Div: 3, E.Atan: 4, E.Sin: 5, E.Cos: 6}
