"""Sampling an image at data-dependent points: grid_sample (ONNX GridSample) and roi_align (ONNX RoiAlign).

The points come from a tensor, so every output element reads the input at computed indices: nearest, linear or
cubic taps of a spatial point, with ONNX's rules for points outside the image (zeros, border, reflection). The
coordinate arithmetic is written once over a small namespace of `where`/`floor`/... so that the NumPy reference
(float64 arrays) and the TE compute (float32 expressions) follow the same formulas.
"""

from __future__ import annotations

import itertools
import types

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import tensor as te
from ..registry import INJECTIVE, Sample, TensorType, declare

MODES = ("nearest", "linear", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_ALPHA = -0.75

NUMPY = types.SimpleNamespace(where=np.where, floor=np.floor, rint=np.rint, minimum=np.minimum,
                              maximum=np.maximum, both=np.logical_and)
EXPR = types.SimpleNamespace(where=E.select, floor=E.floor, rint=E.round_, minimum=E.minimum, maximum=E.maximum,
                             both=E.logical_and)


def _denormalize(g, n: int, align_corners: int):
    """The pixel coordinate of a grid value in [-1, 1] along an axis of `n` pixels."""
    return (g + 1.0) * ((n - 1) / 2) if align_corners else ((g + 1.0) * n - 1.0) * 0.5


def _bounds(n: int, align_corners: int) -> tuple[float, float]:
    """The span a reflection folds coordinates into: pixel centres, or pixel edges without align_corners."""
    return (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)


def _reflect(v, lo: float, hi: float, k):
    """`v` reflected by the borders lo and hi until it lies between them, as ONNX's reference does it."""
    span = hi - lo
    if span == 0:
        return v * 0.0 + lo

    def folded(dx, near, far):
        times = k.floor(dx * (1.0 / span))
        rest = dx - times * span
        even = (times - 2.0 * k.floor(times * 0.5)) < 0.5
        return k.where(even, near + rest, far - rest) if near < far else k.where(even, near - rest, far + rest)

    return k.where(v < lo, folded(lo - v, lo, hi), k.where(v > hi, folded(v - hi, hi, lo), v))


def _clamp(v, lo, hi, k):
    return k.minimum(k.maximum(v, lo), hi)


def _source(g, n: int, mode: str, padding_mode: str, align_corners: int, k):
    """The pixel coordinate a grid value samples, after rounding (nearest) and the padding mode's folding.
    ONNX's reference also clamps a cubic coordinate for border padding, where ONNX Runtime (and PyTorch) clamp only
    the taps; tilegrad follows ONNX Runtime."""
    c = _denormalize(g, n, align_corners)
    if mode == "nearest":
        c = k.rint(c)
    lo, hi = _bounds(n, align_corners)
    if padding_mode == "border" and mode != "cubic":  # cubic clamps each tap instead, as ONNX Runtime does
        return k.where(k.both(c >= lo, c <= hi), c, _clamp(c, 0.0, n - 1.0, k))
    if padding_mode == "reflection":
        return _reflect(c, lo, hi, k)
    return c


def _cubic_weights(t):
    """Keys' cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from the floor, t in [0, 1)."""
    a = CUBIC_ALPHA
    return (((a * (t + 1.0) - 5.0 * a) * (t + 1.0) + 8.0 * a) * (t + 1.0) - 4.0 * a,
            ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
            ((a + 2.0) * (1.0 - t) - (a + 3.0)) * (1.0 - t) * (1.0 - t) + 1.0,
            ((a * (2.0 - t) - 5.0 * a) * (2.0 - t) + 8.0 * a) * (2.0 - t) - 4.0 * a)


def _taps(c, mode: str, k, trunc):
    """(integer tap positions as floats, weights) of coordinate `c` along one axis."""
    if mode == "nearest":
        return [trunc(c)], [1.0]
    low = k.floor(c)
    t = c - low
    if mode == "linear":
        return [low, low + 1.0], [1.0 - t, t]
    return [low - 1.0, low, low + 1.0, low + 2.0], list(_cubic_weights(t))


def _tap_index(i, n: int, padding_mode: str, align_corners: int, k):
    """(index inside [0, n), whether the tap reads the image) of tap position `i` (a whole number)."""
    if padding_mode == "zeros":
        return _clamp(i, 0.0, n - 1.0, k), k.both(i >= 0.0, i <= n - 1.0)
    if padding_mode == "border":
        return _clamp(i, 0.0, n - 1.0, k), None
    lo, hi = _bounds(n, align_corners)
    return _clamp(_trunc_toward_zero(_reflect(i, lo, hi, k), k), 0.0, n - 1.0, k), None


def _trunc_toward_zero(v, k):
    return k.where(v < 0.0, -k.floor(-v), k.floor(v))


def _check(x: TensorType, grid: TensorType, mode, padding_mode) -> int:
    if mode not in MODES:
        raise ShapeError(f"grid_sample mode {mode!r} is not supported; supported: {', '.join(MODES)}")
    if padding_mode not in PADDING_MODES:
        raise ShapeError(f"grid_sample padding mode {padding_mode!r} is not supported; supported: "
                         f"{', '.join(PADDING_MODES)}")
    nd = len(x.shape) - 2
    if nd < 1 or len(grid.shape) != nd + 2 or grid.shape[-1] != nd or grid.shape[0] != x.shape[0]:
        raise ShapeError(f"grid_sample needs x (N, C, {nd} spatial axes) and a grid (N, ..., {nd}) of {nd}-D "
                         f"points over the same batch, got x {x.shape} and grid {grid.shape}")
    for t, what in ((x, "x"), (grid, "grid")):
        if not E.is_float(t.dtype):
            raise ShapeError(f"grid_sample {what} must have a float dtype, got {t.dtype}")
    return nd


def _grid_sample_type(x: TensorType, grid: TensorType, *, mode, padding_mode, align_corners):
    _check(x, grid, mode, padding_mode)
    return [TensorType((*x.shape[:2], *grid.shape[1:-1]), x.dtype)]


def _grid_sample_ref(x, grid, *, mode, padding_mode, align_corners):
    nd = x.ndim - 2
    sizes = x.shape[2:]
    g = grid.astype(np.float64)
    per_axis = []
    for d, n in enumerate(sizes):
        c = _source(g[..., nd - 1 - d], n, mode, padding_mode, align_corners, NUMPY)
        positions, weights = _taps(c, mode, NUMPY, lambda v: _trunc_toward_zero(v, NUMPY))
        per_axis.append([(*_tap_index(i, n, padding_mode, align_corners, NUMPY), w)
                         for i, w in zip(positions, weights)])
    batch = np.arange(x.shape[0]).reshape(-1, *[1] * (grid.ndim - 2))
    total = np.zeros((x.shape[0], *grid.shape[1:-1], x.shape[1]))
    for combo in itertools.product(*per_axis):
        value = x[(batch, slice(None), *(idx.astype(np.int64) for idx, _, _ in combo))].astype(np.float64)
        weight = np.ones(grid.shape[:-1])
        for _, inside, w in combo:
            weight = weight * w * (1.0 if inside is None else inside)
        total += value * weight[..., None]
    return np.moveaxis(total, -1, 1).astype(x.dtype)


def _pick(j, values):
    """values[j] for a loop variable j over len(values) taps."""
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = E.select(j.eq(k), values[k], out)
    return out


def _axis_taps(grid, d: int, size: int, mode, padding_mode, align_corners):
    """(index, weight) tensors of shape (N, ..., taps) of axis d: the pixels each grid point reads along the axis
    and their interpolation weights (zero for a tap outside the image with zeros padding). Each is its own stage
    (tag "sampling_taps", not inlined), so the coordinate arithmetic is computed once per point, not once per
    tap and use."""
    points, nd = grid.shape[:-1], grid.shape[-1]

    def source(*p):
        return _source(E.cast("float32", grid[(*p, nd - 1 - d)]), size, mode, padding_mode, align_corners, EXPR)

    coord = te.compute(points, source, name=f"grid_sample_coord{d}", tag="sampling_taps")

    def taps(*p):
        return _taps(coord[p], mode, EXPR, lambda v: _trunc_toward_zero(v, EXPR))

    def index(*pj):
        positions = taps(*pj[:-1])[0]
        return _pick(pj[-1], [E.cast("int64", _tap_index(i, size, padding_mode, align_corners, EXPR)[0])
                              for i in positions])

    def weight(*pj):
        positions, weights = taps(*pj[:-1])
        gated = []
        for i, w in zip(positions, weights):
            inside = _tap_index(i, size, padding_mode, align_corners, EXPR)[1]
            gated.append(E.as_expr(w, "float32") if inside is None else E.select(inside, w, 0.0))
        return _pick(pj[-1], gated)

    shape = (*points, {"nearest": 1, "linear": 2, "cubic": 4}[mode])
    return (te.compute(shape, index, name=f"grid_sample_index{d}", tag="sampling_taps"),
            te.compute(shape, weight, name=f"grid_sample_weight{d}", tag="sampling_taps"))


def _grid_sample_te(x, grid, *, mode, padding_mode, align_corners):
    """Per axis, the taps' indices and weights (stages of their own); then the weighted sum of the taps."""
    _check(TensorType(x.shape, x.dtype), TensorType(grid.shape, grid.dtype), mode, padding_mode)
    per_axis = [_axis_taps(grid, d, size, mode, padding_mode, align_corners) for d, size in enumerate(x.shape[2:])]

    def body(n, c, *o):
        total = None
        for combo in itertools.product(*(range(index.shape[-1]) for index, _ in per_axis)):
            term = E.cast("float32", x[(n, c, *(index[(n, *o, j)] for (index, _), j in zip(per_axis, combo)))])
            for (_, weight), j in zip(per_axis, combo):
                term = term * weight[(n, *o, j)]
            total = term if total is None else total + term
        return E.cast(x.dtype, total)

    return te.compute((*x.shape[:2], *grid.shape[1:-1]), body, name="grid_sample", tag="injective")


declare("grid_sample", kind=INJECTIVE, num_inputs=2, infer=_grid_sample_type, reference=_grid_sample_ref,
        compute=_grid_sample_te, attrs={"mode": "linear", "padding_mode": "zeros", "align_corners": 0},
        samples=(Sample((((1, 2, 4, 5), "float32"), ((1, 3, 6, 2), "float32"))),
                 Sample((((2, 1, 3, 4), "float32"), ((2, 2, 3, 2), "float32")),
                        {"mode": "cubic", "padding_mode": "reflection", "align_corners": 1}),
                 Sample((((1, 2, 3, 4, 2), "float32"), ((1, 2, 2, 3, 3), "float32")),
                        {"mode": "nearest", "padding_mode": "border"})))
