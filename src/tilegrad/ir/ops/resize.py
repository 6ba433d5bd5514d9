"""Resize (ONNX semantics) of the spatial axes of an NCHW-style tensor: nearest and linear modes.

An output coordinate maps to an input coordinate by the coordinate transformation mode; nearest rounds it by the
nearest mode, linear interpolates between the two neighbours along each resized axis (bilinear in 2-D).
Coordinates are computed in float32 in the generated code, once per output coordinate of each axis (a table
stage per axis), and in float64 by the reference.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...errors import ShapeError, UnsupportedFeatureError
from ...te import dims
from ...te import expr as E
from ...te import tensor as te
from ..registry import INJECTIVE, Sample, TensorType, declare

MODES = ("nearest", "linear")
TRANSFORMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
RESIZE_TABLE = "resize_table"  # the per-axis coordinate stages: kept apart (not inlined), computed once per call


def _check(mode, transform, nearest_mode):
    if mode not in MODES:
        raise UnsupportedFeatureError(f"resize mode {mode!r} is not supported; supported: {', '.join(MODES)}")
    if transform not in TRANSFORMS:
        raise UnsupportedFeatureError(f"coordinate transformation {transform!r} is not supported; "
                         f"supported: {', '.join(TRANSFORMS)}")
    if nearest_mode not in NEAREST:
        raise UnsupportedFeatureError(f"nearest mode {nearest_mode!r} is not supported; supported: {', '.join(NEAREST)}")


def _resize_type(x: TensorType, *, sizes, mode, transform, nearest_mode, scales=None) -> list[TensorType]:
    _check(mode, transform, nearest_mode)
    sizes = tuple(dims.dim(s) for s in sizes or ())
    if (len(sizes) != len(x.shape) or not all(dims.equal(s, n) for s, n in zip(sizes[:2], x.shape[:2]))
            or not all(dims.provably_le(1, s) for s in sizes)):
        raise ShapeError(f"output sizes {sizes} must keep the first two axes of {x.shape} and be positive")
    if transform in ("align_corners", "pytorch_half_pixel") and not all(
            dims.is_static((s,)) or dims.provably_le(2, s) for s in sizes[2:]):
        raise UnsupportedFeatureError(f"resize with {transform} to the dynamic sizes {sizes}: a size of 1 changes "
                                      "the transformation; give the dimensions a lower bound of at least 2")
    return [TensorType(sizes, x.dtype)]


def _source(out, n_in, n_out, transform, scale=None):
    """The input coordinate of output coordinate `out` (Python floats or te float expressions), at `scale` where
    ONNX's scales gave one (a fraction of a dynamic size, whose output size is rounded down), else n_out / n_in.
    Divided, not multiplied by a reciprocal, as ONNX writes it: a coordinate exactly halfway between two inputs
    stays exact in float32, so nearest's tie rule picks the same input as ONNX Runtime."""
    scale = _ratio(n_out, n_in) if scale is None else float(scale)
    if transform == "align_corners":
        if not _static(n_in, n_out):
            return out * _float(n_in - 1) / _float(n_out - 1)  # n_out >= 2: _resize_type
        return out * float(n_in - 1) / float(n_out - 1) if n_out > 1 else out * 0.0
    if transform == "asymmetric":
        return out / scale  # a division, as ONNX writes it: times 1/scale can miss a half and round the other way
    if transform == "pytorch_half_pixel" and _static(n_out) and n_out == 1:
        return out * 0.0
    return (out + 0.5) / scale - 0.5


def _static(*sizes) -> bool:
    return dims.is_static(sizes)


def _float(n):
    """A size as a float: a Python float, or a float32 expression of a dynamic dimension."""
    return float(n) if _static(n) else E.cast("float32", n)


def _ratio(n_out, n_in):
    """n_out / n_in: a number where the dimensions decide it (a whole factor of a dynamic size), else computed."""
    if _static(n_in, n_out):
        return n_out / n_in
    whole = dims.quotient(n_out, n_in)
    return float(whole) if whole is not None and _static(whole) else _float(n_out) / _float(n_in)


def _round(c, nearest_mode, floor):
    if nearest_mode == "floor":
        return floor(c)
    if nearest_mode == "ceil":
        return -floor(-c)
    if nearest_mode == "round_prefer_ceil":
        return floor(c + 0.5)
    return -floor(-c + 0.5)  # round half down


