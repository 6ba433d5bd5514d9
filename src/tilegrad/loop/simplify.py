"""Loop-IR simplification, and binding the schedule variables of a symbolic kernel to integers.

Binding rebuilds every loop variable with its new extent as its range, so the simplifier can prove the guards
that a concrete schedule does not need; a bound kernel then equals the kernel lowered from the bound trace.
"""

from __future__ import annotations

import dataclasses

from ..te import expr as E
from ..te.simplify import canonical, from_linear, linear, simplify
from .ir import Allocate, Buffer, For, IfThenElse, Kernel, Seq, Stmt, Store, seq


def bind(k: Kernel, params: dict) -> Kernel:
    """`k` with its schedule variables (keyed by Var or name) replaced by numbers, then simplified."""
    env = {(p.name if isinstance(p, E.Var) else p): E.as_expr(v) for p, v in params.items()}
    return _Rewrite(env).kernel(k)


def simplify_kernel(k: Kernel) -> Kernel:
    """Simplify every expression; drop guards that are always true and branches that never run."""
    return _Rewrite({}).kernel(k)


def simplify_rendered(k: Kernel) -> Kernel:
    """`simplify_kernel` for a kernel about to be rendered, after loop/tails.py's versions and the intrinsics:
    each branch's expressions know what its condition proves of the loop indices (`narrowed`), and statements
    that hold no loop of their own (barriers, intrinsic calls, prefetches) stay as they are."""
    return _Rewrite({}, rendered=True).kernel(k)


class _Rewrite:
    def __init__(self, env: dict[str, E.Expr], rendered: bool = False):
        self.env = dict(env)
        self.rendered = rendered  # `simplify_rendered`'s: branches narrow the indices, other statements kept
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
            if type(cond) is E.Const:
                branch = s.then if cond.value else s.orelse
                return None if branch is None else self.stmt(branch)
            holds, fails = {}, {}
            if self.rendered:
                holds, fails = narrowed(cond, self.env, True), narrowed(cond, self.env, False)
            if holds is None or fails is None:  # the test is decided within the loops' ranges
                branch = s.then if holds is not None else s.orelse
                return None if branch is None else self._within(holds if holds is not None else fails, branch)
            then = self._within(holds, s.then)
            orelse = None if s.orelse is None else self._within(fails, s.orelse)
            if then is None and orelse is None:
                return None
            if then is None:
                return IfThenElse(E.logical_not(cond), orelse)
            return IfThenElse(cond, then, orelse)
        if isinstance(s, Allocate):
            buf = self._buffer(s.buffer)
            body = self.stmt(s.body)
            return None if body is None else Allocate(buf, body)
        if self.rendered:
            return s
        raise TypeError(f"unknown statement {type(s).__name__}")

    def _within(self, ranges: dict[str, E.Var] | None, s: Stmt) -> Stmt | None:
        """`s` simplified with the loop indices of `ranges` known to lie in their narrower ranges; None where
        `ranges` is None (it never runs)."""
        if ranges is None:
            return None
        saved = {name: self.env[name] for name in ranges}
        self.env.update(ranges)
        try:
            return self.stmt(s)
        finally:
            self.env.update(saved)


def narrowed(cond: E.Expr, env: dict[str, E.Expr], holds: bool) -> dict[str, E.Var] | None:
    """The loop indices of `env` whose range `cond` (true where `holds`, else false) narrows, by name, or None
    where it cannot be so within their ranges (the branch never runs). A guarded vector loop's full-width
    branch, `16 * i + 15 < 28`, holds only for i = 0, and then an index that splits `16 * i + j` by 28 is proved
    to stay within one row and drops its division (a channel shuffle's reshaped transpose)."""
    if type(cond) is E.And and holds:  # the second test narrows what the first left
        first = narrowed(cond.a, env, True)
        second = None if first is None else narrowed(cond.b, {**env, **first}, True)
        return None if second is None else {**first, **second}
    if type(cond) is E.Not:
        return narrowed(cond.a, env, not holds)
    if type(cond) not in (E.LT, E.LE) or not E.is_int(cond.a.dtype):
        return {}
    # a < b holds: a - b < 0 (a - b <= -1); fails: b - a <= 0. a <= b holds: a - b <= 0; fails: b - a <= -1.
    strict = type(cond) is E.LT
    difference = E.sub(cond.a, cond.b) if holds else E.sub(cond.b, cond.a)
    terms, constant = linear(canonical(difference))
    limit = -constant - (1 if strict == holds else 0)  # sum of terms <= limit
    out = {}
    for mono, k in terms.items():
        var = env.get(mono[0].name) if len(mono) == 1 and type(mono[0]) is E.Var else None
        if type(var) is not E.Var:
            continue
        rest = from_linear({m: j for m, j in terms.items() if m != mono}, 0, cond.a.dtype).lo
        if rest == -E.INF:
            continue
        lo, hi = var.lo, var.hi
        if k > 0:
            hi = min(hi, (limit - rest) // k)
        else:
            lo = max(lo, -((limit - rest) // -k))
        if lo > hi:
            return None
        if (lo, hi) != (var.lo, var.hi):
            out[var.name] = E.Var(var.name, var.dtype, lo, hi, var.upper)
    return out
