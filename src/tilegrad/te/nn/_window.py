"""Sliding windows over padded spatial dimensions: output extents, window coordinates and padding guards.

Convolutions and pools read `x[o * stride + k * dilation - pad]` for output position `o` and window tap `k`. The
guard that keeps such a read inside the tensor is built from the coordinates' *bounds* (the index variables'
declared ranges), so a side that cannot go out of range gets no test and an unpadded window gets no select at all.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from ...errors import ShapeError
from .. import expr as E
from ..tensor import Tensor
from ._arguments import int_tuple, side_pads

SPATIAL_NAMES = {1: ("w",), 2: ("h", "w"), 3: ("d", "h", "w")}
LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def named_indices(nd: int, body: Callable) -> Callable:
    """`body(n, c, spatial)` as a compute lambda whose parameters, hence loops, are named n, c, (d,) (h,) w."""
    if nd == 1:
        return lambda n, c, w: body(n, c, (w,))
    if nd == 2:
        return lambda n, c, h, w: body(n, c, (h, w))
    return lambda n, c, d, h, w: body(n, c, (d, h, w))


def output_extents(op: str, sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                   pads: Sequence[tuple[int, int]], dilation: Sequence[int],
                   ceil_mode: bool = False) -> tuple[int, ...]:
    """The number of window positions along each spatial dimension; a ShapeError if a window does not fit."""
    out = []
    for d, (size, k, s, p, dl) in enumerate(zip(sizes, kernel, stride, pads, dilation)):
        extent = _extent(size, k, s, p, dl, ceil_mode)
        if extent <= 0:
            raise ShapeError(f"{op}: spatial dimension {d} has size {size} + padding {p}, smaller than the dilated "
                             f"kernel extent {dl * (k - 1) + 1}")
        out.append(extent)
    return tuple(out)


def _extent(size: int, kernel: int, stride: int, pad: tuple[int, int], dilation: int, ceil_mode: bool) -> int:
    """The number of windows; with `ceil_mode` a last, partial window counts if it starts inside the input or its
    leading padding, as PyTorch and ONNX define it."""
    room = size + pad[0] + pad[1] - (dilation * (kernel - 1) + 1)
    if room < 0:
        return 0
    steps = -(-room // stride) if ceil_mode else room // stride
    if ceil_mode and steps * stride >= size + pad[0]:
        steps -= 1
    return steps + 1


def window_coords(out: Sequence[E.Expr], taps: Sequence[E.Expr], stride: Sequence[int],
                  pads: Sequence[tuple[int, int]], dilation: Sequence[int]) -> tuple[E.Expr, ...]:
    """Input coordinates `o * stride + k * dilation - pad_before` read by output position `out` at window `taps`."""
    return tuple(o * s + k * d - p[0] for o, k, s, p, d in zip(out, taps, stride, pads, dilation))


def in_bounds(coords: Sequence[E.Expr], sizes: Sequence[int]) -> E.Expr:
    """`0 <= c < size` for each coordinate, leaving out the tests its bounds already decide (True if none)."""
    conds = []
    for c, n in zip(coords, sizes):
        if c.lo < 0:
            conds.append(c >= 0)
        if c.hi > n - 1:
            conds.append(c < n)
    return E.all_of(conds)


def guarded_load(x: Tensor, lead: Sequence, coords: Sequence[E.Expr], fill) -> E.Expr:
    """`x[lead + coords]` where the coordinates are inside `x`, `fill` where they fall in the padding."""
    cond = in_bounds(coords, x.shape[len(lead):])
    return E.select(cond, x[(*lead, *coords)], E.as_expr(fill, x.dtype))


@dataclasses.dataclass(frozen=True)
class Window2d:
    """The validated window arithmetic of one op over two spatial axes: stride, pads, dilation, output extents."""

    sizes: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    dilation: tuple[int, ...]
    out_sizes: tuple[int, ...]

    @staticmethod
    def of(op: str, sizes, kernel, stride, padding, dilation, ceil_mode: bool = False) -> "Window2d":
        stride = int_tuple(stride, 2, "stride", op)
        dilation = int_tuple(dilation, 2, "dilation", op)
        pads = side_pads(padding, 2, op)
        out_sizes = output_extents(op, sizes, kernel, stride, pads, dilation, ceil_mode)
        return Window2d(tuple(sizes), tuple(kernel), stride, pads, dilation, out_sizes)

    def taps(self, out, taps) -> tuple[E.Expr, ...]:
        """The input coordinates that output `out` reads at window `taps`, in the unpadded input."""
        return window_coords(out, taps, self.stride, self.pads, self.dilation)

    def padded_taps(self, out, taps) -> tuple[E.Expr, ...]:
        """The same coordinates in an input padded by `pads` beforehand."""
        return tuple(o * s + k * d for o, k, s, d in zip(out, taps, self.stride, self.dilation))

    def attrs(self) -> dict:
        return {"stride": self.stride, "padding": self.pads, "dilation": self.dilation}
