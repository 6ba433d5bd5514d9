"""Target lowering: operands that a long reduction loop streams, prefetched a few iterations ahead.

A GEMM's register tile reads one row of its B panel per step of k: a new cache line or two every few cycles,
from L2, L3 or memory, through a hardware prefetcher that stops at each 4 KiB page and does not run far enough
ahead to keep one core's stream busy. A direct convolution reads its weights the same way, one vector per output
channel block per step of its reduction, but over a nest of loops (input channel blocks, channels, window rows,
columns) whose weights lie in that order, one contiguous stream. `prefetch_streams` gives each innermost serial
loop, for each kernel parameter it reads (never writes; by a load, or through an intrinsic's operand: the int8
GEMM's weights, which loop/dot4.py's dot product reads by address) whose index moves by at least a cache line
per iteration and then on contiguously through the perfectly nested serial loops around it for at least
`MIN_STEPS` steps in all (static extents), `Intrinsic("prefetch")` calls at the top of its body for the lines
that the step `DISTANCE` steps later reads (one per distinct line of the inner unrolled and vectorised loops, at
most `MAX_LINES`).

A GEMM's tiles of one column chunk read the same block of B one after another, each from L2 but the first, which
waits on memory for the whole block. Where the loops around a single-loop stream walk such blocks in turn (the
block's base the same for R >= 2 consecutive tiles, then one step further, and so on), each tile also brings
into L2 its R-th of the next block, a line per iteration of its first steps (`Intrinsic("prefetch_l2")`), so
that the next chunk's first tile finds its block there too. A stream through a nest of short loops (a direct
convolution's weights) is left out: prefetched so, from its innermost loop or from an outer one, ResNet-50 and
DCGAN ran slower.

The loads themselves are unchanged, so the kernel computes the same; a prefetch past a buffer's end reads nothing
and faults nowhere. Made just before rendering, like loop/dot4.py, so features and bounds read the plain loops.
docs/benchmarks.md (machine E) has the measurements that set DISTANCE.
"""

from __future__ import annotations

import itertools

from ..dtype import itemsize
from ..errors import ExprError
from ..te import expr as E
from ..te.evaluate import evaluate
from ..te.simplify import simplify
from .ir import Allocate, For, IfThenElse, Intrinsic, Kernel, Seq, Stmt, Store, walk

PREFETCH = "prefetch"  # the intrinsic's name: the renderer spells it
PREFETCH_L2 = "prefetch_l2"  # the same into L2 only: what the next tiles read, not this one
PREFETCHES = (PREFETCH, PREFETCH_L2)
MAX_TILES_SEEN = 256  # tiles whose block base is evaluated to find how the tiles walk the blocks
DISTANCE = 16  # iterations ahead: a 128-byte panel row a step, 2 KiB ahead, more than a memory latency's worth
MIN_STEPS = 64  # a loop shorter than this (a window's taps, a channel block's lanes) is not a stream
MAX_LINES = 4  # an iteration reading more distinct lines than this is a gather, not a stream
LINE = 64


def prefetch_streams(k: Kernel) -> Kernel:
    """`k` with the streams of its long reduction loops prefetched; `k` itself where there are none."""
    written = {s.buffer for s in walk(k.body) if isinstance(s, Store)}
    written |= {s.operands[0][0] for s in walk(k.body) if isinstance(s, Intrinsic) and s.name not in PREFETCHES}
    readonly = set(k.params) - written
    body = _rewrite(k.body, readonly)
    return k if body is k.body else Kernel(k.name, k.params, body, k.dims)


