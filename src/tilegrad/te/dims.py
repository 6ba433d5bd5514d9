"""Dimensions that may be symbolic: an int, or an index expression of the model's dynamic dimensions.

A dynamic dimension is an `E.Var` whose `lo`/`hi` are the bounds the module accepts (DESIGN.md, decision 8); a
tensor's shape holds ints and expressions of such variables (`seq`, `seq * 12`, `past + seq`). Code that needs a
number asks for the largest the dimension can be (memory plans, size checks), for its value in one call
(`evaluate`), or for a value to schedule for (`representative`).
"""

from __future__ import annotations

import math
import re

import numpy as np
from collections.abc import Iterable, Mapping, Sequence

from ..errors import ShapeError
from . import expr as E
from .evaluate import evaluate as _evaluate
from .simplify import simplify

def is_static(shape: Sequence) -> bool:
    return all(not isinstance(d, E.Expr) for d in shape)


def upper(d) -> int:
    """The largest value `d` takes within its variables' bounds."""
    if not isinstance(d, E.Expr):
        return int(d)
    hi = simplify(d).hi
    if hi == E.INF:
        raise ShapeError(f"the dimension {d} has no upper bound")
    return int(hi)


def lower(d) -> int:
    """The least value `d` takes within its variables' bounds."""
    return int(d) if not isinstance(d, E.Expr) else int(simplify(d).lo)


def upper_shape(shape: Sequence) -> tuple[int, ...]:
    return tuple(upper(d) for d in shape)


def evaluate(d, env: Mapping[str, int]) -> int:
    """`d`'s value where each dynamic dimension has its value in `env`."""
    if not isinstance(d, E.Expr):
        return int(d)
    return int(_evaluate(d, dict(env)))


def variables(shapes: Iterable[Sequence]) -> list[E.Var]:
    """The dynamic dimensions named in `shapes`, in order of first appearance."""
    seen: dict[str, E.Var] = {}
    for shape in shapes:
        for d in shape:
            if isinstance(d, E.Expr):
                for v in E.free_vars(d):
                    seen.setdefault(v.name, v)
    return list(seen.values())


def dim(d):
    """`d` as a shape entry: an int, or a simplified expression of dynamic dimensions (an int when it folds)."""
    if not isinstance(d, E.Expr):
        return int(d)
    d = simplify(d)
    return int(d.value) if type(d) is E.Const else d


def equal(a, b) -> bool:
    """Whether `a` and `b` are the same dimension for every value of the dynamic ones (ints compare as ints)."""
    if not isinstance(a, E.Expr) and not isinstance(b, E.Expr):
        return int(a) == int(b)
    diff = simplify(E.as_expr(a) - E.as_expr(b))
    return type(diff) is E.Const and diff.value == 0


def divides(d, n) -> bool:
    """Whether `d` divides `n` for every value of the dynamic dimensions."""
    return quotient(n, d) is not None


