"""Matrix products: matmul, batch_matmul with broadcast batch dimensions, and dense (a fully connected layer).

Transposes are folded into the indexing rather than materialised, so `matmul(a, b, transpose_b=True)` reads `b`
in place; the tag and the transpose flags in the attrs tell a schedule which operand is contiguous along the
reduction.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_rank, check_same_dtype
from .elementwise import add, broadcast_index, broadcast_shape


def matmul(a: te.Tensor, b: te.Tensor, transpose_a: bool = False, transpose_b: bool = False,
           name: str = "matmul") -> te.Tensor:
    """The matrix product of 2-D `a` (M, K) and `b` (K, N), either given transposed."""
    check_rank(a, 2, "matmul", "K, M" if transpose_a else "M, K")
    check_rank(b, 2, "matmul", "N, K" if transpose_b else "K, N")
    check_same_dtype([a, b], "matmul")
    (m, ka), (kb, n) = _rows_cols(a, transpose_a), _rows_cols(b, transpose_b)
    _check_inner("matmul", a, b, ka, kb)
    k = te.reduce_axis(ka, "k")

    def body(i, j):
        left = a[k, i] if transpose_a else a[i, k]
        right = b[j, k] if transpose_b else b[k, j]
        return te.sum(left * right, axis=k)

    return te.compute((m, n), body, name=name, tag="matmul",
                      attrs={"transpose_a": transpose_a, "transpose_b": transpose_b})


def batch_matmul(a: te.Tensor, b: te.Tensor, transpose_a: bool = False, transpose_b: bool = False,
                 name: str = "batch_matmul") -> te.Tensor:
    """Matrix products over the last two axes of `a` (..., M, K) and `b` (..., K, N).

    The leading (batch) axes broadcast as in NumPy's matmul; an operand of rank 2 is shared by every batch.
    """
    for t in (a, b):
        if t.ndim < 2:
            raise ShapeError(f"batch_matmul: {t.name} needs at least 2 dimensions, got shape {t.shape}")
    check_same_dtype([a, b], "batch_matmul")
    (m, ka), (kb, n) = _rows_cols(a, transpose_a), _rows_cols(b, transpose_b)
    _check_inner("batch_matmul", a, b, ka, kb)
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    k = te.reduce_axis(ka, "k")

    def body(*idx):
        lead, i, j = idx[:-2], idx[-2], idx[-1]
        left = a[(*broadcast_index(a.shape[:-2], lead), *((k, i) if transpose_a else (i, k)))]
        right = b[(*broadcast_index(b.shape[:-2], lead), *((j, k) if transpose_b else (k, j)))]
        return te.sum(left * right, axis=k)

    return te.compute((*batch, m, n), body, name=name, tag="batch_matmul",
                      attrs={"transpose_a": transpose_a, "transpose_b": transpose_b})


def dense(x: te.Tensor, weight: te.Tensor, bias: te.Tensor | None = None, name: str = "dense") -> te.Tensor:
    """x (batch, in) times the transpose of weight (out, in), plus bias (out,) if given.

    With a bias the product is a stage `{name}_matmul` (tag "dense") and the sum is a broadcast add named `name`.
    """
    check_rank(x, 2, "dense", "batch, in")
    check_rank(weight, 2, "dense", "out, in")
    check_same_dtype([x, weight], "dense")
    _check_inner("dense", x, weight, x.shape[1], weight.shape[1])
    k = te.reduce_axis(x.shape[1], "k")
    product = te.compute((x.shape[0], weight.shape[0]), lambda i, j: te.sum(x[i, k] * weight[j, k], axis=k),
                         name=name if bias is None else f"{name}_matmul", tag="dense")
    if bias is None:
        return product
    if bias.shape != (weight.shape[0],):
        raise ShapeError(f"dense: bias {bias.name} must have shape ({weight.shape[0]},), got {bias.shape}")
    return add(product, bias, name=name)


def packed_matmul(a: te.Tensor, b: te.Tensor, transpose_a: bool = False, transpose_b: bool = False,
                  mr: int = 6, nr: int = 16, name: str = "matmul") -> te.Tensor:
    """matmul through packed panels, the way BLAS kernels run: `{name}_bpack` holds B as panels of `nr` columns
    (`pack_matmul_rhs`; a constant B can be packed once, ahead of time) and `panel_matmul` does the rest."""
    check_rank(b, 2, "packed_matmul", "N, K" if transpose_b else "K, N")
    n = _rows_cols(b, transpose_b)[1]
    bpack = pack_matmul_rhs(b, transpose_b, nr, name=f"{name}_bpack")
    return panel_matmul(a, bpack, n, transpose_a, mr, name=name)


def pack_matmul_rhs(b: te.Tensor, transpose_b: bool = False, nr: int = 16, name: str = "bpack") -> te.Tensor:
    """B (K, N) (or (N, K) transposed) as (ceil(N / nr), K, nr) column panels, N padded with zeros."""
    check_rank(b, 2, "pack_matmul_rhs", "N, K" if transpose_b else "K, N")
    if nr < 1:
        raise ShapeError(f"packed_matmul: panel sizes must be positive, got nr={nr}")
    k, n = _rows_cols(b, transpose_b)
    zero = E.const(0, b.dtype)

    def b_panel(jo, kk, ji):
        col = jo * nr + ji
        safe = E.minimum(col, n - 1)
        return E.select(col < n, b[safe, kk] if transpose_b else b[kk, safe], zero)

    return te.compute((-(-n // nr), k, nr), b_panel, name=name, tag="pack")


def panel_matmul(a: te.Tensor, bpack: te.Tensor, n: int, transpose_a: bool = False, mr: int = 6,
                 bias: te.Tensor | None = None, alpha: float = 1.0, beta: float = 1.0,
                 name: str = "matmul") -> te.Tensor:
    """alpha * A @ B (+ beta * bias over the columns) with B packed by `pack_matmul_rhs`: `{name}_apack` holds A
    as panels of `mr` rows (M padded by repeating A's last row), `{name}_padded` multiplies the panels, and the
    output (tag "packed_matmul") crops the padding. The padding lets a schedule run every mr x nr register tile
    without bounds checks, and a tile that reads A in place (the pack inlined) reads it unguarded: the padding
    rows' products are never read."""
    check_rank(a, 2, "packed_matmul", "K, M" if transpose_a else "M, K")
    if bpack.ndim != 3:
        raise ShapeError(f"panel_matmul: packed B must be (N / nr, K, nr), got {bpack.shape}")
    dtype = check_same_dtype([a, bpack], "packed_matmul")
    m, ka = _rows_cols(a, transpose_a)
    panels, kb, nr = bpack.shape
    _check_inner("packed_matmul", a, bpack, ka, kb)
    if mr < 1:
        raise ShapeError(f"packed_matmul: panel sizes must be positive, got mr={mr}")
    if not (panels - 1) * nr < n <= panels * nr:
        raise ShapeError(f"panel_matmul: {n} columns do not fit {panels} panels of {nr}")
    if bias is not None and bias.shape not in ((n,), (1, n), (1,), ()):
        raise ShapeError(f"panel_matmul: the bias must broadcast along the columns, got shape {bias.shape}")
    mp = -(-m // mr) * mr

    def a_panel(io, k, ii):
        safe = E.minimum(io * mr + ii, m - 1)  # rows past A's repeat its last: the output crops their products
        return a[k, safe] if transpose_a else a[safe, k]

    attrs = {"mr": mr, "nr": nr, "transpose_a": transpose_a}
    ap = te.compute((mp // mr, ka, mr), a_panel, name=f"{name}_apack", tag="pack")
    k = te.reduce_axis(ka, "k")
    padded = te.compute((mp, panels * nr),
                        lambda i, j: te.sum(ap[i // mr, k, i % mr] * bpack[j // nr, k, j % nr], axis=k),
                        name=f"{name}_padded", tag="packed_matmul_tiles", attrs=attrs)

    def output(i, j):
        value = padded[i, j] if alpha == 1.0 else padded[i, j] * E.const(alpha, dtype)
        if bias is None:
            return value
        term = bias[(j,) if bias.shape == (n,) else (0, j) if bias.ndim == 2 else (0,) * bias.ndim]
        return value + (term if beta == 1.0 else term * E.const(beta, dtype))

    return te.compute((m, n), output, name=name, tag="packed_matmul", attrs=attrs)


def _rows_cols(t: te.Tensor, transposed: bool) -> tuple[int, int]:
    rows, cols = t.shape[-2:]
    return (cols, rows) if transposed else (rows, cols)


def _check_inner(op: str, a: te.Tensor, b: te.Tensor, ka: int, kb: int) -> None:
    if ka != kb:
        raise ShapeError(f"{op}: the reduction extents differ: {a.name} {a.shape} gives {ka}, {b.name} {b.shape} "
                         f"gives {kb}")
