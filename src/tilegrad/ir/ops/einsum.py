"""Einsum: a sum of products over labelled axes, in one compute.

The equation follows ONNX (and NumPy): comma-separated operand terms, an optional `->` and output term, letters
as labels, `...` for broadcast leading axes. Without `->` the output holds the ellipsis axes, then the labels
that occur once, in alphabetical order; an output of no labels is a scalar. The compute multiplies the operands at
each point and sums over the labels the output lacks; a diagonal (a label repeated in one term) indexes one axis twice.
"""

from __future__ import annotations

import numpy as np

from ...dtype import is_float
from ...errors import ShapeError
from ...te import tensor as te
from ..registry import OUT_FUSABLE, Sample, TensorType, declare


def _dtype(types) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise ShapeError(f"operands have different dtypes {sorted(dtypes)}; insert a Cast")
    return dtypes.pop()


def _einsum_terms(equation, shapes) -> tuple[list[list[str]], list[str], dict[str, int]]:
    """The labels of each operand and of the output (an ellipsis becomes labels "..0", "..1", aligned at the
    right and broadcast), and each label's extent."""
    if not isinstance(equation, str) or not equation:
        raise ShapeError(f"einsum needs an equation such as 'ij,jk->ik', got {equation!r}")
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    parts = lhs.split(",")
    if len(parts) != len(shapes):
        raise ShapeError(f"einsum equation {equation!r} names {len(parts)} operand(s), got {len(shapes)}")
    ellipsis_rank = 0
    for part, shape in zip(parts, shapes):
        explicit = len(part.replace("...", ""))
        if "..." in part:
            ellipsis_rank = max(ellipsis_rank, len(shape) - explicit)
        elif explicit != len(shape):
            raise ShapeError(f"einsum term {part!r} has {explicit} labels for an operand of rank {len(shape)}")

    def labels(part: str, rank: int) -> list[str]:
        head, dots, tail = part.partition("...")
        for c in head + tail:
            if not c.isalpha():
                raise ShapeError(f"einsum equation {equation!r} has the label {c!r}; labels are letters")
        fill = rank - len(head) - len(tail) if dots else 0
        return list(head) + [f"..{d}" for d in range(ellipsis_rank - fill, ellipsis_rank)] + list(tail)
    terms = [labels(p, len(s)) for p, s in zip(parts, shapes)]
    extents: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        for label, n in zip(term, shape):
            if extents.get(label, 1) not in (1, n) and n != 1:
                raise ShapeError(f"einsum label {label!r} has extents {extents[label]} and {n}")
            extents[label] = max(extents.get(label, 1), n)
    if arrow:
        out = labels(rhs, ellipsis_rank + len(rhs.replace("...", "")))
        unknown = [c for c in out if c not in extents]
        if unknown:
            raise ShapeError(f"einsum output labels {unknown} name no input axis")
    else:
        flat = [c for t in terms for c in t if not c.startswith("..")]
        out = [f"..{d}" for d in range(ellipsis_rank)] + sorted(c for c in set(flat) if flat.count(c) == 1)
    return terms, out, extents


def _einsum_type(*xs, equation):
    dtype = _dtype(xs)
    _, out, extents = _einsum_terms(equation, [x.shape for x in xs])
    return [TensorType(tuple(extents[c] for c in out), dtype)]


def _einsum_ref(*xs, equation):
    wide = np.float64 if is_float(str(xs[0].dtype)) else np.int64
    return np.einsum(equation, *(x.astype(wide) for x in xs)).astype(xs[0].dtype)


def _einsum_te(*xs, equation):
    """The sum over the labels missing from the output of the product of the operands."""
    _einsum_type(*(TensorType(x.shape, x.dtype) for x in xs), equation=equation)
    terms, out, extents = _einsum_terms(equation, [x.shape for x in xs])
    summed = [c for c in extents if c not in out]
    ks = {c: te.reduce_axis(extents[c], f"r{n}") for n, c in enumerate(summed)}

    def body(*i):
        at = {**dict(zip(out, i)), **ks}
        product = None
        for x, term in zip(xs, terms):
            v = x[tuple(0 if n == 1 and extents[c] != 1 else at[c] for c, n in zip(term, x.shape))]
            product = v if product is None else product * v
        return te.sum(product, axis=list(ks.values())) if ks else product

    return te.compute(tuple(extents[c] for c in out), body, name="einsum", tag="reduce" if ks else "broadcast",
                      attrs={"equation": equation})


declare("einsum", kind=OUT_FUSABLE, attrs={"equation": None}, infer=_einsum_type, reference=_einsum_ref,
        compute=_einsum_te, num_inputs=(1, -1), samples=(
            Sample((((2, 5, 4), "float32"), ((2, 4, 3), "float32")), {"equation": "bij,bjk->bik"}),
            Sample((((2, 3, 5, 4), "float32"), ((2, 3, 6, 4), "float32")), {"equation": "...qd,...kd->...qk"}),
            Sample((((4, 6), "float32"), ((6,), "float32")), {"equation": "ij,j"}),
            Sample((((5, 5, 3), "float32"),), {"equation": "iij->ji"}),
            Sample((((7,), "float64"), ((7,), "float64")), {"equation": "i,i"}),  # a scalar
            Sample((((3, 4), "float32"), ((4,), "float32")), {"equation": "ij,j->"}),
        ))
