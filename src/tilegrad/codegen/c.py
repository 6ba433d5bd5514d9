"""Loop IR to C99 (GNU C) with OpenMP: a printer, with target differences as class attributes.

The kernel ABI is `void name(void** args)`: args[i] is the data pointer of parameter i. Multi-dimensional
indices are flattened here with row-major strides. Parallel loops become `omp parallel for` (only the outermost
of nested ones), vectorized loops `omp simd`, unrolled loops `GCC unroll`.
"""

from __future__ import annotations

import math

from ..te import expr as E
from ..te.simplify import simplify
from ..loop.ir import Allocate, Buffer, For, IfThenElse, Kernel, Seq, Stmt, Store

PRELUDE = """\
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <math.h>
static inline int64_t tg_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tg_floormod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
#include <string.h>
/* exp for float32 that gcc can vectorise (libm's expf is a scalar call): Cody-Waite range reduction to
   [-ln2/2, ln2/2], a degree-6 polynomial (Cephes), and 2^n built in the exponent bits. About 1 ulp; results below
   2^-126 flush to zero. Rounding to nearest uses the 1.5 * 2^23 trick, which vectorises where floorf does not. */
static inline float tg_expf(float x) {
  float c = x < 88.7228390520683f ? x : 88.7228390520683f;
  c = c > -87.0f ? c : -87.0f;
  float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + r + 1.0f;
  int32_t bits = ((int32_t)n + 126) << 23;
  float half_scale;
  memcpy(&half_scale, &bits, sizeof half_scale);
  float out = (y * half_scale) * 2.0f;
  out = x < -87.0f ? 0.0f : out;
  return x != x ? x : out;
}
/* tanh: the odd Taylor series (to x^15, error < 1e-7) below 0.55, else 1 - 2 / (exp(2|x|) + 1); and erf: the
   Taylor series (to x^13) below 0.5, else Abramowitz & Stegun 7.1.26 (relative error < 3e-7). Both branches are
   computed and one is selected, so gcc vectorises them like tg_expf. */
static inline float tg_tanhf(float x) {
  float a = x < 0.0f ? -x : x;
  float x2 = x * x;
  float small = x * (((((((-0.0014558343870513183f * x2
      + 0.003592128036572481f) * x2
      + -0.008863235529902197f) * x2
      + 0.021869488536155203f) * x2
      + -0.05396825396825397f) * x2
      + 0.13333333333333333f) * x2
      + -0.3333333333333333f) * x2
      + 1.0f);
  float e = tg_expf(2.0f * (a < 10.0f ? a : 10.0f));
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = x < 0.0f ? -large : large;
  return x != x ? x : a < 0.55f ? small : large;
}
static inline float tg_erff(float x) {
  float a = x < 0.0f ? -x : x;
  float x2 = x * x;
  float small = x * ((((((0.00012055332981789664f * x2
      + -0.0008548327023450852f) * x2
      + 0.005223977625442188f) * x2
      + -0.026866170645131252f) * x2
      + 0.11283791670955126f) * x2
      + -0.37612638903183754f) * x2
      + 1.1283791670955126f);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
  float large = 1.0f - poly * tg_expf(-(a < 10.0f ? a * a : 100.0f));
  large = x < 0.0f ? -large : large;
  return x != x ? x : a < 0.5f ? small : large;
}
#define TG_MIN(a, b) ({ __typeof__(a) _x = (a); __typeof__(b) _y = (b); _x < _y ? _x : _y; })
#define TG_MAX(a, b) ({ __typeof__(a) _x = (a); __typeof__(b) _y = (b); _x > _y ? _x : _y; })
"""


