"""Reductions over a set of axes (sum, mean, max, min, L2 norm), argmax and argmin, with ONNX's axes and keepdims,
and the cumulative sum and product along one axis.

Sums, means, maxima and minima are `te.nn.reduction`'s; the L2 norm is the square root of a sum of squares; argmax
(argmin) takes two stages, the maximum (minimum) and then the first (or last) index holding it. Products
(reduce_prod, cumprod) use the te product reducer, never exp(sum(log|x|)), which would lose signs and zeros.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError, UnsupportedFeatureError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ..registry import REDUCTION, Sample, TensorType, declare
from .operands import widened
from .shape import ints, normalize_axes, normalize_axis

_SAMPLES = (Sample((((3, 4, 5), "float32"),), {"keepdims": 0}),
            Sample((((3, 4, 5), "float32"),), {"axes": (-1, 0), "keepdims": 0}),
            Sample((((2, 6, 5), "float32"),), {"axes": (1,)}))


def _axes(ndim: int, axes) -> tuple[int, ...]:
    """Sorted reduced axes; None or an empty list means all of them (ONNX noop_with_empty_axes=0)."""
    axes = () if axes is None else ints(axes, "axes")
    return tuple(sorted(normalize_axes(axes, ndim))) if axes else tuple(range(ndim))


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims) -> tuple[int, ...]:
    if keepdims not in (0, 1):
        raise ShapeError(f"keepdims must be 0 or 1, got {keepdims!r}")
    return tuple(1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes)


def _rows(x: tuple[int, ...], *, axes, **_) -> tuple[int, ...] | None:
    """The axes a reduction keeps, when it reduces only trailing axes (so it can run row by row)."""
    rank = len(x)
    axes = tuple(range(rank)) if axes is None else tuple(sorted(a % rank for a in axes))
    keep = rank - len(axes)
    return x[:keep] if axes == tuple(range(keep, rank)) else None


def _reduction(name: str, te_reduce, np_reduce, floats_only: bool = False, widen: bool = False) -> None:
    """Declare `name` with the te compute `te_reduce(x, axes, keepdims)` and the reference `np_reduce(x, axes,
    keepdims)`, which accumulates in float64 for floats; with `widen`, float16 accumulates in float32."""
    def infer(x: TensorType, axes, keepdims) -> list[TensorType]:
        if x.dtype == "bool" or (floats_only and not E.is_float(x.dtype)):
            raise UnsupportedFeatureError(f"{name} needs a {'float' if floats_only else 'numeric'} input, got "
                                          f"{x.dtype}; insert a Cast")
        if not x.shape:
            raise ShapeError(f"{name} of a rank-0 tensor reduces nothing; use identity")
        return [TensorType(_reduced_shape(x.shape, _axes(len(x.shape), axes), keepdims), x.dtype)]

    def reference(x, axes, keepdims):
        wide = x.astype(np.float64) if E.is_float(str(x.dtype)) else x
        return np.asarray(np_reduce(wide, _axes(x.ndim, axes), bool(keepdims))).astype(x.dtype)

    def compute(x, axes, keepdims):
        return te_reduce(x, _axes(x.ndim, axes), bool(keepdims))

    declare(name, kind=REDUCTION, attrs={"axes": None, "keepdims": 1}, infer=infer, reference=reference,
            compute=widened(compute) if widen else compute, rows=_rows, samples=_SAMPLES)


def _l2_te(x, axes, keepdims):
    return nn.sqrt(nn.reduce_sum(nn.mul(x, x, name="reduce_l2_square"), axes, keepdims, name="reduce_l2_sum"),
                   name="reduce_l2")


_reduction("reduce_sum", nn.reduce_sum, lambda x, a, k: np.sum(x, a, dtype=x.dtype, keepdims=k), widen=True)
def _mean_ref(x, axes, keepdims):
    """The mean; over an empty set 0, as ONNX Runtime gives (not NumPy's NaN)."""
    return np.sum(x, axes, keepdims=keepdims) / max(1, int(np.prod([x.shape[a] for a in axes])))


_reduction("reduce_mean", nn.reduce_mean, _mean_ref, floats_only=True, widen=True)
def _lowest(dtype: np.dtype):
    """The identity of max (ONNX's result for an empty set): -inf, the least integer, or False."""
    return -np.inf if dtype.kind == "f" else False if dtype.kind == "b" else np.iinfo(dtype).min


def _highest(dtype: np.dtype):
    return np.inf if dtype.kind == "f" else True if dtype.kind == "b" else np.iinfo(dtype).max


_reduction("reduce_max", nn.reduce_max, lambda x, a, k: np.max(x, a, keepdims=k, initial=_lowest(x.dtype)))
_reduction("reduce_min", nn.reduce_min, lambda x, a, k: np.min(x, a, keepdims=k, initial=_highest(x.dtype)))
_reduction("reduce_prod", nn.reduce_prod, lambda x, a, k: np.prod(x, a, dtype=x.dtype, keepdims=k), widen=True)
_reduction("reduce_l2", _l2_te, lambda x, a, k: np.sqrt(np.sum(x * x, a, keepdims=k)), floats_only=True, widen=True)


# --- argmax and argmin: the extreme value, then the first (or last) index that holds it ---

def _arg_type(op: str):
    def infer(x: TensorType, axis, keepdims, select_last_index) -> list[TensorType]:
        if x.dtype == "bool":
            raise UnsupportedFeatureError(f"{op} needs a numeric input, got bool; insert a Cast")
        a = normalize_axis(axis, len(x.shape))
        return [TensorType(_reduced_shape(x.shape, (a,), keepdims), "int64")]
    return infer


def _arg_te(op: str, reduce_extreme):
    def compute(x: te.Tensor, axis, keepdims, select_last_index) -> te.Tensor:
        a = normalize_axis(axis, x.ndim)
        extremes = reduce_extreme(x, a, keepdims=True, name=f"{op}_{op[3:]}")
        k = te.reduce_axis(x.shape[a], f"r{a}")

        def body(*i):
            row = (*i[:a], 0, *i[a + 1:]) if keepdims else (*i[:a], 0, *i[a:])  # the index into the extremes
            v, extreme = x[(*row[:a], k, *row[a + 1:])], extremes[row]
            at_extreme = v.eq(extreme)
            if E.is_float(x.dtype):  # a NaN is the extreme (max and min propagate it), found like NumPy's argmax
                at_extreme = E.logical_or(at_extreme, E.logical_and(extreme.ne(extreme), v.ne(v)))
            if select_last_index:
                return te.max(E.select(at_extreme, k, E.const(-1, E.INDEX)), axis=k)
            return te.min(E.select(at_extreme, k, E.const(x.shape[a], E.INDEX)), axis=k)

        shape = _reduced_shape(x.shape, (a,), keepdims)
        return te.compute(shape, body, name=op, tag="reduce", attrs={"axis": a, "keepdims": bool(keepdims)})
    return compute


def _arg_ref(np_arg):
    def reference(x, axis, keepdims, select_last_index):
        if select_last_index:  # the first index in the flipped axis, counted from the end
            x = np.flip(x, axis)
            return (x.shape[axis] - 1 - np_arg(x, axis, keepdims=bool(keepdims))).astype(np.int64)
        return np_arg(x, axis, keepdims=bool(keepdims)).astype(np.int64)
    return reference


for _op, _reduce_extreme, _np_arg in (("argmax", nn.reduce_max, np.argmax), ("argmin", nn.reduce_min, np.argmin)):
    declare(_op, kind=REDUCTION, attrs={"axis": 0, "keepdims": 1, "select_last_index": 0}, infer=_arg_type(_op),
            reference=_arg_ref(_np_arg), compute=_arg_te(_op, _reduce_extreme),
            samples=(Sample((((3, 4, 5), "float32"),)), Sample((((3, 4, 5), "float32"),), {"axis": -1, "keepdims": 0}),
                     Sample((((4, 7), "int32"),), {"axis": 1}),
                     Sample((((4, 7), "int32"),), {"axis": 1, "keepdims": 0, "select_last_index": 1})))


# --- cumulative sum and product: each output combines the input up to (or, reversed, from) its position ---

def _cumulative_type(op):
    def infer(x: TensorType, *, axis, exclusive, reverse) -> list[TensorType]:
        if x.dtype == "bool":
            raise ShapeError(f"{op} needs a numeric input, got bool; insert a Cast")
        normalize_axis(axis, len(x.shape))
        return [x]
    return infer


def _cumulative_ref(accumulate, identity):
    def reference(x, *, axis, exclusive, reverse):
        a = normalize_axis(axis, x.ndim)
        wide = x.astype(np.float64) if E.is_float(str(x.dtype)) else x
        y = np.flip(wide, a) if reverse else wide
        y = accumulate(y, a)
        if exclusive:
            first = np.full_like(np.take(y, [0], a), identity)
            y = np.concatenate([first, np.take(y, range(x.shape[a] - 1), a)], a)
        return (np.flip(y, a) if reverse else y).astype(x.dtype)
    return reference


def _cumulative_te(op, reducer, identity):
    def compute(x, *, axis, exclusive, reverse):
        """A reduction over the whole axis of the elements selected by position: k <= i (k < i when exclusive),
        or k >= i (k > i) when reversed; the others count as the identity."""
        a = normalize_axis(axis, x.ndim)
        k = te.reduce_axis(x.shape[a], f"r{a}")

        def body(*i):
            if reverse:
                chosen = k > i[a] if exclusive else k >= i[a]
            else:
                chosen = k < i[a] if exclusive else k <= i[a]
            return reducer(E.select(chosen, x[(*i[:a], k, *i[a + 1:])], E.const(identity, x.dtype)), axis=k)

        return te.compute(x.shape, body, name=op, tag="reduce", attrs={"axis": a})
    return compute


for _op, _accumulate, _reducer, _identity in (("cumsum", np.cumsum, te.sum, 0), ("cumprod", np.cumprod, te.prod, 1)):
    declare(_op, kind=REDUCTION, attrs={"axis": 0, "exclusive": 0, "reverse": 0}, infer=_cumulative_type(_op),
            reference=_cumulative_ref(_accumulate, _identity), compute=_cumulative_te(_op, _reducer, _identity),
            samples=(Sample((((3, 7), "float32"),), {"axis": 1}),
                     Sample((((4, 3, 5), "float32"),), {"axis": 0, "exclusive": 1, "reverse": 1}),
                     Sample((((6, 4), "int64"),), {"axis": -2, "reverse": 1})))
