"""Max and average pooling over 1-3 spatial dimensions (NCW, NCHW, NCDHW), and global pooling.

Window arithmetic follows PyTorch and ONNX: `stride` defaults to the kernel, `ceil_mode` keeps a last partial
window that starts inside the input or its leading padding, and padding never counts towards a max. An average
divides by the window's taps inside the padded input (`count_include_pad=True`, PyTorch's divisor) or inside the
input alone; that divisor is an index expression of the output position, folded to a constant wherever the bounds
allow. Averages take two stages, since a reduction must be the root of its compute: a window sum tagged "pool" and
an element-wise division.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_rank
from ._window import LAYOUTS, SPATIAL_NAMES, Window, guarded_load, named_indices, taps_between
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


def _window(op: str, x: te.Tensor, nd: int, kernel, stride, padding, dilation, ceil_mode: bool) -> Window:
    check_rank(x, nd + 2, op, LAYOUTS[nd])
    win = Window.of(op, x.shape[2:], kernel, kernel if stride is None else stride, padding, dilation, ceil_mode)
    win.check_inside(op)
    return win


def _taps(win: Window, nd: int) -> list[E.Var]:
    """The reduction over a window's taps, one axis per spatial dimension (kd, kh, kw)."""
    return [te.reduce_axis(k, f"k{s}") for k, s in zip(win.kernel, SPATIAL_NAMES[nd])]


def _pool_attrs(win: Window, ceil_mode: bool) -> dict:
    return {"kernel": win.kernel, **win.attrs(), "ceil_mode": ceil_mode}


def _max_pool(op: str, x: te.Tensor, nd: int, kernel, stride, padding, dilation, ceil_mode: bool,
              name: str) -> te.Tensor:
    win = _window(op, x, nd, kernel, stride, padding, dilation, ceil_mode)
    taps = _taps(win, nd)
    lowest = te.reduce_identity("max", x.dtype)

    def body(n, c, out):
        return te.max(guarded_load(x, (n, c), win.taps(out, taps), lowest), axis=taps)

    return te.compute((*x.shape[:2], *win.out_sizes), named_indices(nd, body), name=name, tag="pool",
                      attrs={**_pool_attrs(win, ceil_mode), "pool_type": "max", "layout": LAYOUTS[nd]})


def _avg_pool(op: str, x: te.Tensor, nd: int, kernel, stride, padding, dilation, ceil_mode: bool,
              count_include_pad: bool, name: str) -> te.Tensor:
    if not E.is_float(x.dtype):
        raise ShapeError(f"{op}: {x.name} must have a float dtype to be averaged, got {x.dtype}")
    win = _window(op, x, nd, kernel, stride, padding, dilation, ceil_mode)
    taps = _taps(win, nd)
    shape = (*x.shape[:2], *win.out_sizes)
    attrs = {**_pool_attrs(win, ceil_mode), "pool_type": "avg", "count_include_pad": count_include_pad,
             "layout": LAYOUTS[nd]}

    def window_sum(n, c, out):
        return te.sum(guarded_load(x, (n, c), win.taps(out, taps), 0), axis=taps)

    sums = te.compute(shape, named_indices(nd, window_sum), name=f"{name}_sum", tag="pool", attrs=attrs)

    def mean(n, c, out):
        count = E.const(1)
        for o, size, k, s, p, dl in zip(out, win.sizes, win.kernel, win.stride, win.pads, win.dilation):
            edges = (-p[0], size + p[1]) if count_include_pad else (0, size)
            count = count * taps_between(o * s - p[0], k, dl, *edges)
        return sums[(n, c, *out)] / E.cast(x.dtype, count)

    return te.compute(shape, named_indices(nd, mean), name=name, tag="elemwise", attrs=attrs)
