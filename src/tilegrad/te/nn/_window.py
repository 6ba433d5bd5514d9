"""Sliding windows over padded spatial dimensions: output extents, window coordinates, padding guards and
the number of taps inside a range (an average pool's divisor).

Convolutions and pools read `x[o * stride + k * dilation - pad]` for output position `o` and window tap `k`. The
guard that keeps such a read inside the tensor is built from the coordinates' *bounds* (the index variables'
declared ranges), so a side that cannot go out of range gets no test and an unpadded window gets no select at all.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from ...errors import ShapeError
from .. import dims
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


def output_extents(op: str, sizes: Sequence, kernel: Sequence[int], stride: Sequence[int],
                   pads: Sequence[tuple[int, int]], dilation: Sequence[int], ceil_mode: bool = False) -> tuple:
    """The number of window positions along each spatial dimension (an expression of a dynamic size, docs/
    dynamic.md); a ShapeError if a window does not fit, for a dynamic size at some value within its bounds."""
    out = []
    for d, (size, k, s, p, dl) in enumerate(zip(sizes, kernel, stride, pads, dilation)):
        room = size + p[0] + p[1] - (dl * (k - 1) + 1)
        if not dims.provably_le(0, room):
            within = f" (its bounds allow {dims.lower(size)})" if isinstance(size, E.Expr) else ""
            raise ShapeError(f"{op}: spatial dimension {d} has size {size}{within} + padding {p}, smaller than the "
                             f"dilated kernel extent {dl * (k - 1) + 1}")
        out.append(_extent(size, room, s, p, ceil_mode))
    return tuple(out)


def _extent(size, room, stride: int, pad: tuple[int, int], ceil_mode: bool):
    """The number of windows given `room` >= 0 (the positions past the first window); with `ceil_mode` a last,
    partial window counts if it starts inside the input or its leading padding, as PyTorch and ONNX define it."""
    if not isinstance(room, E.Expr):
        steps = -(-room // stride) if ceil_mode else room // stride
        if ceil_mode and steps * stride >= size + pad[0]:
            steps -= 1
        return steps + 1
    if not ceil_mode:
        return dims.dim(room // stride + 1)
    # the last window must start before the input's end: at most (size + pad_before - 1) // stride steps
    return dims.dim(E.minimum(E.ceildiv(room, stride), (size + pad[0] - 1) // stride) + 1)


def window_coords(out: Sequence[E.Expr], taps: Sequence[E.Expr], stride: Sequence[int],
                  pads: Sequence[tuple[int, int]], dilation: Sequence[int]) -> tuple[E.Expr, ...]:
    """Input coordinates `o * stride + k * dilation - pad_before` read by output position `out` at window `taps`."""
    return tuple(o * s + k * d - p[0] for o, k, s, p, d in zip(out, taps, stride, pads, dilation))


def in_bounds(coords: Sequence[E.Expr], sizes: Sequence) -> E.Expr:
    """`0 <= c < size` for each coordinate, leaving out the tests its bounds already decide (True if none)."""
    conds = []
    for c, n in zip(coords, sizes):
        if c.lo < 0:
            conds.append(c >= 0)
        if (c.hi > n - 1) if not isinstance(n, E.Expr) else not dims.provably_le(c + 1, n):
            conds.append(c < n)
    return E.all_of(conds)


def taps_between(start: E.Expr, kernel: int, dilation: int, lo, hi) -> E.Expr:
    """How many taps `start + j * dilation` (0 <= j < kernel) lie in [lo, hi); constant where bounds decide it."""
    last = start + (kernel - 1) * dilation
    inside = (last.hi < hi) if not isinstance(hi, E.Expr) else dims.provably_le(last + 1, hi)
    first_j = 0 if start.lo >= lo else E.maximum(0, E.ceildiv(lo - start, dilation))
    last_j = kernel - 1 if inside else E.minimum(kernel - 1, (hi - 1 - start) // dilation)
    return last_j - first_j + 1


def guarded_load(x: Tensor, lead: Sequence, coords: Sequence[E.Expr], fill) -> E.Expr:
    """`x[lead + coords]` where the coordinates are inside `x`, `fill` where they fall in the padding."""
    cond = in_bounds(coords, x.shape[len(lead):])
    return E.select(cond, x[(*lead, *coords)], E.as_expr(fill, x.dtype))


@dataclasses.dataclass(frozen=True)
class Window:
    """The validated arithmetic of one sliding-window op over its spatial axes: the input's sizes, the kernel,
    stride, (before, after) pads, dilation and the output's extents. Every window op uses it, from the type rules
    and NumPy references of the graph layer to the computes here, so the two layers agree on every extent."""

    sizes: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    dilation: tuple[int, ...]
    out_sizes: tuple[int, ...]

    @staticmethod
    def of(op: str, sizes, kernel, stride, padding, dilation, ceil_mode: bool = False,
           crop: bool = False) -> "Window":
        """The window of a convolution or pool; a ShapeError if an argument is malformed or a window does not fit.
        With `crop`, a negative pad crops that side (a window over part of the input, passes/conv_regions.py)."""
        nd = len(sizes)
        kernel = int_tuple(kernel, nd, "kernel", op)
        stride = int_tuple(stride, nd, "stride", op)
        dilation = int_tuple(dilation, nd, "dilation", op)
        pads = side_pads(padding, nd, op, crop)
        out_sizes = output_extents(op, sizes, kernel, stride, pads, dilation, ceil_mode)
        return Window(tuple(sizes), kernel, stride, pads, dilation, out_sizes)

    @staticmethod
    def transposed(op: str, sizes, kernel, stride, padding, dilation, output_padding) -> tuple["Window", tuple]:
        """The window of a transposed convolution, whose output is the input of the forward window, and its output
        padding (extra positions at the end of each axis)."""
        nd = len(sizes)
        kernel = int_tuple(kernel, nd, "kernel", op)
        stride = int_tuple(stride, nd, "stride", op)
        dilation = int_tuple(dilation, nd, "dilation", op)
        pads = side_pads(padding, nd, op)
        extra = int_tuple(output_padding, nd, "output_padding", op, minimum=0)
        for e, s, d in zip(extra, stride, dilation):
            if e >= max(s, d):
                raise ShapeError(f"{op}: output_padding {extra} must be smaller than the stride {stride} or the "
                                 f"dilation {dilation} in each dimension")
        out_sizes = tuple((n - 1) * s - p[0] - p[1] + d * (k - 1) + e + 1
                          for n, s, p, d, k, e in zip(sizes, stride, pads, dilation, kernel, extra))
        if not all(dims.provably_le(1, o) for o in out_sizes):
            raise ShapeError(f"{op}: padding {pads} leaves no output (output size {out_sizes})")
        return Window(tuple(sizes), kernel, stride, pads, dilation, out_sizes), extra

    def check_inside(self, op: str) -> None:
        """A ShapeError if some window reads only padding (a pool would have nothing to take the max or mean of);
        dynamic sizes are checked at their bounds, where the padding is the largest share of the input and where
        it is the least."""
        variables = dims.variables([self.sizes])
        for bound in ("lo", "hi"):
            env = {v.name: int(getattr(v, bound)) for v in variables}
            sizes = [dims.evaluate(n, env) for n in self.sizes]
            for d, (size, k, s, p, dl, n) in enumerate(zip(sizes, self.kernel, self.stride, self.pads, self.dilation,
                                                            [dims.evaluate(n, env) for n in self.out_sizes])):
                for o in range(n):
                    if not any(0 <= o * s - p[0] + j * dl < size for j in range(k)):
                        raise ShapeError(f"{op}: window {o} of spatial dimension {d} lies wholly in the padding "
                                         f"{p}; use less padding than the kernel {self.kernel}")
            if not variables:
                return

    def taps(self, out, taps) -> tuple[E.Expr, ...]:
        """The input coordinates that output `out` reads at window `taps`, in the unpadded input."""
        return window_coords(out, taps, self.stride, self.pads, self.dilation)

    @property
    def stage_pads(self) -> tuple[tuple[int, int], ...]:
        """The padding a padded copy of the input adds: the positive sides (a negative one crops by reading past),
        less a trailing pad that no window reads (a stride-2 3 x 3 window over 56 pixels never reads its right
        pad: the copy's column and every read's test of it would be dead). One read in part stays whole: rows one
        element shorter ran ResNet-50's 7 x 7 stem slower (docs/passes.md, "Layout")."""
        return tuple((max(lo, 0), max(_read_after(size, k, s, lo, hi, d, out), 0)) for size, k, s, (lo, hi), d, out
                     in zip(self.sizes, self.kernel, self.stride, self.pads, self.dilation, self.out_sizes))

    def padded_taps(self, out, taps) -> tuple[E.Expr, ...]:
        """The same coordinates in an input padded by `stage_pads` beforehand."""
        return tuple(o * s + k * d + max(-p[0], 0)
                     for o, k, s, d, p in zip(out, taps, self.stride, self.dilation, self.pads))

    def attrs(self) -> dict:
        return {"stride": self.stride, "padding": self.pads, "dilation": self.dilation}


def _read_after(size, kernel: int, stride: int, before: int, after: int, dilation: int, out) -> int:
    """The trailing pad `after`, or 0 where no window reads it (known only for static sizes)."""
    if isinstance(size, E.Expr) or isinstance(out, E.Expr):
        return after
    return after if (out - 1) * stride + (kernel - 1) * dilation - before >= size else 0
