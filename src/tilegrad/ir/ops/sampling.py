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
from ..registry import INJECTIVE, REDUCTION, Sample, TensorType, declare

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


# --- roi_align: the average (or maximum) of bilinear samples on a regular grid in each bin of each region ---
# A batch index outside the batch reads its nearest image (ONNX Runtime refuses it), so no read leaves x.

ROI_MODES = ("avg", "max")


def _roi_axis(rois, first: int, size: int, bins: int, samples: int, scale: float, half_pixel: int, name: str):
    """(index, weight) stages of shape (R, bins, samples, 2): the two rows (or columns) each sample of each bin
    reads and their bilinear weights, zero for a sample outside the image (as ONNX Runtime has it: beyond one
    pixel past either edge). `first` is the column of the region's start along this axis in `rois`."""
    offset = 0.5 if half_pixel else 0.0

    def coord(r, p, s):
        start = E.cast("float32", rois[r, first]) * scale - offset
        extent = E.cast("float32", rois[r, first + 2]) * scale - offset - start
        extent = extent if half_pixel else E.maximum(extent, 1.0)
        step = extent * (1.0 / bins)
        return start + E.cast("float32", p) * step + (E.cast("float32", s) + 0.5) * step * (1.0 / samples)

    c = te.compute((rois.shape[0], bins, samples), coord, name=f"{name}_coord", tag="sampling_taps")

    def corners(r, p, s):
        v = c[r, p, s]
        low = E.floor(E.maximum(v, 0.0))
        at_edge = low >= size - 1.0
        return v, E.select(at_edge, size - 1.0, low), E.select(at_edge, size - 1.0, low + 1.0), at_edge

    def index(r, p, s, j):
        _, low, high, _ = corners(r, p, s)
        return E.cast("int64", E.select(j.eq(0), low, high))

    def weight(r, p, s, j):
        v, low, _, at_edge = corners(r, p, s)
        frac = E.select(at_edge, 0.0, E.maximum(v, 0.0) - low)
        valid = E.logical_and(v >= -1.0, v <= float(size))
        return E.select(valid, E.select(j.eq(0), 1.0 - frac, frac), 0.0)

    shape = (rois.shape[0], bins, samples, 2)
    return (te.compute(shape, index, name=f"{name}_index", tag="sampling_taps"),
            te.compute(shape, weight, name=f"{name}_weight", tag="sampling_taps"))


def _roi_align_type(x: TensorType, rois: TensorType, batch_indices: TensorType, *, mode, output_height,
                    output_width, sampling_ratio, spatial_scale, half_pixel):
    if mode not in ROI_MODES:
        raise ShapeError(f"roi_align mode {mode!r} is not supported; supported: {', '.join(ROI_MODES)}")
    if len(x.shape) != 4 or rois.shape[1:] != (4,) or batch_indices.shape != rois.shape[:1]:
        raise ShapeError(f"roi_align needs x (N, C, H, W), rois (R, 4) and batch_indices (R,), got {x.shape}, "
                         f"{rois.shape} and {batch_indices.shape}")
    if not E.is_float(x.dtype) or rois.dtype != x.dtype or batch_indices.dtype not in ("int32", "int64"):
        raise ShapeError(f"roi_align needs float x and rois of one dtype and integer batch indices, got {x.dtype}, "
                         f"{rois.dtype} and {batch_indices.dtype}")
    if not isinstance(sampling_ratio, int) or sampling_ratio < 1:
        raise ShapeError(f"roi_align sampling_ratio {sampling_ratio!r} must be a positive integer (0, adaptive, "
                         f"makes the sample count depend on the regions' data)")
    return [TensorType((rois.shape[0], x.shape[1], int(output_height), int(output_width)), x.dtype)]


def _roi_axis_ref(rois, first, size, bins, samples, scale, half_pixel):
    """NumPy's (low, high, low weight, high weight), each (R, bins, samples), of one axis."""
    offset = 0.5 if half_pixel else 0.0
    start = rois[:, first] * scale - offset
    extent = rois[:, first + 2] * scale - offset - start
    extent = extent if half_pixel else np.maximum(extent, 1.0)
    step = (extent / bins)[:, None, None]
    v = start[:, None, None] + np.arange(bins)[None, :, None] * step + (np.arange(samples) + 0.5) * step / samples
    low = np.floor(np.maximum(v, 0.0))
    at_edge = low >= size - 1
    frac = np.where(at_edge, 0.0, np.maximum(v, 0.0) - low)
    valid = (v >= -1.0) & (v <= size)
    low = np.where(at_edge, size - 1, low).astype(np.int64)
    high = np.where(at_edge, size - 1, low + 1).astype(np.int64)
    return low, high, np.where(valid, 1.0 - frac, 0.0), np.where(valid, frac, 0.0)