class CRenderer:
    signature = "void {name}(void** args)"
    parallel_for = "#pragma omp parallel for"
    simd = "#pragma omp simd"
    unroll = "#pragma GCC unroll {n}"
    stack_limit_bytes = 64 * 1024  # larger local buffers go to the heap
    alignment = 64
    vector_bits = 512
    types = {"float32": "float", "float64": "double", "float16": "_Float16", "int8": "int8_t", "uint8": "uint8_t",
             "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "bool": "bool"}
    calls = {E.Exp: "exp", E.Log: "log", E.Sqrt: "sqrt", E.Tanh: "tanh", E.Erf: "erf", E.Sin: "sin", E.Cos: "cos",
             E.Floor: "floor", E.Ceil: "ceil", E.Round: "nearbyint", E.Pow: "pow", E.Abs: "fabs",
             E.Rsqrt: None, E.Sigmoid: None}
    binary_ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=",
                  E.And: "&&", E.Or: "||"}

    def render(self, k: Kernel) -> str:
        return PRELUDE + self.render_function(k)

    def render_function(self, k: Kernel) -> str:
        """The kernel's function alone, for files that hold many kernels after one prelude."""
        self._lines: list[str] = []
        self._parallel_depth = 0
        self._emit(0, self.signature.format(name=k.name) + " {")
        for i, b in enumerate(k.params):
            t = self.types[b.dtype]
            self._emit(1, f"{t}* restrict {b.name} = ({t}*)args[{i}];")
        self._stmt(k.body, 1)
        self._emit(0, "}")
        return "\n".join(self._lines) + "\n"

    def _emit(self, indent: int, text: str) -> None:
        self._lines.append("  " * indent + text)

    # -- statements -------------------------------------------------------------------------------------------
    def _stmt(self, s: Stmt, ind: int) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self._stmt(x, ind)
        elif isinstance(s, For):
            self._for(s, ind)
        elif isinstance(s, Store):
            self._emit(ind, f"{s.buffer.name}[{self._flat(s.buffer, s.indices)}] = {self.expr(s.value)};")
        elif isinstance(s, IfThenElse):
            self._emit(ind, f"if ({self.expr(s.cond)}) {{")
            self._stmt(s.then, ind + 1)
            if s.orelse is not None:
                self._emit(ind, "} else {")
                self._stmt(s.orelse, ind + 1)
            self._emit(ind, "}")
        elif isinstance(s, Allocate):
            self._allocate(s, ind)
        else:
            raise TypeError(f"no C rendering for {type(s).__name__}")

    def _for(self, s: For, ind: int) -> None:
        v = s.var.name
        # OpenMP allows no parallel region inside another one's loop body or inside a simd loop: such loops run
        # serially (one pragma for the outermost), as does a simd loop inside a simd loop.
        if s.kind == "parallel" and self._parallel_depth == 0:
            self._emit(ind, self.parallel_for)
        elif s.kind == "vectorized":
            self._emit(ind, self.simd)
        elif s.kind == "unrolled":
            n = s.extent.value if type(s.extent) is E.Const else 8
            self._emit(ind, self.unroll.format(n=n))
        self._emit(ind, f"for (int64_t {v} = 0; {v} < {self.expr(s.extent)}; ++{v}) {{")
        blocks_parallel = s.kind in ("parallel", "vectorized")
        self._parallel_depth += blocks_parallel
        self._stmt(s.body, ind + 1)
        self._parallel_depth -= blocks_parallel
        self._emit(ind, "}")

    def _allocate(self, s: Allocate, ind: int) -> None:
        b = s.buffer
        t = self.types[b.dtype]
        size = b.size()
        if type(size) is not E.Const:
            raise ValueError(f"buffer {b.name} has a symbolic size {size}; bind the schedule's variables first")
        nbytes = size.value * _itemsize(b.dtype)
        if b.scope == "local" and nbytes <= self.stack_limit_bytes:
            self._emit(ind, f"{t} {b.name}[{size.value}] __attribute__((aligned({self.alignment})));")
            self._stmt(s.body, ind)
            return
        # Allocated once per calling thread and kept: a buffer allocated and freed per call above glibc's mmap
        # threshold is mapped afresh each call, and faulting its zeroed pages in can cost more than the kernel.
        rounded = -(-nbytes // self.alignment) * self.alignment
        kept = f"tg_kept_{b.name}"
        self._emit(ind, f"static __thread {t}* {kept};")
        self._emit(ind, f"if (!{kept}) {kept} = ({t}*)aligned_alloc({self.alignment}, {rounded});")
        self._emit(ind, f"{t}* restrict {b.name} = {kept};")
        self._stmt(s.body, ind)

    def _flat(self, b: Buffer, indices) -> str:
        flat: E.Expr = E.Const(0, E.INDEX)
        stride: E.Expr = E.Const(1, E.INDEX)
        for idx, dim in zip(reversed(indices), reversed(b.shape)):
            flat = flat + idx * stride
            stride = stride * dim
        return self.expr(simplify(flat))

    # -- expressions ------------------------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> str:
        t = type(e)
        if t is E.Const:
            return self._const(e)
        if t is E.Var:
            return e.name
        op = self.binary_ops.get(t)
        if op is not None:
            return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if t is E.FloorDiv or t is E.FloorMod:
            a, b = self.expr(e.a), self.expr(e.b)
            if e.a.lo >= 0 and e.b.lo > 0:
                return f"({a} {'/' if t is E.FloorDiv else '%'} {b})"
            return f"tg_{'floordiv' if t is E.FloorDiv else 'floormod'}({a}, {b})"
        if t is E.Min or t is E.Max:
            return f"TG_{t.__name__.upper()}({self.expr(e.a)}, {self.expr(e.b)})"
        if t is E.Not:
            return f"(!{self.expr(e.a)})"
        if t is E.Select:
            return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"
        if t is E.Cast:
            return f"(({self.types[e.dtype]}){self.expr(e.a)})"
        if t is E.Load:
            return f"{e.buffer.name}[{self._flat(e.buffer, e.indices)}]"
        if isinstance(e, E.Call):
            return self._call(e)
        raise TypeError(f"no C rendering for {t.__name__}")

    def _const(self, e: E.Const) -> str:
        v = e.value
        if e.dtype == "bool":
            return "true" if v else "false"
        if E.is_int(e.dtype):
            return f"{v}LL" if abs(v) >= 2**31 else str(v)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        else:
            text = repr(float(v)) + ("f" if e.dtype != "float64" else "")
        return text if e.dtype in ("float32", "float64") else f"(({self.types[e.dtype]}){text})"

    def _call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        if E.is_int(e.dtype):  # only abs takes integers
            return f"llabs({args[0]})"
        suffix = "" if e.dtype == "float64" else "f"
        if e.dtype == "float16":
            args = [f"((float){a})" for a in args]
        t = type(e)
        exp = "tg_expf" if e.dtype != "float64" else "exp"
        if t is E.Rsqrt:
            text = f"(1.0{suffix} / sqrt{suffix}({args[0]}))"
        elif t is E.Sigmoid:
            text = f"(1.0{suffix} / (1.0{suffix} + {exp}(-{args[0]})))"
        elif t is E.Exp:
            text = f"{exp}({args[0]})"
        elif t in (E.Tanh, E.Erf) and e.dtype != "float64":
            text = f"tg_{self.calls[t]}f({args[0]})"
        else:
            text = f"{self.calls[t]}{suffix}({', '.join(args)})"
        return f"((_Float16){text})" if e.dtype == "float16" else text


def _itemsize(dtype: str) -> int:
    return {"float32": 4, "float64": 8, "float16": 2, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8,
            "bool": 1}[dtype]


def render_c(k: Kernel) -> str:
    """C source of kernel `k`."""
    return CRenderer().render(k)
