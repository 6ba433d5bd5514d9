"""2-D convolution with output channels packed into vector-sized blocks (the NCHW[x]c idea, kept internal).

Stages: `{name}_pad` (when padded), `{name}_wpack`, the weights as (O / ob, C, KH, KW, ob) blocks (output channels
zero-padded to a multiple of ob; a constant weight can be packed once, ahead of time), `{name}_blocked`, the output
as (N, O / ob, OH, OW, ob), and the output (tag "packed_conv2d") in NCHW. Inner loops run over a block of output
channels, contiguous in both the packed weights and the blocked output, so a schedule vectorises them whatever
the image width, where the direct convolution's vectors run along a row that small feature maps (28, 14, 7) fill
badly.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_same_dtype
from ._window import Window
from .conv_groups import BlockGroups
from .transform import pad


def packed_conv2d(x: te.Tensor, weight: te.Tensor, stride=1, padding=0, dilation=1, block: int = 16,
                  name: str = "conv2d") -> te.Tensor:
    """conv2d (groups = 1) of x (N, C, H, W) with weight (O, C, KH, KW), computed in blocks of `block` output
    channels."""
    if weight.ndim != 4:
        raise ShapeError(f"packed_conv2d: expected weight (O, C, KH, KW), got {weight.shape}")
    return blocked_conv2d(x, pack_conv_weight(weight, block, name=f"{name}_wpack"), weight.shape[0], stride,
                          padding, dilation, name=name)


def pack_conv_weight(weight: te.Tensor, block: int = 16, name: str = "wpack",
                     groups: BlockGroups | None = None) -> te.Tensor:
    """weight (O, C, KH, KW) as (ceil(O / block), C, KH, KW, block), output channels zero-padded; grouped,
    weight (O, C / groups, KH, KW) as `groups.pack` lays it out."""
    if weight.ndim != 4:
        raise ShapeError(f"pack_conv_weight: expected weight (O, C, KH, KW), got {weight.shape}")
    if block < 1:
        raise ShapeError(f"pack_conv_weight: block must be positive, got {block}")
    out_channels, channels, kh, kw = weight.shape
    zero = E.const(0, weight.dtype)
    if groups is not None:
        per_group = groups.in_per_group

        def grouped_weight(co, r, y, z, cb):
            o = co * block + cb
            c = groups.start(co) + r - o // groups.out_per_group * per_group
            inside = E.logical_and(c >= 0, c < per_group)
            return E.select(inside, weight[o, E.minimum(E.maximum(c, 0), per_group - 1), y, z], zero)

        return te.compute((out_channels // block, groups.span, kh, kw, block), grouped_weight, name=name, tag="pack")

    def packed_weight(co, c, y, z, cb):
        o = co * block + cb
        return E.select(o < out_channels, weight[E.minimum(o, out_channels - 1), c, y, z], zero)

    return te.compute((-(-out_channels // block), channels, kh, kw, block), packed_weight, name=name, tag="pack")


def blocked_conv2d(x: te.Tensor, wpack: te.Tensor, out_channels: int, stride=1, padding=0, dilation=1,
                   bias: te.Tensor | None = None, name: str = "conv2d", groups: BlockGroups | None = None) -> te.Tensor:
    """conv2d of x (N, C, H, W) with weights already packed by `pack_conv_weight` (or, grouped, by
    `groups.pack`: each block reads its span of the input channels), plus an optional per-channel bias added as
    the blocks are unpacked to NCHW."""
    if x.ndim != 4 or wpack.ndim != 5:
        raise ShapeError(f"blocked_conv2d: expected x (N, C, H, W) and packed weights (O / b, C, KH, KW, b), got "
                         f"{x.shape} and {wpack.shape}")
    check_same_dtype([x, wpack], "blocked_conv2d")
    n, channels, height, width = x.shape
    blocks, in_channels, kh, kw, block = wpack.shape
    reads = channels if groups is None else groups.span
    if in_channels != reads:
        raise ShapeError(f"blocked_conv2d: the weights have {in_channels} input channels per block but {x.name} "
                         f"gives each block {reads}")
    if not (blocks - 1) * block < out_channels <= blocks * block:
        raise ShapeError(f"blocked_conv2d: {out_channels} output channels do not fit {blocks} blocks of {block}")
    win = Window.of("blocked_conv2d", (height, width), (kh, kw), stride, padding, dilation)
    stride, dilation, pads, (oh, ow) = win.stride, win.dilation, win.pads, win.out_sizes
    attrs = {"stride": stride, "padding": pads, "dilation": dilation, "kernel": (kh, kw), "block": block}
    if any(lo or hi for lo, hi in win.stage_pads):
        x = pad(x, ((0, 0), (0, 0), *win.stage_pads), name=f"{name}_pad")
    rc, ry, rx = te.reduce_axis(in_channels, "rc"), te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    (sh, sw), (dh, dw) = stride, dilation

    def blocked_body(b, co, h, w, cb):
        channel = rc if groups is None else groups.start(co) + rc
        data = x[b, channel, h * sh + ry * dh, w * sw + rx * dw]
        return te.sum(data * wpack[co, rc, ry, rx, cb], axis=[rc, ry, rx])

    blocked = te.compute((n, blocks, oh, ow, block), blocked_body, name=f"{name}_blocked",
                         tag="packed_conv2d_tiles", attrs=attrs)

    def unpacked(b, c, h, w):
        value = blocked[b, c // block, h, w, c % block]
        return value if bias is None else value + bias[c]

    return te.compute((n, out_channels, oh, ow), unpacked, name=name, tag="packed_conv2d", attrs=attrs)