def _roi_align_ref(x, rois, batch_indices, *, mode, output_height, output_width, sampling_ratio, spatial_scale,
                   half_pixel):
    _roi_align_type(TensorType(x.shape, str(x.dtype)), TensorType(rois.shape, str(rois.dtype)),
                    TensorType(batch_indices.shape, str(batch_indices.dtype)), mode=mode, output_height=output_height,
                    output_width=output_width, sampling_ratio=sampling_ratio, spatial_scale=spatial_scale,
                    half_pixel=half_pixel)
    r64 = rois.astype(np.float64)
    ys = _roi_axis_ref(r64, 1, x.shape[2], output_height, sampling_ratio, spatial_scale, half_pixel)
    xs = _roi_axis_ref(r64, 0, x.shape[3], output_width, sampling_ratio, spatial_scale, half_pixel)
    out = np.zeros((rois.shape[0], x.shape[1], output_height, output_width))
    for r, n in enumerate(np.clip(batch_indices, 0, x.shape[0] - 1)):
        image = x[n].astype(np.float64)
        terms = []
        for (yi, yw), (xi, xw) in itertools.product(((ys[0][r], ys[2][r]), (ys[1][r], ys[3][r])),
                                                    ((xs[0][r], xs[2][r]), (xs[1][r], xs[3][r]))):
            # (C, bins_y, samples_y, bins_x, samples_x)
            picked = image[:, yi[:, :, None, None], xi[None, None, :, :]]
            terms.append(picked * (yw[:, :, None, None] * xw[None, None, :, :]))
        if mode == "avg":
            out[r] = sum(terms).sum(axis=(2, 4)) / (sampling_ratio * sampling_ratio)
        else:
            out[r] = np.max(np.maximum.reduce(terms), axis=(2, 4))
    return out.astype(x.dtype)


def _roi_align_te(x, rois, batch_indices, *, mode, output_height, output_width, sampling_ratio, spatial_scale,
                  half_pixel):
    (out,) = _roi_align_type(TensorType(x.shape, x.dtype), TensorType(rois.shape, rois.dtype),
                             TensorType(batch_indices.shape, batch_indices.dtype), mode=mode,
                             output_height=output_height, output_width=output_width, sampling_ratio=sampling_ratio,
                             spatial_scale=spatial_scale, half_pixel=half_pixel)
    y_index, y_weight = _roi_axis(rois, 1, x.shape[2], output_height, sampling_ratio, spatial_scale, half_pixel,
                                  "roi_align_y")
    x_index, x_weight = _roi_axis(rois, 0, x.shape[3], output_width, sampling_ratio, spatial_scale, half_pixel,
                                  "roi_align_x")
    sy, sx = te.reduce_axis(sampling_ratio, "sy"), te.reduce_axis(sampling_ratio, "sx")

    def body(r, c, ph, pw):
        n = E.minimum(E.maximum(E.cast("int64", batch_indices[r]), 0), x.shape[0] - 1)
        terms = [E.cast("float32", x[n, c, y_index[r, ph, sy, jy], x_index[r, pw, sx, jx]])
                 * y_weight[r, ph, sy, jy] * x_weight[r, pw, sx, jx] for jy, jx in itertools.product((0, 1), (0, 1))]
        if mode == "avg":
            return te.sum(terms[0] + terms[1] + terms[2] + terms[3], axis=[sy, sx])
        return te.max(E.maximum(E.maximum(terms[0], terms[1]), E.maximum(terms[2], terms[3])), axis=[sy, sx])

    total = te.compute(out.shape, body, name="roi_align_samples", tag="reduce")
    scale = 1.0 / (sampling_ratio * sampling_ratio) if mode == "avg" else 1.0
    return te.compute(out.shape, lambda *i: E.cast(x.dtype, total[i] * scale), name="roi_align", tag="elemwise")


declare("roi_align", kind=REDUCTION, num_inputs=3, infer=_roi_align_type, reference=_roi_align_ref,
        compute=_roi_align_te, attrs={"mode": "avg", "output_height": 1, "output_width": 1, "sampling_ratio": 2,
                                      "spatial_scale": 1.0, "half_pixel": 1},
        samples=(Sample((((2, 3, 6, 5), "float32"), ((4, 4), "float32"), ((4,), "int64")),
                        {"output_height": 3, "output_width": 2, "spatial_scale": 2.0}),
                 Sample((((1, 2, 5, 7), "float32"), ((3, 4), "float32"), ((3,), "int32")),
                        {"mode": "max", "output_height": 2, "output_width": 3, "sampling_ratio": 3,
                         "half_pixel": 0})))
