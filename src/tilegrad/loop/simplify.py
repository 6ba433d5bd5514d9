"""Loop-IR simplification, and binding the schedule variables of a symbolic kernel to integers.

Binding rebuilds every loop variable with its new extent as its range, so the simplifier can prove the guards
that a concrete schedule does not need; a bound kernel then equals the kernel lowered from the bound trace.
"""

from __future__ import annotations

import dataclasses

from ..te import expr as E
from ..te.simplify import simplify
from .ir import Allocate, Buffer, For, IfThenElse, Kernel, Seq, Stmt, Store, seq


def bind(k: Kernel, params: dict) -> Kernel:
    """`k` with its schedule variables (keyed by Var or name) replaced by numbers, then simplified."""
    env = {(p.name if isinstance(p, E.Var) else p): E.as_expr(v) for p, v in params.items()}
    return _Rewrite(env).kernel(k)


def simplify_kernel(k: Kernel) -> Kernel:
    """Simplify every expression; drop guards that are always true and branches that never run."""
    return _Rewrite({}).kernel(k)


class _Rewrite:
    def __init__(self, env: dict[str, E.Expr]):
        self.env = dict(env)
        self.buffers: dict[int, Buffer] = {}

    def kernel(self, k: Kernel) -> Kernel:
        params = tuple(self._buffer(b) for b in k.params)
        return Kernel(k.name, params, self.stmt(k.body) or Seq(()), k.dims)

    def _buffer(self, b: Buffer) -> Buffer:
        new = self.buffers.get(id(b))
        if new is None:
            shape = tuple(self.expr(d) for d in b.shape)
            new = b if shape == b.shape else dataclasses.replace(b, shape=shape)
            self.buffers[id(b)] = new
        return new

    def expr(self, e: E.Expr) -> E.Expr:
        def go(x: E.Expr) -> E.Expr:
            t = type(x)
            if t is E.Var:
                return self.env.get(x.name, x)
            if t is E.Const:
                return x
            if t is E.Load:
                return E.Load(self._buffer(x.buffer), tuple(go(i) for i in x.indices))
            return E.map_children(x, go)

        return simplify(go(e))

    def stmt(self, s: Stmt) -> Stmt | None:
        if isinstance(s, For):
            extent = self.expr(s.extent)
            hi = extent.hi - 1 if extent.hi < E.INF else None
            var = E.Var(s.var.name, E.INDEX, 0, hi, extent)
            saved = self.env.get(var.name)
            self.env[var.name] = var
            body = self.stmt(s.body)
            if saved is None:
                del self.env[var.name]
            else:
                self.env[var.name] = saved
            return None if body is None else For(var, extent, s.kind, body)
        if isinstance(s, Store):
            return Store(self._buffer(s.buffer), tuple(self.expr(i) for i in s.indices), self.expr(s.value))
        if isinstance(s, Seq):
            parts = [self.stmt(x) for x in s.stmts]
            parts = [p for p in parts if p is not None]
            return seq(parts) if parts else None
        if isinstance(s, IfThenElse):
            cond = self.expr(s.cond)
            then = self.stmt(s.then)
            orelse = None if s.orelse is None else self.stmt(s.orelse)
            if type(cond) is E.Const:
                return then if cond.value else orelse
            if then is None and orelse is None:
                return None
            if then is None:
                return IfThenElse(E.logical_not(cond), orelse)
            return IfThenElse(cond, then, orelse)
        if isinstance(s, Allocate):
            buf = self._buffer(s.buffer)
            body = self.stmt(s.body)
            return None if body is None else Allocate(buf, body)
        raise TypeError(f"unknown statement {type(s).__name__}")
