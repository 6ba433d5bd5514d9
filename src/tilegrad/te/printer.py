"""A readable infix printer for expressions: minimal parentheses, Python-like operators.

`repr(e)` prints through it: this module registers `format_expr` in `expr.DERIVED`.
"""

from __future__ import annotations

from . import expr as E

# Higher binds tighter; the bitwise operators sit between comparisons and sums, as in Python.
_PRECEDENCE = {
    E.Or: 1, E.And: 2, E.EQ: 4, E.NE: 4, E.LT: 4, E.LE: 4, E.BitOr: 4.25, E.BitXor: 4.5, E.BitAnd: 4.75,
    E.ShiftLeft: 4.9, E.ShiftRight: 4.9, E.Add: 5, E.Sub: 5, E.Mul: 6, E.Div: 6, E.FloorDiv: 6, E.FloorMod: 6,
}

_COMPARE_PREC = 4
_ASSOCIATIVE = (E.Add, E.Mul, E.And, E.Or, E.BitAnd, E.BitOr, E.BitXor)


def _prec(e: E.Expr) -> int:
    return _PRECEDENCE.get(type(e), 10)


def format_expr(e: E.Expr) -> str:
    t = type(e)
    if t is E.Const:
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if E.is_float(e.dtype):
            text = repr(e.value)
            return text if e.dtype == "float32" else f"{e.dtype}({text})"
        return str(e.value)
    if t is E.Var:
        return e.name
    if t in _PRECEDENCE:
        p = _prec(e)
        left = format_expr(e.a)
        right = format_expr(e.b)
        # Left operand: equal precedence reads left to right, except comparisons (`a < b == c` would chain).
        if _prec(e.a) < p or (_prec(e.a) == p and p == _COMPARE_PREC):
            left = f"({left})"
        # Right operand: equal precedence needs parentheses unless it is the same associative operator, so that
        # `a * (b // c)` and `a + (b - c)` keep theirs.
        if _prec(e.b) < p or (_prec(e.b) == p and not (type(e.b) is t and t in _ASSOCIATIVE)):
            right = f"({right})"
        return f"{left} {e.op} {right}"
    if t is E.Min or t is E.Max:
        return f"{t.__name__.lower()}({format_expr(e.a)}, {format_expr(e.b)})"
    if t is E.Not:
        inner = format_expr(e.a)
        return f"!({inner})" if _prec(e.a) < 10 else f"!{inner}"
    if t is E.Select:
        return f"select({format_expr(e.cond)}, {format_expr(e.t)}, {format_expr(e.f)})"
    if t is E.Cast:
        return f"{e.dtype}({format_expr(e.a)})"
    if t is E.Load:
        return f"{e.buffer.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    if t is E.Reduce:
        axes = ", ".join(a.name for a in e.axes)
        return f"{e.combiner}({format_expr(e.source)}, axis=[{axes}])"
    if isinstance(e, E.Call):
        return f"{e.fn}({', '.join(format_expr(a) for a in e.args)})"
    raise TypeError(f"no printer for {t.__name__}")


E.DERIVED["text"] = format_expr