def quotient(n, d):
    """n / d where `d` divides `n` for every value of the dynamic dimensions (a monomial dividing each term of a
    polynomial, or a remainder that simplifies to 0), else None."""
    if not isinstance(d, E.Expr) and not isinstance(n, E.Expr):
        return int(n) // int(d) if int(n) % int(d) == 0 else None
    try:
        (num, num_const), (den, den_const) = polynomial(n), polynomial(d)
    except ShapeError:
        num = None
    if num is not None and len(den) == 1 and not den_const:
        (dc, dkeys), = den
        if num_const % dc == 0 and all(c % dc == 0 and _contains(keys, dkeys) for c, keys in num):
            terms = [(c // dc, _without(keys, dkeys)) for c, keys in num] + [(num_const // dc, ())]
            return dim(sum((c * _product_of(keys, n, d) for c, keys in terms), E.const(0)))
    rest = simplify(E.as_expr(n) % E.as_expr(d))
    return dim(E.as_expr(n) // E.as_expr(d)) if type(rest) is E.Const and rest.value == 0 else None


FORMULA_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%", E.Min: "min", E.Max: "max"}


def formula(d):
    """`d` as the runtime evaluates it (`runtime/dims.Extent`): an int, a dimension's variable name, or
    `(op, left, right)` over integer arithmetic. Another operation is a ShapeError naming the dimension."""
    def go(e: E.Expr):
        t = type(e)
        if t is E.Const:
            return int(e.value)
        if t is E.Var:
            return e.name
        if t in FORMULA_OPS:
            return (FORMULA_OPS[t], go(e.a), go(e.b))
        raise ShapeError(f"the dynamic dimension {d} holds a {t.__name__}, which the runtime does not compute")

    return go(simplify(E.as_expr(d)))


def _contains(keys: tuple[str, ...], sub: tuple[str, ...]) -> bool:
    rest = list(keys)
    for k in sub:
        if k not in rest:
            return False
        rest.remove(k)
    return True


def _without(keys: tuple[str, ...], sub: tuple[str, ...]) -> tuple[str, ...]:
    rest = list(keys)
    for k in sub:
        rest.remove(k)
    return tuple(rest)


def _product_of(keys: tuple[str, ...], *sources) -> E.Expr:
    """The product of the variables named `keys`, found in `sources` (the expressions they come from)."""
    found = {v.name: v for s in sources if isinstance(s, E.Expr) for v in E.free_vars(s)}
    out: E.Expr = E.const(1)
    for k in keys:
        out = out * found[k]
    return out


def ceildiv(d, n: int):
    """ceil(d / n) for a size or an expression of dynamic dimensions (then simplified)."""
    return dim(E.ceildiv(d, n)) if isinstance(d, E.Expr) else -(-int(d) // n)


def product(shape: Sequence):
    out = 1
    for d in shape:
        out = out * d
    return dim(out)


def representative(d) -> int:
    """The value a choice that needs one number (a schedule's tiles) is made for: each dynamic dimension near the
    geometric mean of its bounds, so the choice suits the middle of the range in scale."""
    if not isinstance(d, E.Expr):
        return int(d)
    return evaluate(d, {v.name: _middle(v) for v in E.free_vars(d)})


def _middle(v: E.Var) -> int:
    """The power of two nearest the geometric mean of `v`'s bounds (a tile of it divides the powers of two)."""
    lo, hi = max(1, int(v.lo)), upper(v)
    return max(lo, min(hi, 2 ** round(math.log2(lo * hi) / 2)))


def polynomial(d) -> tuple[tuple[tuple[int, tuple[str, ...]], ...], int]:
    """`d` as (terms, constant): a sum of coefficient * product of dynamic dimensions, the form the runtime
    computes shapes in. A dimension of another form (a floor division that does not cancel) is a ShapeError."""
    poly = _poly(simplify(E.as_expr(d)), d)
    const = poly.pop((), 0)
    return tuple((c, keys) for keys, c in sorted(poly.items()) if c), const


def _poly(e: E.Expr, whole) -> dict[tuple[str, ...], int]:
    t = type(e)
    if t is E.Const:
        return {(): int(e.value)}
    if t is E.Var:
        return {(e.name,): 1}
    if t in (E.Add, E.Sub):
        out = dict(_poly(e.a, whole))
        sign = 1 if t is E.Add else -1
        for k, c in _poly(e.b, whole).items():
            out[k] = out.get(k, 0) + sign * c
        return out
    if t is E.Mul:
        out: dict[tuple[str, ...], int] = {}
        for ka, ca in _poly(e.a, whole).items():
            for kb, cb in _poly(e.b, whole).items():
                k = tuple(sorted(ka + kb))
                out[k] = out.get(k, 0) + ca * cb
        return out
    raise ShapeError(f"the dynamic dimension {whole} is not a sum of products of dimensions, which the runtime "
                     f"computes shapes in")


PREFIX = "dyn_"


def dimension(name: str, lo: int, hi: int) -> E.Var:
    """The variable of the model's dynamic dimension `name` (an ONNX dim_param), valued in [lo, hi]. Its name is
    a C identifier no loop or buffer of a kernel takes: `PREFIX`, then `name` with every character but letters and
    digits escaped, so that `name_of` gives `name` back."""
    if not 1 <= lo <= hi:
        raise ShapeError(f"dynamic dimension {name!r}: bounds ({lo}, {hi}) must satisfy 1 <= lo <= hi")
    key = PREFIX + "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}_" for c in name)
    return E.Var(key, E.INDEX, lo, hi)


def name_of(v: E.Var) -> str:
    """The model's name of a dynamic dimension's variable (`dimension`)."""
    key = v.name[len(PREFIX):] if v.name.startswith(PREFIX) else v.name
    return re.sub(r"_([0-9a-f]+)_", lambda m: chr(int(m.group(1), 16)), key)


def count(d, dtype: str) -> E.Expr:
    """A count of elements (a mean's divisor) as a `dtype` value: a constant, or the dynamic dimensions' product
    converted at run time."""
    d = dim(d)
    return E.const(float(d), dtype) if not isinstance(d, E.Expr) else E.cast(dtype, d)


def symbolic_ints(a: np.ndarray) -> np.ndarray:
    """An object array of ints and index expressions, each simplified (`dim`): int64 where none is left symbolic."""
    flat = [dim(x) for x in a.reshape(-1)]
    if not any(isinstance(x, E.Expr) for x in flat):
        return np.array(flat, np.int64).reshape(a.shape)
    out = np.empty(len(flat), object)
    out[:] = flat
    return out.reshape(a.shape)


def is_symbolic_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == object


def provably_le(a, b) -> bool:
    """Whether a <= b for every value of the dynamic dimensions (by their bounds)."""
    if not isinstance(a, E.Expr) and not isinstance(b, E.Expr):
        return int(a) <= int(b)
    return simplify(E.as_expr(b) - E.as_expr(a)).lo >= 0


def clamp(x, lo, hi):
    """min(max(x, lo), hi), decided where the bounds decide it, else an expression."""
    if not provably_le(lo, x):
        x = lo if provably_le(x, lo) else dim(E.maximum(E.as_expr(x), E.as_expr(lo)))
    if not provably_le(x, hi):
        x = hi if provably_le(hi, x) else dim(E.minimum(E.as_expr(x), E.as_expr(hi)))
    return dim(x)


def is_negative(x) -> bool:
    """Whether `x` < 0: an expression of dynamic dimensions is a size, never negative unless its bounds say so."""
    if not isinstance(x, E.Expr):
        return int(x) < 0
    if simplify(x).hi < 0:
        return True
    if simplify(x).lo >= 0:
        return False
    raise ShapeError(f"the index {x} may be negative or not, depending on the dynamic dimensions' values")


def mentions_dynamic(value) -> bool:
    """Whether an attribute value (a number, an expression, nested tuples and lists of them) holds an expression."""
    if isinstance(value, E.Expr):
        return True
    return isinstance(value, (tuple, list)) and any(mentions_dynamic(v) for v in value)
