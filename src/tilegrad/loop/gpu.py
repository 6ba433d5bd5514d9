"""GPU facts of a loop-IR kernel: the launch shape its bound loops give, the barriers its shared buffers need,
and the check that no thread reads a shared element another thread may still be writing (or the reverse).

Loops bound to one GPU axis in different stages share that axis's index, so the launch extent of an axis is the
largest extent bound to it, and a loop of smaller extent runs on the threads below it. A shared buffer is written
by a producer nest (a cooperative fetch, the partial results of a reduction) and read by the nests after it:
`insert_barriers` puts a barrier before and after each run of such producer nests in a statement sequence, which
orders the writes after the previous iteration's reads and before this iteration's. `check_races` then walks the
program in order (serial loops twice, for what one iteration leaves to the next) and fails on a read of a buffer
written since the last barrier, or a write of one read since then (by this statement too: other threads run it
at the same time), unless the two indices are the same expression (each thread its own element, an in-place
accumulation) or their ranges are disjoint; and on a barrier that only some threads reach.
"""

from __future__ import annotations

import dataclasses

from ..dtype import itemsize
from ..errors import LoweringError
from ..schedule.state import BLOCK_AXES, THREAD_AXES
from ..te import expr as E
from .ir import Allocate, Barrier, For, IfThenElse, Intrinsic, Kernel, Seq, Stmt, Store, seq, walk

GPU_AXES = BLOCK_AXES + THREAD_AXES


