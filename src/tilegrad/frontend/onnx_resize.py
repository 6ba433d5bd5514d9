"""ONNX Resize in every mode. The registry's `resize` (nearest and linear over the spatial axes, integer scales)
takes the common cases; every other one (cubic, antialias, exclude_outside, `axes`, keep_aspect_ratio_policy,
tf_crop_and_resize, half_pixel_symmetric, scales that give fractional sizes) is resized one axis at a time by
constant tables, since Resize is separable: output position i along an axis is sum_k w[i, k] * x[j[i, k]] (+ the
extrapolation value where tf_crop_and_resize leaves the input). The tables are what ONNX's reference
implementation computes: its 1-D interpolation applied to the identity matrix gives the weights of every output
position at once. In registry ops: a gather of the neighbours, a multiply by the weights, a sum over k.
The reader (`onnx.py`) imports this module, which registers it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from ..te import dims
from ..te import expr as E
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op

MODES = ("nearest", "linear", "cubic")
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
              "tf_crop_and_resize")
POLICIES = ("stretch", "not_larger", "not_smaller")
_BUILT_IN = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")  # the registry op's transforms


@onnx_op("Resize")
def _resize(b: B, name, x, roi=None, scales=None, sizes=None, *, mode="nearest",
            coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor", antialias=0,
            exclude_outside=0, keep_aspect_ratio_policy="stretch", axes=None, cubic_coeff_a=-0.75,
            extrapolation_value=0.0):
    transform = coordinate_transformation_mode
    if b.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates, floor for nearest
        scales, sizes, roi = roi, None, None
        transform, nearest_mode = "asymmetric", "floor"
    for what, value, allowed in (("mode", mode, MODES), ("coordinate_transformation_mode", transform, TRANSFORMS),
                                 ("keep_aspect_ratio_policy", keep_aspect_ratio_policy, POLICIES)):
        if value not in allowed:
            raise UnsupportedFeatureError(f"node {name!r}: Resize {what}={value!r} is not one of "
                                          f"{', '.join(allowed)}")
    rank = len(x.shape)
    chosen = list(range(rank)) if axes is None else [int(a) % rank for a in axes]
    factors, out = _plan(b, name, x.shape, chosen, scales, sizes, keep_aspect_ratio_policy)
    exact = all(_scaled_exactly(n, f, o) for n, f, o in zip(x.shape, factors, out))
    simple = (mode != "cubic" and not antialias and not exclude_outside and transform in _BUILT_IN
              and rank >= 2 and all(dims.equal(o, n) for o, n in zip(out[:2], x.shape[:2]))
              and x.dtype.startswith("float") and (exact or not dims.is_static(x.shape)))
    if simple:  # a fraction of a dynamic size: the registry op takes the scales, its sizes rounded down
        scaled = {} if exact else {"scales": tuple(float(f) for f in factors)}
        return b.op("resize", x, name=name, sizes=out, mode=mode, transform=transform, nearest_mode=nearest_mode,
                    **scaled)
    if not dims.is_static(x.shape):
        raise UnsupportedFeatureError(f"node {name!r}: Resize of the dynamic shape {list(x.shape)} in mode {mode!r} "
                                      f"with these attributes is not supported (only nearest and linear resizing "
                                      f"by whole factors, with the half_pixel, pytorch_half_pixel, align_corners "
                                      f"or asymmetric transformation)")
    if not x.dtype.startswith("float"):
        raise UnsupportedFeatureError(f"node {name!r}: Resize of {x.dtype} in mode {mode!r} with these attributes "
                                      f"is not supported (floats only)")
    box = _roi(b, name, roi, chosen, rank) if transform == "tf_crop_and_resize" else None
    wide = x if x.dtype == "float32" else b.op("cast", x, name=f"{name}_float32", to="float32")
    coeffs = _coefficients(mode, nearest_mode, cubic_coeff_a, antialias)
    moved = [a for a in chosen if box is not None or out[a] != x.shape[a] or factors[a] != 1.0]
    for a in moved:
        weights, fill = _axis_table(x.shape[a], factors[a], out[a], coeffs, transform, exclude_outside,
                                    None if box is None else box[a], extrapolation_value)
        wide = _apply(b, f"{name}_axis_{a}", wide, a, weights, fill)
    if not moved:
        wide = b.op("identity", wide, name=f"{name}_same")
    return wide if x.dtype == "float32" else b.op("cast", wide, name=name, to=x.dtype)


@onnx_op("Upsample")
def _upsample(b: B, name, x, factors=None, *, mode="nearest", scales=None):
    """Resize-10 under its older name (deprecated since opset 10): sizes floor(n * scale), asymmetric coordinates,
    nearest rounding down. The scales are an attribute up to opset 8, an input since opset 9."""
    given = scales if factors is None else constant_input(factors, "scales", name)
    if given is None:
        raise ShapeError(f"node {name!r}: Upsample needs scales (an input since opset 9, an attribute before)")
    given = [float(f) for f in np.ravel(given)]
    if len(given) != len(x.shape) or min(given) < 1:
        raise ShapeError(f"node {name!r}: Upsample scales {given} need one entry >= 1 per axis of the input of "
                         f"shape {list(x.shape)}")
    if factors is None:
        factors = b.const(np.array(given, np.float32), f"{name}_scales")
    inputs = (factors,) if b.opset < 11 else (None, factors)  # Resize-10 takes (X, scales), later (X, roi, scales)
    return _resize(b, name, x, *inputs, mode=mode, coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _scaled_exactly(n, factor: float, out) -> bool:
    """Whether `out` is `n` times `factor` exactly, so that the scale the registry op derives from the sizes is
    the one given (for a dynamic `n`, whatever its value: a whole factor)."""
    if isinstance(n, E.Expr) or isinstance(out, E.Expr):
        return float(factor).is_integer() and dims.equal(out, n * int(factor))
    return math.isclose(out, n * factor)


def _scaled_size(name, n, factor: float):
    """floor(n * factor): for a dynamic `n`, (n * p) // q for the fraction p / q the factor is."""
    if not isinstance(n, E.Expr):
        return int(math.floor(n * factor))
    ratio = Fraction(factor).limit_denominator(64)
    if float(ratio) != factor:
        raise UnsupportedFeatureError(f"node {name!r}: Resize scale {factor} of the dynamic dimension {n} is not a "
                                      f"fraction with a small denominator")
    return dims.dim(n * ratio.numerator // ratio.denominator)


def _plan(b: B, name, shape, chosen, scales, sizes, policy):
    """(the scale of every axis, the output shape), from `sizes` or `scales` (given for `chosen` axes), as ONNX
    defines them: sizes set the scales (one shared scale under a keep-aspect-ratio policy, the sizes then
    rounded half up), scales set the sizes (rounded down)."""
    size_data = constant_input(sizes, "sizes", name)
    factor_data = constant_input(scales, "scales", name)
    rank = len(shape)
    factors, out = [1.0] * rank, list(shape)
    if size_data is not None and np.size(size_data):
        wanted = [int(v) for v in np.ravel(size_data)]
        if len(wanted) != len(chosen):
            raise ShapeError(f"node {name!r}: Resize sizes {wanted} need one entry per resized axis {chosen}")
        if not dims.is_static(shape[a] for a in chosen):
            raise UnsupportedFeatureError(f"node {name!r}: Resize to the fixed sizes {wanted} from the dynamic "
                                          f"shape {list(shape)} is not supported")
        ratios = {a: w / shape[a] for a, w in zip(chosen, wanted)}
        if policy != "stretch":
            shared = (min if policy == "not_larger" else max)(ratios.values())
            ratios = dict.fromkeys(chosen, shared)
            wanted = [int(shared * shape[a] + 0.5) for a in chosen]
        for a, w in zip(chosen, wanted):
            factors[a], out[a] = ratios[a], w
    elif factor_data is not None and np.size(factor_data):
        given = [float(v) for v in np.ravel(factor_data)]
        if len(given) != len(chosen) or min(given) <= 0:
            raise ShapeError(f"node {name!r}: Resize scales {given} need one positive entry per resized axis "
                             f"{chosen}")
        for a, f in zip(chosen, given):
            factors[a], out[a] = f, _scaled_size(name, shape[a], f)
    else:
        raise ShapeError(f"node {name!r}: Resize needs scales or sizes")
    if any(dims.is_negative(o) for o in out):
        raise ShapeError(f"node {name!r}: Resize gives the negative output shape {out}")
    return factors, tuple(out)


def _roi(b: B, name, roi, chosen, rank):
    """(start, end) of the crop of every axis, in normalized coordinates (float32 scalars)."""
    data = constant_input(roi, "roi", name)
    box = [(0.0, 1.0)] * rank
    if data is None or not np.size(data):
        return box
    values = list(np.ravel(data).astype(np.float32))  # float32 arithmetic, as ONNX Runtime's and the reference's
    if len(values) != 2 * len(chosen):
        raise ShapeError(f"node {name!r}: Resize roi {[float(v) for v in values]} needs a start and an end per "
                         f"resized axis {chosen}")
    for k, a in enumerate(chosen):
        box[a] = (values[k], values[k + len(chosen)])
    return box


def _coefficients(mode, nearest_mode, cubic_coeff_a, antialias):
    """ONNX's reference coefficient function `(ratio, scale) -> weights of the neighbours` for the mode."""
    from onnx.reference.ops import op_resize as ref

    if mode == "nearest":
        return lambda ratio, scale: ref._nearest_coeffs(ratio, mode=nearest_mode)
    if mode == "cubic":
        cubic = ref._cubic_coeffs_antialias if antialias else ref._cubic_coeffs
        return lambda ratio, scale: cubic(ratio, scale, A=cubic_coeff_a)
    return ref._linear_coeffs_antialias if antialias else ref._linear_coeffs


def _axis_table(n, factor, m, coeffs, transform, exclude_outside, box, extrapolation_value):
    """(weights (m, n), fill (m,)): output position i is weights[i] @ x + fill[i] along the axis."""
    from onnx.reference.ops import op_resize as ref

    def along(data, fill):
        return ref._interpolate_1d_along_axis(data, 0, factor, m, coeffs, roi=box, extrapolation_value=fill,
                                              coordinate_transformation_mode=transform,
                                              exclude_outside=bool(exclude_outside))
    weights = along(np.eye(n), 0.0)
    fill = along(np.zeros((n, 1)), float(extrapolation_value))[:, 0]
    return weights, fill


def _apply(b: B, name, x, axis, weights, fill):
    """x resized along `axis` by the table: a gather of each output position's neighbours (its nonzero weights),
    then their weighted sum; a plain gather when every position copies one input (nearest)."""
    m, _ = weights.shape
    width = max(1, int((weights != 0).sum(axis=1).max(initial=0)))
    where = np.zeros((m, width), np.int64)
    share = np.zeros((m, width), np.float32)
    for i, row in enumerate(weights):
        taken = np.flatnonzero(row)
        where[i, :len(taken)], share[i, :len(taken)] = taken, row[taken]
    tail = (1,) * (len(x.shape) - axis - 1)
    if width == 1 and (share == 1).all() and not fill.any():
        return b.op("gather", x, b.const(where[:, 0], f"{name}_source"), name=name, axis=axis)
    near = b.op("gather", x, b.const(where.reshape(-1), f"{name}_neighbours"), name=f"{name}_near", axis=axis)
    split = b.op("reshape", near, name=f"{name}_split", shape=(*x.shape[:axis], m, width, *x.shape[axis + 1:]))
    weighted = b.op("mul", split, b.const(share.reshape(m, width, *tail), f"{name}_weights"), name=f"{name}_mul")
    out = b.op("reduce_sum", weighted, name=f"{name}_sum", axes=(axis + 1,), keepdims=0)
    if fill.any():
        out = b.op("add", out, b.const(fill.astype(np.float32).reshape(m, *tail), f"{name}_fill"), name=f"{name}_fill")
    return out
