"""ONNX Pad in every form: pads for a subset of `axes`, negative pads (cropping) and the modes edge, reflect and
wrap besides constant. The registry's `pad` fills with a constant; a non-constant mode reads, for each output
position along a padded axis, one input position, so it is a `gather` with a constant index table (NumPy's own
`np.pad` of the positions `0..n-1` in that mode). The reader (`onnx.py`) imports this module, which registers it."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op

MODES = ("constant", "edge", "reflect", "wrap")


@onnx_op("Pad")
def _pad(b: B, name, x, pads=None, value=None, axes=None, *, mode="constant", **attrs):
    if mode not in MODES:
        raise UnsupportedFeatureError(f"node {name!r}: Pad mode {mode!r} is not one of {', '.join(MODES)}")
    if b.opset < 11:
        pad_list, fill = tuple(int(p) for p in attrs["pads"]), float(attrs.get("value", 0.0))
    else:
        pad_list = tuple(int(p) for p in constant_input(pads, "pads", name))
        data = constant_input(value, "the pad value", name)
        fill = 0.0 if data is None or np.size(data) == 0 else float(np.asarray(data).reshape(-1)[0])
    pairs = _pairs(name, x.shape, pad_list, constant_input(axes, "axes", name))
    x = _crop(b, name, x, pairs)
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
    if not any(lo or hi for lo, hi in grow):
        return b.op("identity", x, name=name)
    if mode == "constant":
        flat = tuple(lo for lo, _ in grow) + tuple(hi for _, hi in grow)
        return b.op("pad", x, name=name, pads=flat, value=fill, mode="constant")
    return _reindex(b, name, x, grow, mode)


def _pairs(name, shape, pad_list, axes) -> list[tuple[int, int]]:
    """(begin, end) for every axis of a tensor of `shape`; axes not named by `axes` get (0, 0)."""
    rank = len(shape)
    chosen = list(range(rank)) if axes is None else [int(a) for a in np.ravel(axes)]
    if len(pad_list) != 2 * len(chosen):
        raise ShapeError(f"node {name!r}: Pad has {len(pad_list)} pads for {len(chosen)} axes; it needs two per "
                         f"axis (all the begins, then all the ends)")
    if any(not -rank <= a < rank for a in chosen) or len({a % rank for a in chosen}) != len(chosen):
        raise ShapeError(f"node {name!r}: Pad axes {chosen} must be distinct axes of a rank-{rank} tensor")
    pairs = [(0, 0)] * rank
    for k, a in enumerate(chosen):
        pairs[a % rank] = (pad_list[k], pad_list[k + len(chosen)])
    for a, ((lo, hi), n) in enumerate(zip(pairs, shape)):
        if n + lo + hi < 0:
            raise ShapeError(f"node {name!r}: Pad pads ({lo}, {hi}) remove more than the extent {n} of axis {a}")
    return pairs


def _crop(b: B, name, x, pairs):
    """x with the negative pads applied: a slice of the axes they shrink."""
    cut = [(a, max(-lo, 0), n - max(-hi, 0)) for a, ((lo, hi), n) in enumerate(zip(pairs, x.shape))
           if lo < 0 or hi < 0]
    if not cut:
        return x
    axes, starts, ends = zip(*cut)
    return b.op("slice", x, name=f"{name}_crop", starts=starts, ends=ends, axes=axes)


def _reindex(b: B, name, x, grow, mode):
    """x padded in `mode` (edge, reflect, wrap): one gather per padded axis, from a constant table of positions."""
    padded = [a for a, (lo, hi) in enumerate(grow) if lo or hi]
    for k, a in enumerate(padded):
        n = x.shape[a]
        if n == 0 or (mode == "reflect" and n == 1):
            raise ShapeError(f"node {name!r}: Pad mode {mode!r} cannot pad axis {a} of extent {n}")
        positions = np.pad(np.arange(n, dtype=np.int64), grow[a], mode=mode)
        x = b.op("gather", x, b.const(positions, f"{name}_positions_{a}"), axis=a,
                 name=name if k == len(padded) - 1 else f"{name}_axis_{a}")
    return x