@dataclasses.dataclass(frozen=True)
class Launch:
    """Blocks per grid and threads per block, (x, y, z) each."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def launch_of(k: Kernel) -> Launch:
    """The launch that runs every bound loop of `k`: per axis, the largest extent bound to it."""
    dims = dict.fromkeys(GPU_AXES, 1)
    for s in walk(k.body):
        if isinstance(s, For) and s.kind in dims:
            if type(s.extent) is not E.Const:
                raise LoweringError(f"kernel {k.name}: loop {s.var.name} bound to {s.kind} has extent {s.extent}, "
                                    "not an integer; bind the schedule's variables first")
            dims[s.kind] = max(dims[s.kind], int(s.extent.value))
    return Launch(tuple(dims[a] for a in BLOCK_AXES), tuple(dims[a] for a in THREAD_AXES))


def shared_bytes(k: Kernel) -> int:
    """The shared memory one block of `k` holds: every shared buffer at once (a bound, as some are disjoint)."""
    return sum(int(s.buffer.size().value) * itemsize(s.buffer.dtype) for s in walk(k.body)
               if isinstance(s, Allocate) and s.buffer.scope == "shared")


def _shared_stores(s: Stmt) -> set[str]:
    return {x.buffer.name for x in walk(s) if isinstance(x, Store) and x.buffer.scope == "shared"}


def _producer(s: Stmt) -> bool:
    """Whether `s` writes shared buffers and reads none except in place (an accumulation into its own element):
    a nest whose results others read after it."""
    if not _shared_stores(s):
        return False
    for x in walk(s):
        if isinstance(x, Store):
            for ld in E.loads(x.value):
                if ld.buffer.scope == "shared" and (ld.buffer is not x.buffer or ld.indices != x.indices):
                    return False
    return True


def insert_barriers(k: Kernel) -> Kernel:
    """`k` with a barrier before and after each run of statements that write shared buffers."""
    return dataclasses.replace(k, body=_barriers(k.body))


def _barriers(s: Stmt) -> Stmt:
    if isinstance(s, Seq):
        out: list[Stmt] = []
        writing = False
        for x in s.stmts:
            writes = _producer(x)
            if writes != writing:
                out.append(Barrier())
            out.append(x if writes else _barriers(x))
            writing = writes
        if writing:
            out.append(Barrier())
        return seq(out)
    if isinstance(s, (For, Allocate)):
        return dataclasses.replace(s, body=_barriers(s.body))
    if isinstance(s, IfThenElse):
        return dataclasses.replace(s, then=_barriers(s.then),
                                   orelse=None if s.orelse is None else _barriers(s.orelse))
    return s


def rewrite_for_gpu(k: Kernel, warp_shuffles: bool = False) -> Kernel:
    """The rewrites a kernel gets before it is printed for a GPU: reductions as trees (their last steps as warp
    shuffles with `warp_shuffles`, which only a GPU renderer spells), then barriers."""
    return insert_barriers(tree_reductions(k, warp_shuffles))


def tree_reductions(k: Kernel, warp_shuffles: bool = False) -> Kernel:
    """`k` with each serial combine of a shared buffer's partial results into a thread's register (the loop an
    rfactor stage's reader runs over `rf[kr, ...]`, of a power-of-two extent T) done as a tree instead: log2(T)
    steps in which the first s threads combine elements t and t + s in place, a barrier after each, then every
    thread reads element 0 (and waits for the others to have read it). Each thread reads 1 partial result
    instead of T.

    With `warp_shuffles`, in a block of threadIdx.x only, a sum, maximum or minimum of 32-bit or 64-bit numbers
    takes its last min(T, 32) partials out of shared memory in one step: an `Intrinsic("warp_<op><N>")` in
    which lanes 0..N-1 of the first warp combine them by __shfl_down_sync (no barrier between the steps) and
    lane 0 writes element 0; a barrier, then every thread reads it."""
    warp = warp_shuffles and launch_of(k).block[1:] == (1, 1)
    return dataclasses.replace(k, body=_trees(k.body, warp))


def _trees(s: Stmt, warp: bool) -> Stmt:
    if isinstance(s, For):
        tree = _tree(s, warp)
        return tree if tree is not None else dataclasses.replace(s, body=_trees(s.body, warp))
    if isinstance(s, Seq):
        return seq(_trees(x, warp) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_trees(s.body, warp))
    if isinstance(s, IfThenElse):
        return dataclasses.replace(s, then=_trees(s.then, warp),
                                   orelse=None if s.orelse is None else _trees(s.orelse, warp))
    return s


WARP = 32
WARP_COMBINERS = {E.Add: "sum", E.Max: "max", E.Min: "min"}
WARP_DTYPES = ("float32", "float64", "int32", "int64")  # what __shfl_down_sync moves as it is stored


def _warp_combiner(value: E.Expr, acc: E.Load, part: E.Load, dtype: str) -> str | None:
    """"sum", "max" or "min" where `value` is that combine of `acc` and `part` of a dtype a shuffle moves."""
    name = WARP_COMBINERS.get(type(value))
    if name is None or dtype not in WARP_DTYPES or set(value.children()) != {acc, part}:
        return None
    return name


def _tree(loop: For, warp: bool) -> Stmt | None:
    """The tree form of `loop` if it is `for kr in 0..T: acc[i] = combine(acc[i], rf[kr, ...])`, else None."""
    body, n = loop.body, loop.extent
    if loop.kind != "serial" or type(n) is not E.Const or n.value < 2 or n.value & (n.value - 1):
        return None
    if not isinstance(body, Store) or body.buffer.scope != "local":
        return None
    acc = E.Load(body.buffer, body.indices)
    parts = [ld for ld in E.loads(body.value) if ld.buffer.scope == "shared"]
    if len(parts) != 1 or parts[0].indices[0] != loop.var or acc not in E.loads(body.value):
        return None
    rf, rest = parts[0].buffer, parts[0].indices[1:]
    if any(loop.var in E.free_vars(i) for i in rest):
        return None
    combiner = _warp_combiner(body.value, acc, parts[0], rf.dtype) if warp else None
    lanes = min(n.value, WARP) if combiner else 1
    steps: list[Stmt] = []
    width = n.value // 2
    while width >= lanes:
        t = E.Var(f"{rf.name}_t{width}", E.INDEX, 0, width - 1, E.Const(width, E.INDEX))
        mine, other = E.Load(rf, (t, *rest)), E.Load(rf, (t + width, *rest))
        steps += [For(t, E.Const(width, E.INDEX), "threadIdx.x", Store(rf, (t, *rest),
                                                                         _swap(body.value, acc, mine, parts[0], other))),
                  Barrier()]
        width //= 2
    if lanes > 1:
        ends = tuple((rf, (E.Const(i, E.INDEX), *rest)) for i in (0, 1))  # element 0, and 1 for the stride
        steps += [Intrinsic(f"warp_{combiner}{lanes}", ends), Barrier()]
    first = E.Load(rf, (E.Const(0, E.INDEX), *rest))
    # the last barrier keeps the next tree (of the next element of an enclosing loop) from overwriting element 0
    # before every thread has read it
    return seq(steps + [Store(body.buffer, body.indices, _swap(body.value, acc, acc, parts[0], first)), Barrier()])


def _swap(e: E.Expr, a: E.Load, a_new: E.Expr, b: E.Load, b_new: E.Expr) -> E.Expr:
    """`e` with its reads `a` and `b` replaced."""
    def go(x: E.Expr) -> E.Expr:
        if x == a:
            return a_new
        if x == b:
            return b_new
        return E.map_children(x, go)
    return go(e)


def check_races(k: Kernel) -> None:
    """Raise LoweringError, naming the kernel and buffer, where threads of a block may race on a shared buffer
    or a barrier is reached by only some of the block's threads."""
    _Races(k).stmt(k.body, divergent=None)


class _Races:
    def __init__(self, k: Kernel):
        self.k = k
        self.launch = launch_of(k)
        self.thread_vars: set[str] = {s.var.name for s in walk(k.body) if isinstance(s, For) and s.kind in THREAD_AXES}
        self.written: dict[str, set[tuple]] = {}  # shared buffer -> indices stored since the last barrier
        self.read: dict[str, set[tuple]] = {}

    def stmt(self, s: Stmt, divergent: str | None) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, divergent)
        elif isinstance(s, For):
            if s.kind in THREAD_AXES and int(s.extent.value) < self.launch.block[THREAD_AXES.index(s.kind)]:
                divergent = divergent or f"loop {s.var.name} runs on fewer threads than the block has"
            self.stmt(s.body, divergent)
            if s.kind not in GPU_AXES and s.extent != E.Const(1, E.INDEX):  # what one iteration leaves the next
                self.stmt(s.body, divergent)
        elif isinstance(s, Allocate):
            self.stmt(s.body, divergent)
        elif isinstance(s, IfThenElse):
            self.loads(s.cond)
            if {v.name for v in E.free_vars(s.cond)} & self.thread_vars:
                divergent = divergent or f"condition {s.cond} depends on the thread"
            self.stmt(s.then, divergent)
            if s.orelse is not None:
                self.stmt(s.orelse, divergent)
        elif isinstance(s, Barrier):
            if divergent:
                raise LoweringError(f"kernel {self.k.name}: a barrier only some threads reach ({divergent})")
            self.written.clear()
            self.read.clear()
        elif isinstance(s, Intrinsic):  # a warp reduction: lanes read elements 0..N-1, then lane 0 writes 0
            (b, (_, *rest)), _ = s.operands
            lanes = int("".join(ch for ch in s.name if ch.isdigit()))
            first = (E.Const(0, E.INDEX), *rest)
            if any(_clash(r, first) for r in self.read.get(b.name, set())):
                raise LoweringError(f"kernel {self.k.name}: shared buffer {b.name} is reduced by a warp while "
                                    "other threads may still read it (no barrier after the reads)")
            self.loads(E.Load(b, (E.Var(f"{b.name}_lane", E.INDEX, 0, lanes - 1), *rest)))
            # lane 0's write: an index unlike any other thread's, so that every other thread's read of element 0
            # needs a barrier after it
            self.written.setdefault(b.name, set()).add((E.Var(f"{b.name}_lane0", E.INDEX, 0, 0), *rest))
        elif isinstance(s, Store):
            for i in s.indices:
                self.loads(i)
            reads = [ld for ld in E.loads(s.value) if ld.buffer.scope == "shared"]
            self.loads(s.value)
            if s.buffer.scope == "shared":
                name = s.buffer.name
                # this statement's own reads count too: other threads run it at the same time
                if any(_clash(r, s.indices) for r in self.read.get(name, set())):
                    raise LoweringError(f"kernel {self.k.name}: shared buffer {name} is written while other "
                                        "threads may still read it (no barrier after the reads)")
                self.written.setdefault(name, set()).add(s.indices)
            for ld in reads:
                self.read.setdefault(ld.buffer.name, set()).add(ld.indices)

    def loads(self, e: E.Expr) -> None:
        for ld in E.loads(e):
            if ld.buffer.scope != "shared":
                continue
            name = ld.buffer.name
            if any(_clash(w, ld.indices) for w in self.written.get(name, set())):
                raise LoweringError(f"kernel {self.k.name}: shared buffer {name} is read before a barrier orders "
                                    "it after the writes of other threads")
            self.read.setdefault(name, set()).add(ld.indices)


def _clash(a: tuple, b: tuple) -> bool:
    """Whether accesses at indices `a` and `b` may touch one element from two threads: not when they are the
    same expression (each thread its own element) nor when some dimension's ranges are disjoint."""
    if a == b:
        return False
    return not any(x.hi < y.lo or y.hi < x.lo for x, y in zip(a, b))
