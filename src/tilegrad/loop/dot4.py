"""Target lowering of the int8 GEMM's inner loops to a u8 x s8 dot-product instruction.

The int8 GEMM's register tile (te.nn.quantized_matmul, scheduled by schedule/rules_int8.py) ends in

    for j in 0..L:                    # L int32 columns: a vector
      for g in 0..4:                  # the 4 values of a k group
        acc[.. j] = acc[.. j] + (int32)a[.. g] * (int32)w[.. 4 j + g]

with a u8, w s8 and acc int32: one vpdpbusd (or its AVX2 emulation) per vector of L columns. `use_dot4` replaces
each such nest, where the strides say exactly that (acc contiguous along j and the same for every g, a the
same for every j and contiguous along g, w contiguous along (j, g)), with `Intrinsic("dot4_u8s8x<L>", (acc, a,
w))` at j = g = 0; the renderer spells it for the target. Any other nest is left alone.

With 7-bit weights the group is written as two int16 pair sums (te.nn.quantized._int8_gemm):

      for h in 0..2:
        acc[.. j] = acc[.. j] + (int32)((int16)a[.. 2h] * (int16)w[.. 4 j + 2h] + (int16)a[.. 2h + 1] * ...)

which becomes `dot4_u8s7x<L>`: AVX2's vpmaddubsw forms exactly those pair sums.

A depthwise convolution's grouped taps (te.nn.quantized's `_grouped_taps`) give each lane its own four values,
the group's values a vector apart (a[.. L g + j]: four pixels of 16 channels, contiguous):

    for j in 0..16:
      for g in 0..4:
        acc[.. j] = acc[.. j] + (int32)a[.. 16 g + j] * (int32)w[.. 4 j + g]

which becomes `dot4t_u8s8x16`: one byte permute puts each lane's four values together, then one vpdpbusd.
"""

from __future__ import annotations

from ..te import expr as E
from ..te.simplify import linear_merged, simplify
from .ir import For, Intrinsic, Kernel, Store, rewrite_nests

GROUP = 4
LANES = (8, 16)  # the int32 columns one intrinsic call covers
TRANSPOSED_LANES = (16,)  # those of the transposed form (below)


def use_dot4(k: Kernel) -> Kernel:
    """`k` with each int8 dot-product nest given to the intrinsic; `k` itself when there is none."""
    body = rewrite_nests(k.body, _dot4)
    return k if body is k.body else Kernel(k.name, k.params, body, k.dims)


def _dot4(s: For) -> Intrinsic | None:
    """The intrinsic for the nest `s` (columns, then the 4 values of a group or its 2 pairs), or None if it is
    not one."""
    inner = s.body
    if not (type(s.extent) is E.Const and s.extent.value in LANES and isinstance(inner, For)
            and type(inner.extent) is E.Const and isinstance(inner.body, Store)):
        return None
    j, g, store = s.var, inner.var, inner.body
    value = store.value
    if not (type(value) is E.Add and type(value.a) is E.Load and value.a.buffer is store.buffer
            and value.a.indices == store.indices and store.buffer.dtype == "int32"):
        return None
    if inner.extent.value == GROUP:
        loads, kind, step = _products(value.b, "int32"), "u8s8", 1
    elif inner.extent.value == GROUP // 2:
        loads, kind, step = _pairs(value.b), "u8s7", 2
    else:
        return None
    if loads is None:
        return None
    a, w = loads
    lanes = s.extent.value
    name = f"dot4_{kind}x{lanes}"
    if kind == "u8s8" and lanes in TRANSPOSED_LANES and strides(a.buffer, a.indices, j, g) == [1, lanes]:
        name, a_steps = f"dot4t_{kind}x{lanes}", (1, lanes)  # a's group values a vector apart
    else:
        a_steps = (0, step)
    operands = ((store.buffer, store.indices, 1, 0), (a.buffer, a.indices, *a_steps),
                (w.buffer, w.indices, GROUP, step))
    if not all(strides(b, idx, j, g) == [sj, sg] for b, idx, sj, sg in operands):
        return None
    zero = {j: E.Const(0, j.dtype), g: E.Const(0, g.dtype)}
    return Intrinsic(name, tuple((b, tuple(simplify(E.substitute(i, zero)) for i in idx)) for b, idx, _, _ in operands))


def _products(e: E.Expr, dtype: str) -> tuple[E.Load, E.Load] | None:
    """(a, w) of `e` = (dtype)a * (dtype)w with a u8 and w s8 (either order), else None."""
    if type(e) is not E.Mul:
        return None
    x, y = _widened(e.a, dtype), _widened(e.b, dtype)
    if x is None or y is None:
        return None
    a, w = (y, x) if x.buffer.dtype == "int8" else (x, y)
    return (a, w) if a.buffer.dtype == "uint8" and w.buffer.dtype == "int8" else None


def _pairs(e: E.Expr) -> tuple[E.Load, E.Load] | None:
    """(a, w) of the first product of `e` = (int32)(a0 * w0 + a1 * w1) in int16, where a1 and w1 are the
    elements after a0 and w0 of the same buffers, else None."""
    if not (type(e) is E.Cast and e.dtype == "int32" and type(e.a) is E.Add and e.a.dtype == "int16"):
        return None
    first, second = _products(e.a.a, "int16"), _products(e.a.b, "int16")
    if first is None or second is None:
        return None
    for lo, hi in ((first, second), (second, first)):
        if all(x.buffer is y.buffer and _offset(x, y) == 1 for x, y in zip(lo, hi)):
            return lo
    return None


def _offset(x: E.Load, y: E.Load) -> int | None:
    """How many elements `y` lies after `x` in their (shared) buffer, if that is a constant."""
    delta = simplify(E.flat_index(y.buffer, y.indices) - E.flat_index(x.buffer, x.indices))
    return delta.value if type(delta) is E.Const else None


def _widened(e: E.Expr, dtype: str) -> E.Load | None:
    """The 8-bit load under a cast to `dtype`, or None."""
    if type(e) is E.Cast and e.dtype == dtype and type(e.a) is E.Load and e.a.buffer.dtype in ("uint8", "int8"):
        return e.a
    return None


def strides(buffer, indices, j: E.Var, g: E.Var) -> list[int | None]:
    """How far the flat (row-major) element moves for one step of j and of g: constants, or None where the index
    is not exactly affine in them. A step read off one move would be wrong elsewhere in the tile: the flat index
    `j % 2 * 36864 + j // 2 * 144` moves 36,864 from j = 0 to 1, and 144 from 0 to 2."""
    terms, _ = linear_merged(simplify(E.flat_index(buffer, indices)))
    steps = {j.name: 0, g.name: 0}
    for mono, k in terms.items():
        if len(mono) == 1 and type(mono[0]) is E.Var and mono[0].name in steps:
            steps[mono[0].name] += k
        elif any(v.name in steps for atom in mono for v in E.free_vars(atom)):
            return [None, None]
    return [steps[j.name], steps[g.name]]
