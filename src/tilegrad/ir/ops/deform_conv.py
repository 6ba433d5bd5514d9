"""Deformable convolution (ONNX DeformConv) over NCHW images: each kernel tap reads the input at its regular
position plus a learned offset, bilinearly (zero outside the image), scaled by a mask.

Two stages: the sampled columns (N, C, taps, OH, OW), each tap's bilinear read times its mask, computed once; then
the grouped sum of weights times columns, plus the bias. The offsets and mask are per offset group, a block of
consecutive input channels.
"""

from __future__ import annotations

import itertools

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import tensor as te
from ..registry import REDUCTION, Sample, TensorType, declare

_ATTRS = {"strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1), "group": 1, "offset_group": 1}


def _out_sizes(x, w, strides, pads, dilations) -> tuple[int, int]:
    return tuple((x[2 + d] + pads[d] + pads[2 + d] - ((w[2 + d] - 1) * dilations[d] + 1)) // strides[d] + 1
                 for d in range(2))


def _deform_conv_type(x, w, offset, bias, mask, *, strides, pads, dilations, group, offset_group):
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ShapeError(f"deform_conv needs x (N, C, H, W) and w (M, C / group, kH, kW), got {x.shape} and "
                         f"{w.shape}")
    n, c = x.shape[:2]
    m, taps = w.shape[0], w.shape[2] * w.shape[3]
    oh, ow = _out_sizes(x.shape, w.shape, strides, pads, dilations)
    if c != w.shape[1] * group or m % group or c % offset_group or min(oh, ow) < 1:
        raise ShapeError(f"deform_conv: x {x.shape}, w {w.shape}, group {group} and offset_group {offset_group} do "
                         f"not fit (C = w's C / group * group, M and C divisible by the groups)")
    expected = {"offset": (n, offset_group * taps * 2, oh, ow), "bias": (m,), "mask": (n, offset_group * taps, oh, ow)}
    for what, t in (("offset", offset), ("bias", bias), ("mask", mask)):
        if t.shape != expected[what]:
            raise ShapeError(f"deform_conv {what} has shape {t.shape}, expected {expected[what]}")
    if len({t.dtype for t in (x, w, offset, bias, mask)}) != 1 or not E.is_float(x.dtype):
        raise ShapeError("deform_conv operands must share one float dtype")
    return [TensorType((n, m, oh, ow), x.dtype)]


def _positions(w_shape, offset, strides, pads, dilations, offset_group):
    """NumPy's sampling rows and columns (N, offset groups, taps, OH, OW) of every tap."""
    n, _, oh, ow = offset.shape
    kh, kw = w_shape[2:]
    off = offset.astype(np.float64).reshape(n, offset_group, kh * kw, 2, oh, ow)
    tap_h = np.repeat(np.arange(kh) * dilations[0], kw)[:, None, None]
    tap_w = np.tile(np.arange(kw) * dilations[1], kh)[:, None, None]
    base_h = (np.arange(oh) * strides[0] - pads[0])[:, None]
    base_w = (np.arange(ow) * strides[1] - pads[1])[None, :]
    return base_h + tap_h + off[:, :, :, 0], base_w + tap_w + off[:, :, :, 1]


def _deform_conv_ref(x, w, offset, bias, mask, *, strides, pads, dilations, group, offset_group):
    (out,) = _deform_conv_type(*(TensorType(a.shape, str(a.dtype)) for a in (x, w, offset, bias, mask)),
                               strides=strides, pads=pads, dilations=dilations, group=group, offset_group=offset_group)
    n, c, height, width = x.shape
    rows, cols = _positions(w.shape, offset, strides, pads, dilations, offset_group)
    per_group = c // offset_group
    rows, cols = np.repeat(rows, per_group, axis=1), np.repeat(cols, per_group, axis=1)  # (N, C, taps, OH, OW)
    low_h, low_w = np.floor(rows), np.floor(cols)
    sampled = np.zeros(rows.shape)
    batch, channel = np.indices((n, c), sparse=True)
    for a, b in itertools.product((0, 1), (0, 1)):
        h, v = low_h + a, low_w + b
        weight = (1 - np.abs(rows - h)) * (1 - np.abs(cols - v))
        inside = (h >= 0) & (h <= height - 1) & (v >= 0) & (v <= width - 1)
        hi = np.clip(h, 0, height - 1).astype(np.int64)
        vi = np.clip(v, 0, width - 1).astype(np.int64)
        picked = x.astype(np.float64)[batch[..., None, None, None], channel[..., None, None, None], hi, vi]
        sampled += np.where(inside, picked * weight, 0.0)
    sampled *= np.repeat(mask.astype(np.float64).reshape(n, offset_group, -1, *out.shape[2:]), per_group, axis=1)
    m, cg = w.shape[0], w.shape[1]
    y = np.zeros(out.shape)
    for g in range(group):
        wg = w[g * (m // group):(g + 1) * (m // group)].astype(np.float64).reshape(m // group, cg, -1)
        y[:, g * (m // group):(g + 1) * (m // group)] = np.einsum("oct,nctyx->noyx", wg,
                                                                  sampled[:, g * cg:(g + 1) * cg])
    return (y + bias.astype(np.float64).reshape(1, -1, 1, 1)).astype(x.dtype)


def _deform_conv_te(x, w, offset, bias, mask, *, strides, pads, dilations, group, offset_group):
    (out,) = _deform_conv_type(*(TensorType(t.shape, t.dtype) for t in (x, w, offset, bias, mask)),
                               strides=strides, pads=pads, dilations=dilations, group=group, offset_group=offset_group)
    n, c, height, width = x.shape
    m, cg, kh, kw = w.shape
    taps, per_group = kh * kw, c // offset_group
    _, _, oh, ow = out.shape

    def sample(b, ch, k, y, v):
        og = ch // per_group
        row = E.cast("float32", y * strides[0] - pads[0] + (k // kw) * dilations[0]) + E.cast(
            "float32", offset[b, (og * taps + k) * 2, y, v])
        col = E.cast("float32", v * strides[1] - pads[1] + (k % kw) * dilations[1]) + E.cast(
            "float32", offset[b, (og * taps + k) * 2 + 1, y, v])
        low_h, low_w = E.floor(row), E.floor(col)
        total = None
        for a, d in itertools.product((0.0, 1.0), (0.0, 1.0)):
            h, q = low_h + a, low_w + d
            inside = E.all_of([h >= 0.0, h <= height - 1.0, q >= 0.0, q <= width - 1.0])
            hi = E.cast("int64", E.minimum(E.maximum(h, 0.0), height - 1.0))
            qi = E.cast("int64", E.minimum(E.maximum(q, 0.0), width - 1.0))
            weight = (1.0 - E.abs_(row - h)) * (1.0 - E.abs_(col - q))
            term = E.select(inside, E.cast("float32", x[b, ch, hi, qi]) * weight, 0.0)
            total = term if total is None else total + term
        return total * E.cast("float32", mask[b, og * taps + k, y, v])

    columns = te.compute((n, c, taps, oh, ow), sample, name="deform_conv_columns", tag="sampling_taps")
    ci, k = te.reduce_axis(cg, "ci"), te.reduce_axis(taps, "k")

    def weighted(b, o, y, v):
        source = (o // (m // group)) * cg + ci
        return te.sum(E.cast("float32", w[o, ci, k // kw, k % kw]) * columns[b, source, k, y, v], axis=[ci, k])

    total = te.compute(out.shape, weighted, name="deform_conv_sum", tag="reduce")
    return te.compute(out.shape, lambda b, o, y, v: E.cast(x.dtype, total[b, o, y, v] + E.cast("float32", bias[o])),
                      name="deform_conv", tag="elemwise")


declare("deform_conv", kind=REDUCTION, num_inputs=5, infer=_deform_conv_type, reference=_deform_conv_ref,
        compute=_deform_conv_te, attrs=dict(_ATTRS), samples=(
            Sample((((1, 2, 5, 4), "float32"), ((3, 2, 2, 2), "float32"), ((1, 8, 4, 3), "float32"),
                    ((3,), "float32"), ((1, 4, 4, 3), "float32"))),
            Sample((((2, 4, 6, 6), "float32"), ((4, 2, 3, 2), "float32"), ((2, 24, 3, 4), "float32"),
                    ((4,), "float32"), ((2, 12, 3, 4), "float32")),
                   {"strides": (2, 1), "pads": (1, 0, 1, 0), "dilations": (1, 2), "group": 2, "offset_group": 2}),
        ))
