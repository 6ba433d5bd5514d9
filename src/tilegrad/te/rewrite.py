"""Rules as data: patterns over expressions, rule tables and the one driver that applies them.

A rule is `(pattern, action)`. The pattern is built with the usual operators from `P.var` / `P.const` / literals,
or is a node class (matching any node of that class, captured as `e`). The action receives the captures as keyword
arguments and returns the replacement, or None when it does not apply. Tables compose with `+`.
"""

from __future__ import annotations

from typing import Callable

from . import expr as E


class Pat:
    """A pattern node; operators build patterns, never folded expressions."""

    __slots__ = ()

    def _bin(self, cls, other, swap=False):
        other = lift(other)
        return PNode(cls, (other, self) if swap else (self, other))

    def __add__(self, o):
        return self._bin(E.Add, o)

    def __radd__(self, o):
        return self._bin(E.Add, o, True)

    def __sub__(self, o):
        return self._bin(E.Sub, o)

    def __rsub__(self, o):
        return self._bin(E.Sub, o, True)

    def __mul__(self, o):
        return self._bin(E.Mul, o)

    def __rmul__(self, o):
        return self._bin(E.Mul, o, True)

    def __floordiv__(self, o):
        return self._bin(E.FloorDiv, o)

    def __mod__(self, o):
        return self._bin(E.FloorMod, o)

    def __lt__(self, o):
        return self._bin(E.LT, o)

    def __le__(self, o):
        return self._bin(E.LE, o)


class PVar(Pat):
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class PConst(Pat):
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class PLit(Pat):
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class PNode(Pat):
    __slots__ = ("cls", "children")

    def __init__(self, cls, children):
        self.cls = cls
        self.children = children


class P:
    """Pattern constructors: `P.var("x")` matches any expression, `P.const("c")` any constant."""

    var = PVar
    const = PConst

    @staticmethod
    def node(cls, *children):
        return PNode(cls, tuple(lift(c) for c in children))


def lift(x) -> Pat:
    return x if isinstance(x, Pat) else PLit(x)


def match(p: Pat, e: E.Expr, caps: dict) -> bool:
    t = type(p)
    if t is PVar:
        prev = caps.get(p.name)
        if prev is None:
            caps[p.name] = e
            return True
        return prev == e
    if t is PConst:
        if type(e) is not E.Const:
            return False
        prev = caps.get(p.name)
        if prev is None:
            caps[p.name] = e
            return True
        return prev == e
    if t is PLit:
        return type(e) is E.Const and e.value == p.value
    if type(e) is not p.cls:
        return False
    kids = e.children()
    if len(kids) != len(p.children):
        return False
    return all(match(pc, ec, caps) for pc, ec in zip(p.children, kids))


Action = Callable[..., "E.Expr | None"]


class Rules:
    """A named table of rules, indexed by the node class at the pattern's root."""

    def __init__(self, name: str, rules: list[tuple[object, Action]]):
        self.name = name
        self.rules = list(rules)
        self.by_class: dict[type, list[tuple[Pat | None, Action]]] = {}
        for pattern, action in self.rules:
            if isinstance(pattern, type):
                self.by_class.setdefault(pattern, []).append((None, action))
            else:
                self.by_class.setdefault(pattern.cls, []).append((pattern, action))

    def __add__(self, other: "Rules") -> "Rules":
        return Rules(f"{self.name}+{other.name}", self.rules + other.rules)


class Rewriter:
    """Bottom-up rewriting to a fixpoint with a table of rules; memoised per call.

    With `cache_on_nodes`, each node remembers its result (in its `_simple` slot), so rewriting an expression
    built from already-rewritten parts skips them. Only one rewriter (the simplifier) may use that slot.
    """

    def __init__(self, rules: Rules, max_steps: int = 64, cache_on_nodes: bool = False):
        self.rules = rules
        self.max_steps = max_steps
        self.cache_on_nodes = cache_on_nodes

    def __call__(self, e: E.Expr) -> E.Expr:
        return self._go(e, {})

    def _go(self, e: E.Expr, memo: dict) -> E.Expr:
        t = type(e)
        if t is E.Const or t is E.Var:
            return e
        if self.cache_on_nodes and e._simple is not None:
            return e._simple
        hit = memo.get(id(e))
        if hit is not None:
            return hit[1]
        cur = E.map_children(e, lambda k: self._go(k, memo))
        for _ in range(self.max_steps):
            new = self._apply_once(cur)
            if new is None:
                break
            cur = E.map_children(new, lambda k: self._go(k, memo)) if new.children() else new
        memo[id(e)] = (e, cur)  # holding `e` keeps its id from being reused during this call
        if self.cache_on_nodes:
            e._simple = cur
            cur._simple = cur
        return cur

    def _apply_once(self, e: E.Expr) -> E.Expr | None:
        for pattern, action in self.rules.by_class.get(type(e), ()):
            if pattern is None:
                out = action(e=e)
            else:
                caps: dict = {}
                if not match(pattern, e, caps):
                    continue
                out = action(**caps)
            if out is not None and out is not e and out != e:
                return out
        return None