def _rewrite(s: Stmt, readonly: set, nest: tuple[For, ...] = (), around: tuple[For, ...] = ()) -> Stmt:
    """`s` with its streams prefetched; `nest`: the serial loops of static extent that `s` is the whole body of,
    innermost last; `around`: every loop around `s`, outermost first."""
    if isinstance(s, For):
        serial = s.kind == "serial" and type(s.extent) is E.Const
        body = _rewrite(s.body, readonly, (*nest, s) if serial else (), (*around, s))
        if serial and not _has_serial_loop(body):
            calls = _prefetches((*nest, s), body, readonly, around[:len(around) - len(nest)])
            if calls:
                body = Seq((*calls, body))
        return s if body is s.body else For(s.var, s.extent, s.kind, body, s.unroll_if)
    if isinstance(s, Seq):
        stmts = tuple(_rewrite(x, readonly, around=around) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)
    if isinstance(s, Allocate):
        body = _rewrite(s.body, readonly, around=around)
        return s if body is s.body else Allocate(s.buffer, body)
    if isinstance(s, IfThenElse):
        then = _rewrite(s.then, readonly, around=around)
        orelse = None if s.orelse is None else _rewrite(s.orelse, readonly, around=around)
        return s if then is s.then and orelse is s.orelse else IfThenElse(s.cond, then, orelse)
    return s


def _has_serial_loop(s: Stmt) -> bool:
    return any(isinstance(x, For) and x.kind == "serial" for x in walk(s))


def _prefetches(nest: tuple[For, ...], body: Stmt, readonly: set, outer: tuple[For, ...]) -> list[Stmt]:
    """The prefetches of the lines that the step DISTANCE steps ahead in the innermost loop of `nest` reads, of
    each read-only parameter that the nest streams, and of this tile's share of the next block (`_next_block`);
    `outer`: the loops around the nest."""
    loops = [x for x in walk(body) if isinstance(x, For)]
    inner = {x.var: x.extent.value for x in loops if type(x.extent) is E.Const}
    unknown = {x.var for x in loops} - set(inner)  # bound by a loop of varying extent: no one line to fetch
    calls, seen, blocks = [], set(), set()
    for load in _reads(body):
        if load.buffer not in readonly or load in seen:
            continue
        seen.add(load)
        flat = simplify(E.flat_index(load.buffer, load.indices))
        if unknown & E.free_vars(flat):
            continue
        var, steps = _stream(flat, nest, itemsize(load.buffer.dtype))
        if steps >= MIN_STEPS:
            calls += _lines_ahead(load, flat, var, inner)
            if len(nest) == 1 and load.buffer not in blocks:
                blocks.add(load.buffer)
                reads = [simplify(E.flat_index(x.buffer, x.indices)) for x in _reads(body) if x.buffer is load.buffer]
                calls += _next_block(load.buffer, reads, nest[0], inner, outer)
    return calls


def _reads(body: Stmt):
    """The elements `body` reads: its stores' loads, and the operands its intrinsics read from (loop/dot4.py's
    dot product: an int8 GEMM's weights, read through their address; its first operand is the sum it writes)."""
    for s in walk(body):
        if isinstance(s, Store):
            yield from E.loads(s.value)
        elif isinstance(s, Intrinsic) and s.name not in PREFETCHES:
            for buffer, indices in s.operands[1:]:
                yield E.Load(buffer, indices)


def _stream(flat: E.Expr, nest: tuple[For, ...], size: int) -> tuple[E.Var | None, int]:
    """The loop of `nest` whose step moves `flat` (an offset in elements of `size` bytes) along a stream, and how
    many steps of the nest read it as one contiguous stream: the innermost loop that iterates moves the offset by
    a line or more, and each loop around it by exactly the extent of the stream inside it, as a direct
    convolution's weights in the order of its reduction loops. (None, 0) where the innermost step moves less."""
    loops = [loop for loop in reversed(nest) if loop.extent.value > 1]
    if not loops:
        return None, 0
    stride = _coefficient(flat, loops[0].var)
    if stride is None or abs(stride) * size < LINE:
        return None, 0
    steps = 1
    for loop in loops:
        if _coefficient(flat, loop.var) != stride * steps:
            break
        steps *= loop.extent.value
    return loops[0].var, steps


