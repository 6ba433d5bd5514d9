"""How one store touches memory: its loop nest, the index maps of its accesses, footprints and reuse.

Everything here is *semantic*: an index is probed at points of the loop nest (every loop at 0, one loop at 1 or at
its last value) by substituting the loop variables, never read off the shape of its expression. A concrete program
and a symbolic one substituted with the same parameters compute the same index functions, so these quantities agree
exactly even where the simplifier printed the two indices differently (`i*T + j` with T = 1 is `i + j`).

Decisions on symbolic values are `E.select`s, so a symbolic nest yields formulas of the schedule variables and a
concrete nest folds to constants as it is built.
"""

from __future__ import annotations

import dataclasses

from ...loop.ir import Buffer
from ...te import expr as E

ZERO = E.Const(0, E.INDEX)
ONE = E.Const(1, E.INDEX)
CACHE_LINE = 64  # bytes


@dataclasses.dataclass(frozen=True)
class NestLoop:
    """A loop around a store: `unrolled` is a boolean expression (a symbolic program's auto-unroll condition)."""

    var: E.Var
    extent: E.Expr
    kind: str
    unrolled: E.Expr


def ind(cond: E.Expr) -> E.Expr:
    """1 where `cond` holds, else 0 (an integer)."""
    return E.select(cond, ONE, ZERO)


def absolute(x: E.Expr) -> E.Expr:
    return E.maximum(x, ZERO - x)


def product(xs) -> E.Expr:
    out = ONE
    for x in xs:
        out = out * x
    return out


def total(xs) -> E.Expr:
    out = ZERO
    for x in xs:
        out = out + x
    return out


