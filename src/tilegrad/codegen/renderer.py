"""The renderer base: loop IR walked once into source text; each target is a subclass whose spelling is class
attributes (signature, pragmas, type and call names) and a few overrides (buffer allocation, math calls).

Renderers read loop IR only: what a target lacks is rewritten in the loop IR before rendering, so a renderer
stays a printer.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtype import is_unsigned
from ..loop.dot4 import use_dot4
from ..loop.rotations import use_rotations
from ..loop.transpose import use_transposes
from ..loop.prefetch import PREFETCHES, prefetch_streams
from ..loop.ir import Allocate, Barrier, Buffer, For, IfThenElse, Intrinsic, Kernel, Seq, Stmt, Store, walk
from ..loop.simplify import simplify_rendered
from ..loop.tails import version_tails
from ..target import Target, host
from ..te import expr as E
from ..te.simplify import simplify


class Renderer:
    prelude = ""  # helpers every translation unit starts with
    signature = ""  # a kernel's declaration, formatted with its name
    param = ""  # the line binding parameter `index` of C type `type` to its buffer `name`
    dim_param = ""  # the line binding parameter `index` to the dynamic dimension `name` (empty: none taken)
    parallel_for: str | None = None  # the annotation of a parallel loop
    simd: str | None = None  # of a vectorized loop
    unroll: str | None = None  # of an unrolled loop, formatted with the trip count n
    barrier: str | None = None  # the statement a Barrier becomes (GPU targets)
    versions_tails = True  # copy each overshooting tile into a version without guards (loop/tails.py)
    types: dict[str, str] = {}  # the type a value of each dtype computes in
    # Where a buffer element is stored in another type than its value computes in (bfloat16: float32 arithmetic
    # on uint16 bits, each result rounded): the storage type, the function reading an element as a value and the
    # one rounding a value to an element, and the helpers that define both (emitted before the first kernel that
    # uses them).
    storage: dict[str, str] = {}
    widen: dict[str, str] = {}
    narrow: dict[str, str] = {}
    helpers: dict[str, str] = {}
    # Integer types narrower than the C `int` their arithmetic is promoted to: results are cast back, so that
    # they wrap around within an expression as they would in memory.
    promoted: tuple[str, ...] = ()
    # The instructions the target lowering may hand loops to (loop/dot4.py): intrinsic name -> the function
    # called on the operands' addresses, and the helper text defining them (emitted once, before the first
    # kernel that calls one).
    intrinsics: dict[str, str] = {}
    intrinsic_helpers = ""
    prefetches_streams = False  # prefetch what long loops stream (loop/prefetch.py); `intrinsics` spells "prefetch"
    _innermost: E.Var | None = None  # the variable of the innermost loop around what is being rendered
    binary_ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=",
                  E.And: "&&", E.Or: "||", E.BitAnd: "&", E.BitOr: "|", E.BitXor: "^", E.ShiftLeft: "<<",
                  E.ShiftRight: ">>"}

    def __init__(self, target: Target | None = None):
        self.target = target or host()

    def render(self, k: Kernel) -> str:
        """A whole translation unit: the prelude, then the kernel."""
        return self.prelude + self.render_function(k)

    def render_function(self, k: Kernel) -> str:
        """The kernel's function alone, for files that hold many kernels after one prelude. Tiles that overshoot
        their loop are versioned first, so that every full tile renders without bounds checks."""
        if self.versions_tails:
            k = version_tails(k)
        if self.intrinsics:
            k = use_rotations(use_transposes(use_dot4(k)))
        if self.prefetches_streams:
            k = prefetch_streams(k)
        k = simplify_rendered(k)
        self._lines: list[str] = []
        self._depths = _loop_depths(k.body)
        self._scalars = _scalar_reads(k)
        self._parallel_depth = 0
        self._stored: set[str] = set()  # dtypes whose storage helpers the kernel uses
        self._uses_intrinsics = False
        self._function(k)
        helpers = "".join(self.helpers[d] for d in sorted(self._stored))
        return helpers + (self.intrinsic_helpers if self._uses_intrinsics else "") + "\n".join(self._lines) + "\n"

    def _function(self, k: Kernel) -> None:
        """Emit the kernel's function(s)."""
        self._emit(0, self._signature(k) + " {")
        self._params(k)
        self._stmt(k.body, 1)
        self._emit(0, "}")

    def _params(self, k: Kernel) -> None:
        for i, b in enumerate(k.params):
            if self.param:
                self._emit(1, self.param.format(type=self._storage(b.dtype), name=b.name, index=i))
        if k.dims and not self.dim_param:
            raise ValueError(f"kernel {k.name} has dynamic dimensions {[str(d) for d in k.dims]}, which the "
                             f"{type(self).__name__} does not take")
        for i, d in enumerate(k.dims, start=len(k.params)):
            self._emit(1, self.dim_param.format(name=d.name, index=i))
        scalars, self._scalars = self._scalars, {}  # rendered as reads of the buffer, once
        for load, name in scalars.items():
            self._emit(1, f"const {self.types[load.dtype]} {name} = {self.expr(load)};")
        self._scalars = scalars

    def _signature(self, k: Kernel) -> str:
        return self.signature.format(name=k.name)

    def _storage(self, dtype: str) -> str:
        """The type of a buffer element of `dtype`."""
        if dtype in self.storage:
            self._stored.add(dtype)
            return self.storage[dtype]
        return self.types[dtype]

    def _convert(self, table: dict[str, str], dtype: str, text: str) -> str:
        """`text` through the storage conversion of `table` for `dtype`, where it has one."""
        fn = table.get(dtype)
        if fn is None:
            return text
        self._stored.add(dtype)
        return f"{fn}({text})"

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
            value = self._convert(self.narrow, s.buffer.dtype, self.expr(s.value))
            self._emit(ind, f"{s.buffer.name}[{self._flat(s.buffer, s.indices)}] = {value};")
        elif isinstance(s, IfThenElse):
            self._emit(ind, f"if ({self.expr(s.cond)}) {{")
            self._stmt(s.then, ind + 1)
            if s.orelse is not None:
                self._emit(ind, "} else {")
                self._stmt(s.orelse, ind + 1)
            self._emit(ind, "}")
        elif isinstance(s, Allocate):
            self._allocate(s, ind)
        elif isinstance(s, Barrier):
            if self.barrier is not None:  # a serial rendering of a GPU kernel needs none
                self._emit(ind, self.barrier)
        elif isinstance(s, Intrinsic):
            self._uses_intrinsics |= s.name not in PREFETCHES
            args = ", ".join([f"&{b.name}[{self._flat(b, idx)}]" for b, idx in s.operands]
                             + [self.expr(v) for v in s.values])
            self._emit(ind, f"{self.intrinsics[s.name]}({args});")
        else:
            raise TypeError(f"no C rendering for {type(s).__name__}")

    def _for(self, s: For, ind: int) -> None:
        v = s.var.name
        # OpenMP allows no parallel region inside another one's loop body or inside a simd loop: such loops run
        # serially (one pragma for the outermost), as does a simd loop inside a simd loop.
        if s.kind == "parallel" and self._parallel_depth == 0 and self.parallel_for:
            self._emit(ind, self.parallel_for)
        elif s.kind == "vectorized":
            self._emit(ind, self.simd)
        elif s.kind == "unrolled":
            n = s.extent.value if type(s.extent) is E.Const else 8
            self._emit(ind, self.unroll.format(n=n))
        self._emit(ind, f"for (int64_t {v} = 0; {v} < {self.expr(s.extent)}; ++{v}) {{")
        blocks_parallel = s.kind in ("parallel", "vectorized")
        self._parallel_depth += blocks_parallel
        self._in_loop(s.var, self._stmt, s.body, ind + 1)
        self._parallel_depth -= blocks_parallel
        self._emit(ind, "}")

    def _in_loop(self, var: E.Var, render, *args):
        """`render(*args)` with `var` as the innermost loop's variable."""
        outer, self._innermost = self._innermost, var
        try:
            return render(*args)
        finally:
            self._innermost = outer

    def _flat(self, b: Buffer, indices) -> str:
        """The row-major offset of `indices` in `b`, its terms summed from the outermost loop's to the
        innermost's (constants last). In the order of the simplifier's terms (by name), gcc made one induction
        variable per unrolled column of a register tile, where offsets from one base are its addressing mode's
        displacements: a convolution's tile of 14 columns spent its registers and reloads from the stack on them
        (docs/benchmarks.md, machine E)."""
        flat: E.Expr = E.Const(0, E.INDEX)
        stride: E.Expr = E.Const(1, E.INDEX)
        for idx, dim in zip(reversed(indices), reversed(b.shape)):
            flat = flat + idx * stride
            stride = stride * dim
        terms = _terms(simplify(flat))
        if len(terms) == 1:
            return self.expr(terms[0])
        return "(" + " + ".join(self.expr(t) for t in sorted(terms, key=self._depth)) + ")"

    def _depth(self, term: E.Expr) -> float:
        """The nesting depth of the innermost loop whose variable `term` reads; a constant's is infinite."""
        return max((self._depths.get(v, -1) for v in E.free_vars(term)), default=math.inf)

    # -- expressions ------------------------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> str:
        t = type(e)
        if t is E.Const:
            return self._const(e)
        if t is E.Var:
            return e.name
        op = self.binary_ops.get(t)
        if op is not None:
            text = f"({self.expr(e.a)} {op} {self.expr(e.b)})"
            return f"(({self.types[e.dtype]}){text})" if e.dtype in self.promoted else self._rounded(e.dtype, text)
        if t is E.FloorDiv or t is E.FloorMod:
            a, b = self.expr(e.a), self.expr(e.b)
            if (e.a.lo >= 0 and e.b.lo > 0) or is_unsigned(e.dtype):  # unsigned division is floor division
                return f"({a} {'/' if t is E.FloorDiv else '%'} {b})"
            return f"tg_{'floordiv' if t is E.FloorDiv else 'floormod'}({a}, {b})"
        if t is E.Min or t is E.Max:
            return f"TG_{t.__name__.upper()}({self.expr(e.a)}, {self.expr(e.b)})"
        if t is E.Not:
            return f"(!{self.expr(e.a)})"
        if t is E.Select:
            return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"
        if t is E.Cast:
            return self._rounded(e.dtype, f"(({self.types[e.dtype]}){self.expr(e.a)})")
        if t is E.Load:
            scalar = self._scalars.get(e)
            if scalar is not None:
                return scalar
            return self._convert(self.widen, e.dtype, f"{e.buffer.name}[{self._flat(e.buffer, e.indices)}]")
        if isinstance(e, E.Call):
            return self._rounded(e.dtype, self._call(e))
        raise TypeError(f"no C rendering for {t.__name__}")

    def _rounded(self, dtype: str, text: str) -> str:
        """The value `text` rounded to its stored type, where that differs from the type it computes in: a result
        of bfloat16 arithmetic is a bfloat16 value, as it is when each op's result is a bfloat16 tensor."""
        if dtype not in self.narrow:
            return text
        return self._convert(self.widen, dtype, self._convert(self.narrow, dtype, text))

    def _const(self, e: E.Const) -> str:
        v = e.value
        if e.dtype == "bool":
            return "true" if v else "false"
        if E.is_int(e.dtype):
            if v >= 2**63:
                return f"{v}ULL"
            return f"{v}LL" if abs(v) >= 2**31 else str(v)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        else:
            if e.dtype == "bfloat16":  # the constant a bfloat16 tensor would hold
                v = float(np.float32(v).astype("bfloat16"))
            text = repr(float(v)) + ("f" if e.dtype != "float64" else "")
        return text if e.dtype in ("float32", "float64", "bfloat16") else f"(({self.types[e.dtype]}){text})"

    def _allocate(self, s: Allocate, ind: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot allocate buffer {s.buffer.name}")

    def _call(self, e: E.Call) -> str:
        raise NotImplementedError(f"{type(self).__name__} has no spelling for {type(e).__name__}")


def _scalar_reads(k: Kernel) -> dict[E.Load, str]:
    """The kernel's reads of single elements of parameters it never writes (a Where's fill value, a scale):
    {the read: the local it is read into once, at the start}. Read inside a select, `c ? fill[0] : x`, such an
    element kept gcc from vectorising the loop, since a load it cannot prove safe is not made unconditional; at the
    start it is one read, always in bounds (a constant index within the buffer's numeric shape)."""
    params = set(k.params)
    written = {s.buffer for s in walk(k.body) if isinstance(s, Store)}
    written |= {b for s in walk(k.body) if isinstance(s, Intrinsic) and s.name not in PREFETCHES for b, _ in s.operands}
    out: dict[E.Load, str] = {}
    for s in walk(k.body):
        if not isinstance(s, Store):
            continue
        for load in E.loads(s.value):
            b = load.buffer
            if b not in params or b in written or load in out or not _within(load.indices, b.shape):
                continue
            out[load] = f"tg_read_{b.name}" + "".join(f"_{i.value}" for i in load.indices)
    return out


def _within(indices, shape) -> bool:
    """Whether constant `indices` lie within a numeric `shape`."""
    return all(type(i) is E.Const and type(d) is E.Const and 0 <= i.value < d.value for i, d in zip(indices, shape))


def _terms(e: E.Expr) -> list[E.Expr]:
    """The summands of a chain of additions."""
    return [*_terms(e.a), *_terms(e.b)] if type(e) is E.Add else [e]


def _loop_depths(body: Stmt) -> dict[E.Var, int]:
    """Each loop variable of `body` -> how many loops enclose its loop."""
    depths: dict[E.Var, int] = {}

    def visit(s: Stmt, depth: int) -> None:
        if isinstance(s, For):
            depths[s.var] = depth
            visit(s.body, depth + 1)
        elif isinstance(s, Seq):
            for x in s.stmts:
                visit(x, depth)
        elif isinstance(s, Allocate):
            visit(s.body, depth)
        elif isinstance(s, IfThenElse):
            visit(s.then, depth)
            if s.orelse is not None:
                visit(s.orelse, depth)

    visit(body, 0)
    return depths
