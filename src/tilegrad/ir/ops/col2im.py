"""col2im: the overlap-add that finishes a transposed convolution computed as a matrix product.

A strided transposed convolution with constant weights is, per input pixel, the product of its channels with the
weights: every input pixel (i, j) adds a Kh x Kw x C patch of taps to the output at (s_h*i, s_w*j), less the pads
(frontend/transposed_conv.py). The product does all the arithmetic, exactly; `col2im` adds the patches up.

Both sides are channels-last: the product's rows are the input pixels, (N, H, W, Kh, Kw, C), and the output is
(N, OH, OW, C), cropped from `begins`; outputs past the last patch (ONNX's output_padding) are zeros. An output
pixel reads ceil(K/s) taps per axis, each a contiguous run of C channels, so its loop over channels is a vector
loop; and a chain of transposed convolutions hands NHWC from one product to the next.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import tensor as te
from ..registry import INJECTIVE, Sample, TensorType, declare
from .shape import ints


def _col2im_type(cols: TensorType, *, strides, begins, sizes) -> list[TensorType]:
    strides, begins, sizes = ints(strides, "strides"), ints(begins, "begins"), ints(sizes, "sizes")
    if len(cols.shape) != 6 or not len(strides) == len(begins) == len(sizes) == 2:
        raise ShapeError(f"col2im: expected taps (N, H, W, Kh, Kw, C) and two strides, begins and sizes, got "
                         f"{cols.shape}, {strides}, {begins}, {sizes}")
    n, *_, c = cols.shape
    if min(strides) < 1 or min(begins) < 0 or min(sizes) < 1:
        raise ShapeError(f"col2im: strides {strides} and sizes {sizes} must be positive, begins {begins} not negative")
    return [TensorType((n, *sizes, c), cols.dtype)]


def _col2im_ref(cols, *, strides, begins, sizes):
    n, h, w, kh, kw, c = cols.shape
    (sh, sw), (bh, bw) = strides, begins
    full = np.zeros((n, max((h - 1) * sh + kh, bh + sizes[0]), max((w - 1) * sw + kw, bw + sizes[1]), c), cols.dtype)
    for i in range(kh):
        for j in range(kw):
            full[:, i:i + (h - 1) * sh + 1:sh, j:j + (w - 1) * sw + 1:sw] += cols[:, :, :, i, j]
    return full[:, bh:bh + sizes[0], bw:bw + sizes[1]]


def _col2im_te(cols, *, strides, begins, sizes):
    """Output pixel u (uncropped) of an axis meets taps u % s + t*s of inputs u // s - t, for t < ceil(K/s). The
    reads are clamped into range and the invalid ones selected away, so every load is unconditional."""
    n, h, w, kh, kw, c = cols.shape
    extents, kernel = (h, w), (kh, kw)
    taps = [-(-k // s) for k, s in zip(kernel, strides)]

    def reads(u, axis):
        """(input index, tap index, valid) for each tap t of uncropped output u on `axis`; a bound is checked only
        where some output can cross it."""
        s, k, extent, first = strides[axis], kernel[axis], extents[axis], begins[axis]
        phase, base = u % s, u // s
        low, high = first // s, (first + sizes[axis] - 1) // s
        out = []
        for t in range(taps[axis]):
            tap, at = phase + t * s, base - t
            checks = ((tap < k, s - 1 + t * s >= k), (at >= 0, low - t < 0), (at < extent, high - t >= extent))
            valid = E.all_of(cond for cond, needed in checks if needed)
            out.append((E.maximum(E.minimum(at, extent - 1), 0), E.minimum(tap, k - 1), valid))
        return out

    def body(b, y, x, ch):
        total = E.const(0, cols.dtype)
        for row, tap_row, row_ok in reads(y + begins[0], 0):
            for col, tap_col, col_ok in reads(x + begins[1], 1):
                value = cols[b, row, col, tap_row, tap_col, ch]
                total = total + E.select(E.all_of((row_ok, col_ok)), value, E.const(0, cols.dtype))
        return total

    return te.compute((n, *sizes, c), body, name="col2im", tag="injective")


declare("col2im", kind=INJECTIVE, attrs={"strides": (1, 1), "begins": (0, 0), "sizes": (1, 1)}, infer=_col2im_type,
        reference=_col2im_ref, compute=_col2im_te, samples=(
            Sample((((1, 3, 4, 4, 4, 5), "float32"),), {"strides": (2, 2), "begins": (1, 1), "sizes": (6, 8)}),
            Sample((((2, 2, 3, 3, 1, 3), "float32"),), {"strides": (2, 3), "begins": (0, 0), "sizes": (5, 7)}),
            Sample((((1, 3, 2, 2, 5, 4), "float32"),), {"strides": (3, 2), "begins": (1, 2), "sizes": (7, 3)}),
        ))
