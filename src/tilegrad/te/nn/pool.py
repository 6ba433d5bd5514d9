"""Max and average pooling over 1-3 spatial dimensions (NCW, NCHW, NCDHW), and global pooling.

Window arithmetic follows PyTorch and ONNX: `stride` defaults to the kernel, `ceil_mode` keeps a last partial
window that starts inside the input or its leading padding, and padding never counts towards a max. An average
divides by the window's taps inside the padded input (`count_include_pad=True`, PyTorch's divisor) or inside the
input alone; that divisor is an index expression of the output position, folded to a constant wherever the bounds
allow. Averages take two stages, since a reduction must be the root of its compute: a window sum tagged "pool" and
an element-wise division.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_rank, int_tuple, side_pads
from ._window import LAYOUTS, SPATIAL_NAMES, guarded_load, named_indices, output_extents, window_coords
from .reduction import reduce_max, reduce_mean


def max_pool1d(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               name: str = "max_pool1d") -> te.Tensor:
    """The maximum over each window of x (N, C, W)."""
    return _max_pool("max_pool1d", x, 1, kernel, stride, padding, dilation, ceil_mode, name)


def max_pool2d(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               name: str = "max_pool2d") -> te.Tensor:
    """The maximum over each window of x (N, C, H, W)."""
    return _max_pool("max_pool2d", x, 2, kernel, stride, padding, dilation, ceil_mode, name)


def max_pool3d(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               name: str = "max_pool3d") -> te.Tensor:
    """The maximum over each window of x (N, C, D, H, W)."""
    return _max_pool("max_pool3d", x, 3, kernel, stride, padding, dilation, ceil_mode, name)


def avg_pool1d(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               count_include_pad: bool = True, name: str = "avg_pool1d") -> te.Tensor:
    """The mean over each window of x (N, C, W)."""
    return _avg_pool("avg_pool1d", x, 1, kernel, stride, padding, dilation, ceil_mode, count_include_pad, name)


def avg_pool2d(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               count_include_pad: bool = True, name: str = "avg_pool2d") -> te.Tensor:
    """The mean over each window of x (N, C, H, W)."""
    return _avg_pool("avg_pool2d", x, 2, kernel, stride, padding, dilation, ceil_mode, count_include_pad, name)


def avg_pool3d(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               count_include_pad: bool = True, name: str = "avg_pool3d") -> te.Tensor:
    """The mean over each window of x (N, C, D, H, W)."""
    return _avg_pool("avg_pool3d", x, 3, kernel, stride, padding, dilation, ceil_mode, count_include_pad, name)


def global_avg_pool(x: te.Tensor, name: str = "global_avg_pool") -> te.Tensor:
    """The mean over all spatial dimensions of x (N, C, ...), keeping them with extent 1 as ONNX does."""
    return reduce_mean(x, _spatial_axes("global_avg_pool", x), keepdims=True, name=name)


def global_max_pool(x: te.Tensor, name: str = "global_max_pool") -> te.Tensor:
    """The maximum over all spatial dimensions of x (N, C, ...), keeping them with extent 1 as ONNX does."""
    return reduce_max(x, _spatial_axes("global_max_pool", x), keepdims=True, name=name)


def _spatial_axes(op: str, x: te.Tensor) -> tuple[int, ...]:
    if x.ndim < 3:
        raise ShapeError(f"{op}: {x.name} must have a batch, a channel and at least one spatial dimension, "
                         f"got shape {x.shape}")
    return tuple(range(2, x.ndim))


@dataclass(frozen=True)
class _Windows:
    """The validated window arithmetic of one pooling op."""

    sizes: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    dilation: tuple[int, ...]
    out_sizes: tuple[int, ...]
    taps: tuple[E.Var, ...]

    def coords(self, out) -> tuple[E.Expr, ...]:
        return window_coords(out, self.taps, self.stride, self.pads, self.dilation)

    def attrs(self, ceil_mode: bool) -> dict:
        return {"kernel": self.kernel, "stride": self.stride, "padding": self.pads, "dilation": self.dilation,
                "ceil_mode": ceil_mode}


def _windows(op: str, x: te.Tensor, nd: int, kernel, stride, padding, dilation, ceil_mode: bool) -> _Windows:
    check_rank(x, nd + 2, op, LAYOUTS[nd])
    kernel = int_tuple(kernel, nd, "kernel", op)
    stride = kernel if stride is None else int_tuple(stride, nd, "stride", op)
    dilation = int_tuple(dilation, nd, "dilation", op)
    pads = side_pads(padding, nd, op)
    sizes = x.shape[2:]
    out_sizes = output_extents(op, sizes, kernel, stride, pads, dilation, ceil_mode)
    for d, (size, k, s, p, dl, n) in enumerate(zip(sizes, kernel, stride, pads, dilation, out_sizes)):
        for o in range(n):
            if not any(0 <= o * s - p[0] + j * dl < size for j in range(k)):
                raise ShapeError(f"{op}: window {o} of spatial dimension {d} lies wholly in the padding {p}; "
                                 f"use less padding than the kernel {kernel}")
    taps = tuple(te.reduce_axis(k, f"k{s}") for k, s in zip(kernel, SPATIAL_NAMES[nd]))
    return _Windows(sizes, kernel, stride, pads, dilation, out_sizes, taps)


def _max_pool(op: str, x: te.Tensor, nd: int, kernel, stride, padding, dilation, ceil_mode: bool,
              name: str) -> te.Tensor:
    win = _windows(op, x, nd, kernel, stride, padding, dilation, ceil_mode)
    lowest = te.reduce_identity("max", x.dtype)

    def body(n, c, out):
        return te.max(guarded_load(x, (n, c), win.coords(out), lowest), axis=list(win.taps))

    return te.compute((*x.shape[:2], *win.out_sizes), named_indices(nd, body), name=name, tag="pool",
                      attrs={**win.attrs(ceil_mode), "pool_type": "max", "layout": LAYOUTS[nd]})


def _avg_pool(op: str, x: te.Tensor, nd: int, kernel, stride, padding, dilation, ceil_mode: bool,
              count_include_pad: bool, name: str) -> te.Tensor:
    if not E.is_float(x.dtype):
        raise ShapeError(f"{op}: {x.name} must have a float dtype to be averaged, got {x.dtype}")
    win = _windows(op, x, nd, kernel, stride, padding, dilation, ceil_mode)
    shape = (*x.shape[:2], *win.out_sizes)
    attrs = {**win.attrs(ceil_mode), "pool_type": "avg", "count_include_pad": count_include_pad,
             "layout": LAYOUTS[nd]}

    def window_sum(n, c, out):
        return te.sum(guarded_load(x, (n, c), win.coords(out), 0), axis=list(win.taps))

    sums = te.compute(shape, named_indices(nd, window_sum), name=f"{name}_sum", tag="pool", attrs=attrs)

    def mean(n, c, out):
        count = E.const(1)
        for o, size, k, s, p, dl in zip(out, win.sizes, win.kernel, win.stride, win.pads, win.dilation):
            edges = (-p[0], size + p[1]) if count_include_pad else (0, size)
            count = count * _taps_between(o * s - p[0], k, dl, *edges)
        return sums[(n, c, *out)] / E.cast(x.dtype, count)

    return te.compute(shape, named_indices(nd, mean), name=name, tag="elemwise", attrs=attrs)


def _taps_between(start: E.Expr, kernel: int, dilation: int, lo: int, hi: int) -> E.Expr:
    """How many taps `start + j * dilation` (0 <= j < kernel) lie in [lo, hi); constant where bounds decide it."""
    last = start + (kernel - 1) * dilation
    first_j = 0 if start.lo >= lo else E.maximum(0, E.ceildiv(lo - start, dilation))
    last_j = kernel - 1 if last.hi < hi else E.minimum(kernel - 1, (hi - 1 - start) // dilation)
    return last_j - first_j + 1