def _resize_ref(x, *, sizes, mode, transform, nearest_mode, scales=None):
    sizes = tuple(int(s) for s in sizes)
    axes = [d for d in range(2, x.ndim) if sizes[d] != x.shape[d] or True]
    out = np.empty(sizes, x.dtype)
    grids = []
    for d in axes:
        src = _source(np.arange(sizes[d], dtype=np.float64), x.shape[d], sizes[d], transform,
                      None if scales is None else scales[d])
        grids.append(src)
    if mode == "nearest":
        idx = [np.clip(_round(g, nearest_mode, np.floor), 0, x.shape[d] - 1).astype(int) for g, d in zip(grids, axes)]
        return x[np.ix_(range(sizes[0]), range(sizes[1]), *idx)].astype(x.dtype)
    lows, fracs = [], []
    for g, d in zip(grids, axes):
        g = np.clip(g, 0, x.shape[d] - 1)
        lo = np.floor(g).astype(int)
        lows.append(lo)
        fracs.append(g - lo)
    acc = np.zeros(sizes, np.float64)
    for corner in itertools.product((0, 1), repeat=len(axes)):
        idx = [np.minimum(lo + c, x.shape[d] - 1) for lo, c, d in zip(lows, corner, axes)]
        weight = np.ones(1)
        for k, (f, c) in enumerate(zip(fracs, corner)):
            shape = [1] * len(axes)
            shape[k] = -1
            weight = weight * (f if c else 1 - f).reshape(shape)
        acc += x[np.ix_(range(sizes[0]), range(sizes[1]), *idx)] * weight
    out[...] = acc
    return out


def _resize_te(x, *, sizes, mode, transform, nearest_mode, scales=None):
    sizes = tuple(dims.dim(s) for s in sizes)
    spatial = range(2, x.ndim)
    tables = [_axis_tables(x.shape[d], sizes[d], d, mode, transform, nearest_mode,
                           None if scales is None else scales[d]) for d in spatial]

    if mode == "nearest":
        def body(*i):
            return x[(*i[:2], *(t[0][i[d]] for t, d in zip(tables, spatial)))]
        return te.compute(sizes, body, name="resize", tag="injective")

    def body(*i):
        picks = [(t[0][i[d]], t[1][i[d]], t[2][i[d]]) for t, d in zip(tables, spatial)]

        def blend(axis: int, picked: tuple) -> E.Expr:
            """Interpolate along the spatial axes from `axis` on. At the far edge both neighbours are the last
            element, which is then taken as it is: an inf there stays inf (not inf * 0 = NaN), as in ONNX Runtime."""
            if axis == len(picks):
                return x[(*i[:2], *picked)]
            lo, hi, f = picks[axis]
            low, high = blend(axis + 1, (*picked, lo)), blend(axis + 1, (*picked, hi))
            return E.select(lo.eq(hi), low, low * (1.0 - f) + high * f)

        return blend(0, ())

    return te.compute(sizes, body, name="resize", tag="injective")


def _axis_tables(n_in, n_out, d: int, mode, transform, nearest_mode, scale=None) -> tuple[te.Tensor, ...]:
    """Per output coordinate of axis `d`, what it reads: its input index (nearest), or its two neighbours and the
    weight of the second (linear). Computed once per call, each a stage of `n_out` values, instead of once per
    output element: an 8x upsampling recomputed each coordinate for 64 outputs (the measurement:
    docs/benchmarks.md, machine D, sixth session)."""

    def coord(o):
        return _source(E.cast("float32", o), n_in, n_out, transform, scale)

    def index(c):
        return E.minimum(E.maximum(E.cast(E.INDEX, c), 0), n_in - 1)

    def table(fn, what):
        return te.compute((n_out,), fn, name=f"resize_{what}{d}", tag=RESIZE_TABLE)

    if mode == "nearest":
        return (table(lambda o: index(_round(coord(o), nearest_mode, E.floor)), "index"),)

    def clamped(o):
        return E.minimum(E.maximum(coord(o), 0.0), _float(n_in - 1))

    return (table(lambda o: index(E.floor(clamped(o))), "low"),
            table(lambda o: index(E.floor(clamped(o)) + 1.0), "high"),
            table(lambda o: clamped(o) - E.floor(clamped(o)), "weight"))


declare("resize", kind=INJECTIVE, infer=_resize_type, reference=_resize_ref, compute=_resize_te,
        attrs={"sizes": None, "mode": "nearest", "transform": "half_pixel", "nearest_mode": "round_prefer_floor",
               "scales": None},
        samples=(Sample((((1, 2, 3, 4), "float32"),), {"sizes": (1, 2, 6, 9)}),
                 Sample((((1, 2, 5, 4), "float32"),), {"sizes": (1, 2, 3, 8), "mode": "linear"}),
                 Sample((((1, 1, 4, 4), "float32"),), {"sizes": (1, 1, 7, 3), "mode": "linear",
                                                       "transform": "align_corners"}),
                 Sample((((1, 1, 4, 6), "float32"),), {"sizes": (1, 1, 8, 3), "transform": "asymmetric",
                                                       "nearest_mode": "floor"})))