def has_load(e: E.Expr) -> bool:
    stack = [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Load:
            return True
        stack.extend(x.children())
    return False


def elem_bytes(dtype: str) -> int:
    if dtype == "bool":
        return 1
    return max(1, int("".join(ch for ch in dtype if ch.isdigit()) or 8) // 8)


class Nest:
    """The loops around one store, outermost first, and index probing at points of that nest."""

    def __init__(self, loops: tuple[NestLoop, ...]):
        self.loops = loops
        self.names = {lp.var.name: i for i, lp in enumerate(loops)}
        self.extents = tuple(lp.extent for lp in loops)
        self.trips = product(self.extents)
        self._maps: dict[E.Expr, IndexMap] = {}

    def inner_product(self, level: int) -> E.Expr:
        """Iterations of the loops from `level` inwards (1 when `level` is past the innermost)."""
        return product(self.extents[level:])

    def at(self, e: E.Expr, values: dict[str, E.Expr]) -> E.Expr:
        """`e` with loop `name` at `values[name]` and every other loop of the nest at 0."""
        memo: dict[int, E.Expr] = {}

        def go(x: E.Expr) -> E.Expr:
            t = type(x)
            if t is E.Var:
                if x.name in self.names:
                    return values.get(x.name, ZERO)
                return x
            if t is E.Const:
                return x
            out = memo.get(id(x))
            if out is None:
                out = E.map_children(x, go)
                # 0 // d and 0 % d are 0 for every divisor; folding them keeps the probes small
                if type(out) in (E.FloorDiv, E.FloorMod) and type(out.a) is E.Const and out.a.value == 0:
                    out = E.Const(0, out.dtype)
                memo[id(x)] = out
            return out

        return go(e)

    def index_map(self, e: E.Expr) -> "IndexMap":
        m = self._maps.get(e)
        if m is None:
            m = self._maps[e] = _index_map(self, e)
        return m


@dataclasses.dataclass(frozen=True)
class IndexMap:
    """An integer index as a function of the nest's loops: its value with every loop at 0 (`base`), and per loop
    how far it moves when that loop alone goes to its last iteration (`span`) or to 1 (`unit`)."""

    base: E.Expr
    span: tuple[E.Expr, ...]
    unit: tuple[E.Expr, ...]

    def moves(self, i: int, nest: Nest) -> E.Expr:
        """Whether the index varies along loop i over its iterations."""
        return self.span[i].ne(0) | (self.unit[i].ne(0) & (nest.extents[i] > 1))

    def reads(self, i: int) -> E.Expr:
        """Whether the index reads loop i's variable at all (also for a loop of one iteration)."""
        return self.span[i].ne(0) | self.unit[i].ne(0)

    def affine(self, i: int, nest: Nest) -> E.Expr:
        return self.span[i].eq(self.unit[i] * (nest.extents[i] - 1))


def _index_map(nest: Nest, e: E.Expr) -> IndexMap:
    if has_load(e):  # data-dependent (gather): treated as a fixed position; its loads are counted as reads
        n = len(nest.loops)
        return IndexMap(ZERO, (ZERO,) * n, (ZERO,) * n)
    base = nest.at(e, {})
    span, unit = [], []
    for lp in nest.loops:
        name = lp.var.name
        span.append(nest.at(e, {name: lp.extent - 1}) - base)
        unit.append(nest.at(e, {name: ONE}) - base)
    return IndexMap(base, tuple(span), tuple(unit))


def index_ops(m: IndexMap, nest: Nest) -> tuple[E.Expr, E.Expr, E.Expr]:
    """(add/sub, mul, div/mod) to compute one index: a term per loop it reads plus the offset, joined by adds; a
    multiply for an affine term whose coefficient is not +-1; a division or modulo for a term that is not affine."""
    terms = ind(m.base.ne(0))
    mul = ZERO
    divmod_ = ZERO
    for i in range(len(nest.loops)):
        reads = m.reads(i)
        terms = terms + ind(reads)
        affine = m.affine(i, nest)
        mul = mul + ind(reads & affine & absolute(m.unit[i]).ne(1))
        divmod_ = divmod_ + ind(reads & ~affine)
    return E.maximum(terms - 1, ZERO), mul, divmod_


@dataclasses.dataclass(frozen=True)
class Access:
    """One distinct access `buffer[indices]` of a store; `count` occurrences, `write` for the store's target."""

    buffer: Buffer
    indices: tuple[E.Expr, ...]
    write: bool
    count: int


class BufferUse:
    """All accesses of one buffer by one store."""

    def __init__(self, buffer: Buffer, accesses: list[Access], nest: Nest):
        self.buffer = buffer
        self.accesses = accesses
        self.nest = nest
        self.maps = [[nest.index_map(i) for i in a.indices] for a in accesses]
        self.eb = elem_bytes(buffer.dtype)
        self.reads = any(not a.write for a in accesses)
        self.writes = any(a.write for a in accesses)
        self.occurrences = sum(a.count for a in accesses)
        self._strides = _row_major_strides(buffer.shape)
        self._footprints: dict[int, E.Expr] = {}

    def moves(self, i: int) -> E.Expr:
        """Whether any access of the buffer varies along loop i."""
        out = E.Const(False, "bool")
        for maps in self.maps:
            for m in maps:
                out = out | m.moves(i, self.nest)
        return out

    def extents(self, level: int) -> list[E.Expr]:
        """Per dimension, the extent of the box the accesses touch while loops `level..` vary (outer ones fixed)."""
        out = []
        for d in range(len(self.buffer.shape)):
            if len(self.maps) == 1:
                m = self.maps[0][d]
                out.append(ONE + total(absolute(s) for s in m.span[level:]))
                continue
            lo = hi = None
            for maps in self.maps:
                m = maps[d]
                a_lo = m.base + total(E.minimum(s, ZERO) for s in m.span[level:])
                a_hi = m.base + total(E.maximum(s, ZERO) for s in m.span[level:])
                lo = a_lo if lo is None else E.minimum(lo, a_lo)
                hi = a_hi if hi is None else E.maximum(hi, a_hi)
            out.append(hi - lo + 1)
        return out

    def footprint(self, level: int) -> E.Expr:
        """Distinct elements touched while loops `level..` vary."""
        out = self._footprints.get(level)
        if out is None:
            out = self._footprints[level] = product(self.extents(level))
        return out

    def unique_lines(self) -> E.Expr:
        ext = self.extents(0)
        if not ext:
            return ONE
        return product(ext[:-1]) * E.ceildiv(ext[-1] * self.eb, CACHE_LINE)

    def flat(self, access: int, which: str, i: int) -> E.Expr:
        """The row-major element offset that loop i moves access `access` by (`which` is "span" or "unit")."""
        return total(getattr(m, which)[i] * s for m, s in zip(self.maps[access], self._strides))

    def lines(self) -> E.Expr:
        """Cache lines fetched over the whole nest: per run of the innermost loop, one line if the access stays
        put, else the lines its stride spans (at most one per iteration)."""
        n = len(self.nest.loops)
        if n == 0:
            return E.Const(len(self.accesses), E.INDEX)
        e_in = self.nest.extents[-1]
        runs = self.nest.trips // e_in
        out = ZERO
        for a in range(len(self.accesses)):
            stride = absolute(self.flat(a, "unit", n - 1))
            spread = E.minimum(e_in, E.ceildiv((e_in - 1) * stride * self.eb + self.eb, CACHE_LINE))
            per_run = E.select(self.flat(a, "span", n - 1).eq(0), ONE, spread)
            out = out + runs * per_run * self.accesses[a].count
        return out

    def stride(self) -> E.Expr:
        """Element stride of the first access along the innermost loop it varies with (0 if it never moves)."""
        out = ZERO
        for i in range(len(self.nest.loops)):
            out = E.select(self.flat(0, "span", i).ne(0), self.flat(0, "unit", i), out)
        return out


def _row_major_strides(shape: tuple[E.Expr, ...]) -> list[E.Expr]:
    out, acc = [], ONE
    for d in reversed(shape):
        out.append(acc)
        acc = acc * d
    return out[::-1]


def buffer_uses(target: Access, loads: list[Access], nest: Nest) -> list[BufferUse]:
    """Group the store's accesses by buffer, target first, then reads in order of first appearance."""
    order: list[Buffer] = []
    groups: dict[int, list[Access]] = {}
    for a in [target] + loads:
        if id(a.buffer) not in groups:
            order.append(a.buffer)
            groups[id(a.buffer)] = []
        groups[id(a.buffer)].append(a)
    return [BufferUse(b, groups[id(b)], nest) for b in order]
