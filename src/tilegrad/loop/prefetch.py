"""Target lowering: operands that a long reduction loop streams, prefetched a few iterations ahead.

A GEMM's register tile reads one row of its B panel per step of k: a new cache line or two every few cycles,
from L2, L3 or memory, through a hardware prefetcher that stops at each 4 KiB page and does not run far enough
ahead to keep one core's stream busy. `prefetch_streams` gives each innermost serial loop of at least
`MIN_STEPS` iterations (a static extent), for each kernel parameter it reads (never writes) whose index moves by
at least a cache line per iteration, `Intrinsic("prefetch")` calls at the top of its body for the lines that
iteration `DISTANCE` steps later reads (one per distinct line of the inner unrolled and vectorised loops, at most
`MAX_LINES`). The loads themselves are unchanged, so the kernel computes the same; a prefetch past a buffer's end
reads nothing and faults nowhere. Made just before rendering, like loop/dot4.py, so features and bounds read the
plain loops. docs/benchmarks.md (machine E) has the measurements that set DISTANCE.
"""

from __future__ import annotations

import itertools

from ..dtype import itemsize
from ..te import expr as E
from ..te.simplify import simplify
from .ir import Allocate, For, IfThenElse, Intrinsic, Kernel, Seq, Stmt, Store, walk

PREFETCH = "prefetch"  # the intrinsic's name: the renderer spells it
DISTANCE = 16  # iterations ahead: a 128-byte panel row a step, 2 KiB ahead, more than a memory latency's worth
MIN_STEPS = 64  # a loop shorter than this (a window's taps, a channel block's lanes) is not a stream
MAX_LINES = 4  # an iteration reading more distinct lines than this is a gather, not a stream
LINE = 64


def prefetch_streams(k: Kernel) -> Kernel:
    """`k` with the streams of its long reduction loops prefetched; `k` itself where there are none."""
    readonly = set(k.params) - {s.buffer for s in walk(k.body) if isinstance(s, Store)}
    body = _rewrite(k.body, readonly)
    return k if body is k.body else Kernel(k.name, k.params, body, k.dims)


def _rewrite(s: Stmt, readonly: set) -> Stmt:
    if isinstance(s, For):
        body = _rewrite(s.body, readonly)
        if s.kind == "serial" and _long(s.extent) and not _has_serial_loop(body):
            calls = _prefetches(s.var, body, readonly)
            if calls:
                body = Seq((*calls, body))
        return s if body is s.body else For(s.var, s.extent, s.kind, body, s.unroll_if)
    if isinstance(s, Seq):
        stmts = tuple(_rewrite(x, readonly) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)
    if isinstance(s, Allocate):
        body = _rewrite(s.body, readonly)
        return s if body is s.body else Allocate(s.buffer, body)
    if isinstance(s, IfThenElse):
        then = _rewrite(s.then, readonly)
        orelse = None if s.orelse is None else _rewrite(s.orelse, readonly)
        return s if then is s.then and orelse is s.orelse else IfThenElse(s.cond, then, orelse)
    return s


def _long(extent: E.Expr) -> bool:
    """A static extent of at least MIN_STEPS (a tile's guarded tail, a dynamic length: not a known stream)."""
    return type(extent) is E.Const and extent.value >= MIN_STEPS


def _has_serial_loop(s: Stmt) -> bool:
    return any(isinstance(x, For) and x.kind == "serial" for x in walk(s))


def _prefetches(var: E.Var, body: Stmt, readonly: set) -> list[Intrinsic]:
    """The prefetches of the lines iteration var + DISTANCE reads of each streamed read-only parameter."""
    loops = [x for x in walk(body) if isinstance(x, For)]
    inner = {x.var: x.extent.value for x in loops if type(x.extent) is E.Const}
    unknown = {x.var for x in loops} - set(inner)  # bound by a loop of varying extent: no one line to fetch
    calls, seen = [], set()
    for s in walk(body):
        if not isinstance(s, Store):
            continue
        for load in E.loads(s.value):
            if load.buffer not in readonly or load in seen:
                continue
            seen.add(load)
            flat = _flat(load)
            if not unknown & E.free_vars(flat):
                calls += _lines_ahead(load, flat, var, inner)
    return calls


def _lines_ahead(load: E.Load, flat: E.Expr, var: E.Var, inner: dict) -> list[Intrinsic]:
    """One prefetch per distinct line that `load` (its row-major offset `flat`) reads in iteration var + DISTANCE,
    where its index moves by at least a line per iteration and the inner loops it depends on span at most
    MAX_LINES lines."""
    size = itemsize(load.buffer.dtype)
    step = _coefficient(flat, var)
    if step is None or abs(step) * size < LINE:
        return []
    spans = {v: n for v, n in inner.items() if v in E.free_vars(flat)}
    coefficients = {v: _coefficient(flat, v) for v in spans}
    if any(c is None for c in coefficients.values()):
        return []
    first: dict[int, dict] = {}  # line -> the inner loops' values that read it first
    for values in itertools.product(*(range(n) for n in spans.values())):
        point = dict(zip(spans, values))
        line = sum(coefficients[v] * i for v, i in point.items()) * size // LINE
        first.setdefault(line, point)
        if len(first) > MAX_LINES:
            return []
    ahead = {var: var + DISTANCE}
    return [Intrinsic(PREFETCH, ((load.buffer, tuple(simplify(E.substitute(i, {**ahead, **_consts(point)}))
                                                     for i in load.indices)),))
            for point in first.values()]


def _consts(point: dict) -> dict:
    return {v: E.Const(i, E.INDEX) for v, i in point.items()}


def _flat(load: E.Load) -> E.Expr:
    """The load's row-major element offset."""
    flat: E.Expr = E.Const(0, E.INDEX)
    for idx, dim in zip(load.indices, load.buffer.shape):
        flat = flat * dim + idx
    return simplify(flat)


def _coefficient(flat: E.Expr, var: E.Var) -> int | None:
    """How far `flat` moves when `var` grows by one, where that is a constant."""
    moved = simplify(E.substitute(flat, {var: var + 1}) - flat)
    return moved.value if type(moved) is E.Const else None
