"""Loop IR: the imperative program a schedule lowers to, and every backend renders.

Statements are immutable. Loops run from 0 to `extent` (an expression) with a kind; buffers have a scope
("global": a kernel parameter or a heap temporary; "local": an array inside the loop nest; "shared": one array
per GPU block). Reads are expression
`Load`s of a `Buffer`, writes are `Store`s; multi-dimensional indices stay until rendering.
"""

from __future__ import annotations

import dataclasses

from ..te import expr as E


@dataclasses.dataclass(frozen=True, eq=False)
class Buffer:
    """A named array. Identity is the object; two buffers never share a name inside one kernel."""

    name: str
    shape: tuple[E.Expr, ...]
    dtype: str
    scope: str = "global"

    __hash__ = object.__hash__

    def size(self) -> E.Expr:
        out: E.Expr = E.Const(1, E.INDEX)
        for s in self.shape:
            out = out * s
        return out


class Stmt:
    __slots__ = ()


@dataclasses.dataclass(frozen=True)
class For(Stmt):
    """`for var in 0..extent`. `kind` is "serial", "parallel", "vectorized" or "unrolled", or a GPU axis
    ("blockIdx.x", "threadIdx.y", ...): the loop's iterations are then the blocks or threads of a launch. In a symbolic program (a sketch's parameters left as
    variables) auto-unroll cannot be decided yet: `unroll_if` is then the condition under which this loop is
    unrolled, which features read as a formula; a concrete program has it decided in `kind`."""

    var: E.Var
    extent: E.Expr
    kind: str
    body: Stmt
    unroll_if: E.Expr | None = None


@dataclasses.dataclass(frozen=True)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[E.Expr, ...]
    value: E.Expr


@dataclasses.dataclass(frozen=True)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclasses.dataclass(frozen=True)
class IfThenElse(Stmt):
    cond: E.Expr
    then: Stmt
    orelse: Stmt | None = None


@dataclasses.dataclass(frozen=True)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclasses.dataclass(frozen=True)
class Barrier(Stmt):
    """Every thread of a GPU block waits here until all have arrived, so that what one thread wrote to a shared
    buffer before it is visible to the others after it. Inserted by `loop.gpu.insert_barriers`."""


@dataclasses.dataclass(frozen=True)
class Intrinsic(Stmt):
    """A call of an instruction the target has and the loops do not say: `name` (a renderer spells it, from its
    `intrinsics` table) on the addresses of buffer elements (`operands`: buffer and indices each), then on
    `values` (strides, as integers). Made by target lowering just before rendering (loop/dot4.py,
    loop/transpose.py), never by lowering a schedule, so the loop IR that features and bounds read keeps the
    plain loops."""

    name: str
    operands: tuple[tuple[Buffer, tuple[E.Expr, ...]], ...]
    values: tuple[E.Expr, ...] = ()


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One function: parameters in call order (inputs, then outputs), a body, and the dynamic dimensions
    (`te/dims.py`) its extents and buffer shapes read, passed after the buffers as values of the call."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    dims: tuple[E.Var, ...] = ()


def seq(stmts) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def walk(s: Stmt):
    """Every statement, parents before children."""
    yield s
    if isinstance(s, (For, Allocate)):
        yield from walk(s.body)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from walk(x)
    elif isinstance(s, IfThenElse):
        yield from walk(s.then)
        if s.orelse is not None:
            yield from walk(s.orelse)


def rewrite_nests(s: Stmt, replace) -> Stmt:
    """`s` with each loop nest for which `replace(loop)` gives a statement replaced by it (outermost first; a
    replaced nest is not looked into); `s` itself when nothing was replaced."""
    if isinstance(s, For):
        found = replace(s)
        if found is not None:
            return found
        body = rewrite_nests(s.body, replace)
        return s if body is s.body else For(s.var, s.extent, s.kind, body, s.unroll_if)
    if isinstance(s, Seq):
        stmts = tuple(rewrite_nests(x, replace) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else Seq(stmts)
    if isinstance(s, IfThenElse):
        then = rewrite_nests(s.then, replace)
        orelse = None if s.orelse is None else rewrite_nests(s.orelse, replace)
        return s if then is s.then and orelse is s.orelse else IfThenElse(s.cond, then, orelse)
    if isinstance(s, Allocate):
        body = rewrite_nests(s.body, replace)
        return s if body is s.body else Allocate(s.buffer, body)
    return s


def has_parallel(s: Stmt) -> bool:
    """Whether a parallel loop runs somewhere in `s`."""
    return any(isinstance(x, For) and x.kind == "parallel" for x in walk(s))
