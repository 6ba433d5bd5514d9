"""Convolutions in channels-first layouts (NCW, NCHW, NCDHW): forward, grouped, depthwise and transposed.

One N-d core per direction builds the compute; `conv1d`, `conv2d` and `conv3d` (and their transposes) only fix the
number of spatial dimensions, which also names the index variables (n, c, d, h, w). Weights use the PyTorch and
ONNX layouts: (out_channels, in_channels / groups, *kernel) forward, (in_channels, out_channels / groups, *kernel)
transposed. Padding reads go through a select, so no out-of-range element is ever read.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_rank, check_same_dtype
from ._window import LAYOUTS, SPATIAL_NAMES, Window, guarded_load, in_bounds, named_indices, window_coords
from .transform import pad


def conv1d(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
           name: str = "conv1d") -> te.Tensor:
    """1-D convolution of x (N, C, W) with weight (O, C / groups, KW)."""
    return _convolution("conv1d", x, weight, 1, stride, padding, dilation, groups, name)


def conv2d(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
           name: str = "conv2d") -> te.Tensor:
    """2-D convolution of x (N, C, H, W) with weight (O, C / groups, KH, KW).

    A grouped convolution with one input channel per group is a depthwise convolution and is tagged
    "depthwise_conv2d", since it wants a different schedule.
    """
    return _convolution("conv2d", x, weight, 2, stride, padding, dilation, groups, name)


def conv3d(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, dilation=1, groups: int = 1,
           name: str = "conv3d") -> te.Tensor:
    """3-D convolution of x (N, C, D, H, W) with weight (O, C / groups, KD, KH, KW)."""
    return _convolution("conv3d", x, weight, 3, stride, padding, dilation, groups, name)


def depthwise_conv2d(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, dilation=1,
                     name: str = "depthwise_conv2d") -> te.Tensor:
    """Depthwise 2-D convolution of x (N, C, H, W) with weight (C * multiplier, 1, KH, KW).

    Output channel `c` reads only input channel `c // multiplier`, as a conv2d with groups = C does.
    """
    _check_operands("depthwise_conv2d", x, weight, 2, "C * multiplier, 1, KH, KW")
    channels = x.shape[1]
    if weight.shape[1] != 1 or weight.shape[0] % channels:
        raise ShapeError(f"depthwise_conv2d: {weight.name} must have shape (C * multiplier, 1, KH, KW) with "
                         f"C = {channels}, got {weight.shape}")
    return conv2d(x, weight, stride, padding, dilation, groups=channels, name=name)


def conv1d_transpose(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, output_padding=0, dilation=1,
                     groups: int = 1, name: str = "conv1d_transpose") -> te.Tensor:
    """Transposed 1-D convolution of x (N, C, W) with weight (C, O / groups, KW)."""
    return _transposed("conv1d_transpose", x, weight, 1, stride, padding, output_padding, dilation, groups, name)


def conv2d_transpose(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, output_padding=0, dilation=1,
                     groups: int = 1, name: str = "conv2d_transpose") -> te.Tensor:
    """Transposed 2-D convolution of x (N, C, H, W) with weight (C, O / groups, KH, KW).

    It is the gradient of conv2d by its input: each input element scatters a scaled kernel into the output.
    `output_padding` adds rows and columns at the end, to pick one of the input sizes a strided conv2d maps
    to the same output size.
    """
    return _transposed("conv2d_transpose", x, weight, 2, stride, padding, output_padding, dilation, groups, name)


def conv3d_transpose(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, output_padding=0, dilation=1,
                     groups: int = 1, name: str = "conv3d_transpose") -> te.Tensor:
    """Transposed 3-D convolution of x (N, C, D, H, W) with weight (C, O / groups, KD, KH, KW)."""
    return _transposed("conv3d_transpose", x, weight, 3, stride, padding, output_padding, dilation, groups, name)


def _check_operands(op: str, x: te.Tensor, weight: te.Tensor, nd: int, weight_layout: str) -> None:
    check_rank(x, nd + 2, op, LAYOUTS[nd])
    check_rank(weight, nd + 2, op, weight_layout)
    check_same_dtype([x, weight], op)


def _check_groups(op: str, groups: int, in_channels: int, out_channels: int) -> None:
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{op}: groups must be a positive integer, got {groups!r}")
    if in_channels % groups:
        raise ShapeError(f"{op}: {in_channels} input channels are not divisible by groups={groups}")
    if out_channels % groups:
        raise ShapeError(f"{op}: {out_channels} output channels are not divisible by groups={groups}")


def _channel_axis(per_group: int) -> E.Var | None:
    """The reduction over a group's input channels; none when a group has one channel (depthwise)."""
    return te.reduce_axis(per_group, "rc") if per_group > 1 else None