def _lines_ahead(load: E.Load, flat: E.Expr, var: E.Var, inner: dict) -> list[Intrinsic]:
    """One prefetch per distinct line that `load` (its row-major offset `flat`) reads DISTANCE steps of `var`
    ahead, where the inner loops it depends on span at most MAX_LINES lines."""
    size = itemsize(load.buffer.dtype)
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


def _next_block(buffer, flats: list[E.Expr], stream: For, inner: dict, outer: tuple[For, ...]) -> list[Stmt]:
    """For a `buffer` that the tile reads at the offsets `flats` over `stream` and the loops `inner` inside it, and
    that the tiles of `outer` read in blocks (`_block_walk`): this tile's share of the next block prefetched into
    L2, a line per step of the stream, at its first steps. Nothing where the tiles do not walk blocks so, or where
    a share has more lines than the stream has steps."""
    size = itemsize(buffer.dtype)
    spans = {stream.var: stream.extent.value, **inner}
    base = _base(flats[0], spans)
    top = 0  # the block's last element, from its first
    for flat in flats:
        first = simplify(_base(flat, spans) - base)
        moving = {v: _coefficient(flat, v) for v in spans if v in E.free_vars(flat)}
        if type(first) is not E.Const or first.value < 0 or any(c is None or c < 0 for c in moving.values()):
            return []
        top = max(top, first.value + sum(c * (spans[v] - 1) for v, c in moving.items()))
    walked = _block_walk(base, outer)
    if walked is None:
        return []
    reuse, step, tile = walked
    lines = -(-(top + 1) * size // LINE)
    share = -(-lines // reuse)
    if share > stream.extent.value:
        return []
    per_line = LINE // size
    line = simplify(E.floormod(tile, reuse) * share + stream.var)  # of the next block
    index = (*(E.Const(0, E.INDEX) for _ in buffer.shape[1:]), simplify(base + step + line * per_line))
    return [IfThenElse((stream.var < share) & (line < lines), Intrinsic(PREFETCH_L2, ((buffer, index),)))]


def _base(flat: E.Expr, spans: dict) -> E.Expr:
    """`flat` at the tile's first element: every loop of the tile at 0."""
    return simplify(E.substitute(flat, {v: E.Const(0, E.INDEX) for v in spans}))


def _block_walk(base: E.Expr, outer: tuple[For, ...]) -> tuple[int, int, E.Expr] | None:
    """How the tiles of the loops `outer` (in their order) walk the blocks whose first element is `base`: R >= 2
    tiles on one block, then R on the block `step` elements further, and so on, as (R, step, the tile's number);
    None where they do not (a base that changes each tile, or irregularly), checked over the first tiles."""
    if not outer or any(type(x.extent) is not E.Const for x in outer):
        return None
    variables = [x.var for x in outer]
    first = itertools.islice(itertools.product(*(range(x.extent.value) for x in outer)), MAX_TILES_SEEN)
    try:
        bases = [evaluate(base, dict(zip(variables, values))) for values in first]
    except ExprError:  # a variable of a loop that is not around the tile
        return None
    reuse = next((t for t, b in enumerate(bases) if b != bases[0]), None)
    if reuse is None or reuse < 2:
        return None
    step = bases[reuse] - bases[0]
    if step <= 0 or any(b != bases[0] + (t // reuse) * step for t, b in enumerate(bases)):
        return None
    number: E.Expr = E.Const(0, E.INDEX)
    for x in outer:
        number = number * x.extent.value + x.var
    return reuse, step, number


def _consts(point: dict) -> dict:
    return {v: E.Const(i, E.INDEX) for v, i in point.items()}


def _coefficient(flat: E.Expr, var: E.Var) -> int | None:
    """How far `flat` moves when `var` grows by one, where that is a constant."""
    moved = simplify(E.substitute(flat, {var: var + 1}) - flat)
    return moved.value if type(moved) is E.Const else None