def _convolution(op: str, x: te.Tensor, weight: te.Tensor, nd: int, stride, padding, dilation, groups: int,
                 name: str) -> te.Tensor:
    """The forward convolution over `nd` spatial dimensions."""
    _check_operands(op, x, weight, nd, "O, C / groups, *kernel")
    _, channels, *sizes = x.shape
    out_channels, group_in, *kernel = weight.shape
    _check_groups(op, groups, channels, out_channels)
    if group_in * groups != channels:
        raise ShapeError(f"{op}: {weight.name} has {group_in} input channels per group, but {x.name} has "
                         f"{channels} channels in {groups} group(s)")
    win = Window.of(op, sizes, kernel, stride, padding, dilation)
    stride, pads, dilation, out_sizes = win.stride, win.pads, win.dilation, win.out_sizes
    attrs = {"stride": stride, "padding": pads, "dilation": dilation, "groups": groups, "kernel": tuple(kernel),
             "layout": LAYOUTS[nd]}
    if any(lo or hi for lo, hi in pads):
        # A separate padding stage: the schedule may materialise it, so the inner loop reads without guards.
        x = pad(x, ((0, 0), (0, 0), *pads), name=f"{name}_pad")
        pads = tuple((0, 0) for _ in pads)
    rc = _channel_axis(group_in)
    taps = [te.reduce_axis(k, f"k{s}") for k, s in zip(kernel, SPATIAL_NAMES[nd])]
    group_out = out_channels // groups

    def body(n, c, out):
        first = (c // group_out) * group_in if groups > 1 else 0
        ic, wc = (first + rc, rc) if rc is not None else (first, 0)
        data = guarded_load(x, (n, ic), window_coords(out, taps, stride, pads, dilation), 0)
        return te.sum(data * weight[(c, wc, *taps)], axis=[rc, *taps] if rc is not None else taps)

    depthwise = nd == 2 and groups == channels and groups > 1
    return te.compute((x.shape[0], out_channels, *out_sizes), named_indices(nd, body), name=name,
                      tag="depthwise_conv2d" if depthwise else op, attrs=attrs)


def _transposed(op: str, x: te.Tensor, weight: te.Tensor, nd: int, stride, padding, output_padding, dilation,
                groups: int, name: str) -> te.Tensor:
    """The transposed convolution over `nd` spatial dimensions.

    Output position `o` takes input position `i` through tap `k` when `i * stride + k * dilation - pad = o`, so
    the body reads `i = (o + pad - k * dilation) / stride` where that division is exact and `i` is in range.
    """
    _check_operands(op, x, weight, nd, "C, O / groups, *kernel")
    _, channels, *sizes = x.shape
    in_channels, group_out, *kernel = weight.shape
    if in_channels != channels:
        raise ShapeError(f"{op}: {weight.name} has {in_channels} input channels (dimension 0) but {x.name} has "
                         f"{channels}")
    _check_groups(op, groups, channels, group_out * groups)
    win, extra = Window.transposed(op, sizes, kernel, stride, padding, dilation, output_padding)
    stride, pads, dilation, out_sizes = win.stride, win.pads, win.dilation, win.out_sizes
    group_in = channels // groups
    rc = _channel_axis(group_in)
    taps = [te.reduce_axis(k, f"k{s}") for k, s in zip(kernel, SPATIAL_NAMES[nd])]

    def body(n, c, out):
        first = (c // group_out) * group_in if groups > 1 else 0
        ic = first + rc if rc is not None else first
        oc = c % group_out if groups > 1 else c
        shifted = [o + p[0] - k * d for o, k, p, d in zip(out, taps, pads, dilation)]
        coords = [t // s for t, s in zip(shifted, stride)]
        exact = E.all_of((t % s).eq(0) for t, s in zip(shifted, stride) if s > 1)
        data = E.select(exact & in_bounds(coords, sizes), x[(n, ic, *coords)], E.as_expr(0, x.dtype))
        return te.sum(data * weight[(ic, oc, *taps)], axis=[rc, *taps] if rc is not None else taps)

    attrs = {"stride": stride, "padding": pads, "output_padding": extra, "dilation": dilation, "groups": groups,
             "kernel": tuple(kernel), "layout": LAYOUTS[nd]}
    return te.compute((x.shape[0], group_out * groups, *out_sizes), named_indices(nd, body), name=name, tag=op,
                      attrs=attrs)
