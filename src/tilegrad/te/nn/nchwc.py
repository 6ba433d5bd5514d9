"""Convolution and pooling in the blocked channel layout NCHW[x]c.

A tensor (N, C, H, W) is held as (N, ceil(C / x), H, W, x): channel `c` is lane `c % x` of channel block `c // x`,
and the channels past C in the last block are zero. The block is the vector width, so every op here vectorises
across one block of channels whatever the image size: a depthwise convolution or a pool with stride 2 loads whole
vectors instead of gathering every second column, and a chain of convolutions passes its activations on without
the copy-out to NCHW that `blocked_conv2d` pays at each layer.

Weights are packed ahead of time (the graph pass does it once, on constants): a convolution's as
(O / x, C', KH, KW, x), C' being the input channels rounded up to whole blocks; a depthwise convolution's as
(C / x, KH, KW, x). A bias comes as (O / x, x). Index variables are named n, cb (channel block), h, w and ci (the
channel inside the block).

Padding: a convolution's padded input is a stage of its own (`{name}_pad`, tagged "blocked_pad" so that the
default inlining leaves it so), which the schedule makes a whole copy or inlines, each read guarded, where the
guarded reads are few (schedule/rules_nchwc.py's `default_pad_in_place`); a depthwise convolution or a pool reads
through a guard, since it does a few operations per load and an extra pass over memory to pad would cost it more
than the guard.

Tags: the transforms are plain "injective" copies; a convolution's stages are tagged "conv2d_nchwc" (its
reduction, and the bias addition when there is one), a depthwise convolution's "depthwise_conv2d_nchwc", a pool's
(the window reduction and an average's division) "pool_nchwc"; schedule/rules_nchwc.py schedules them.
"""

from __future__ import annotations

from ...errors import ShapeError
from .. import dims
from .. import expr as E
from .. import tensor as te
from ._arguments import check_same_dtype, int_tuple
from ._window import Window, in_bounds, taps_between
from .conv_groups import BlockGroups

Pads = tuple[tuple[int, int], ...]
Taps = tuple[tuple[int, int], tuple[int, int]]


def to_blocked(x: te.Tensor, block: int, name: str = "to_blocked") -> te.Tensor:
    """x (N, C, H, W) as (N, ceil(C / block), H, W, block), the channels past C zero. Its attrs name the block
    it transposes with the pixels (`transpose_block`: schedule/defaults.py tiles such a copy in squares)."""
    if x.ndim != 4:
        raise ShapeError(f"to_blocked: {x.name} must be (N, C, H, W), got shape {x.shape}")
    if block < 1:
        raise ShapeError(f"to_blocked: block must be positive, got {block}")
    n, channels, height, width = x.shape
    zero = E.const(0, x.dtype)

    def body(n, cb, h, w, ci):
        c = cb * block + ci
        if channels % block == 0:
            return x[n, c, h, w]
        return E.select(c < channels, x[n, E.minimum(c, channels - 1), h, w], zero)

    return te.compute((n, -(-channels // block), height, width, block), body, name=name, tag="injective",
                      attrs={"block": block, "transpose_block": block})


def from_blocked(x: te.Tensor, channels: int, name: str = "from_blocked") -> te.Tensor:
    """x (N, C / b, H, W, b) back in NCHW, keeping the first `channels` channels."""
    if x.ndim != 5:
        raise ShapeError(f"from_blocked: {x.name} must be (N, C / b, H, W, b), got shape {x.shape}")
    n, blocks, height, width, block = x.shape
    if not (blocks - 1) * block < channels <= blocks * block:
        raise ShapeError(f"from_blocked: {channels} channels do not fill the last of {blocks} blocks of {block}")
    return te.compute((n, channels, height, width), lambda n, c, h, w: x[n, c // block, h, w, c % block],
                      name=name, tag="injective", attrs={"channels": channels, "transpose_block": block})


def reblock(x: te.Tensor, block: int, channels: int, name: str = "reblock") -> te.Tensor:
    """x (N, C / b, H, W, b) in blocks of `block` lanes instead, (N, ceil(channels / block), H, W, block), in one
    copy (no NCHW tensor between); the lanes past `channels` zero."""
    if x.ndim != 5:
        raise ShapeError(f"reblock: {x.name} must be (N, C / b, H, W, b), got shape {x.shape}")
    n, blocks, height, width, inner = x.shape
    if block < 1 or not (blocks - 1) * inner < channels <= blocks * inner:
        raise ShapeError(f"reblock: needs a positive block and {channels} channels filling the last of {blocks} "
                         f"blocks of {inner}, got block {block}")
    zero = E.const(0, x.dtype)

    def body(n, cb, h, w, ci):
        c = cb * block + ci
        if channels % block == 0:
            return x[n, c // inner, h, w, c % inner]
        last = E.minimum(c, channels - 1)
        return E.select(c < channels, x[n, last // inner, h, w, last % inner], zero)

    return te.compute((n, -(-channels // block), height, width, block), body, name=name, tag="injective",
                      attrs={"block": block, "channels": channels})


def conv2d_nchwc(x: te.Tensor, wpack: te.Tensor, stride=1, padding=0, dilation=1, bias: te.Tensor | None = None,
                 name: str = "conv2d_nchwc", groups: BlockGroups | None = None,
                 taps: Taps | None = None) -> te.Tensor:
    """conv2d of blocked x (N, C / bi, H, W, bi), or of NCHW x at the start of a chain, with weights packed as
    (O / b, C', KH, KW, b); the output is blocked, (N, O / b, OH, OW, b). Grouped (`groups`), each output block
    reads only its span of the input channels, C' of them, in whole input blocks. `taps` ((y0, y1), (x0, x1))
    restricts the window to those of the weights' taps, and a negative pad crops: together they compute one
    region of a larger convolution from its weights, reading no padding (passes/conv_regions.py)."""
    if wpack.ndim != 5 or x.ndim not in (4, 5):
        raise ShapeError(f"conv2d_nchwc: expected x (N, C / b, H, W, b) or (N, C, H, W) and packed weights "
                         f"(O / b, C, KH, KW, b), got {x.shape} and {wpack.shape}")
    check_same_dtype([x, wpack], "conv2d_nchwc")
    blocks, in_channels, kh, kw, block = wpack.shape
    (y0, y1), (x0, x1) = tap_spans(taps, (kh, kw))
    kh, kw = y1 - y0, x1 - x0
    channels = x.shape[1] * x.shape[4] if x.ndim == 5 else x.shape[1]
    reads = channels if groups is None else groups.span
    if in_channels != reads:
        raise ShapeError(f"conv2d_nchwc: the weights have {in_channels} input channels per block but {x.name} "
                         f"gives each block {reads}")
    if groups is not None and (groups.block != block or x.ndim == 5 and not groups.reads_whole_blocks(x.shape[4])):
        raise ShapeError(f"conv2d_nchwc: grouped blocks of {groups.block} reading spans of {groups.span} channels "
                         f"do not fit weights in blocks of {block} and {x.name} of shape {x.shape}")
    _check_bias("conv2d_nchwc", bias, blocks, block)
    win = Window.of("conv2d_nchwc", x.shape[2:4], (kh, kw), stride, padding, dilation, crop=True)
    xp = _pad_spatial(x, win.stage_pads, f"{name}_pad")
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    if x.ndim == 5:
        inner = x.shape[4]
        rcb, rci = te.reduce_axis(in_channels // inner, "rcb"), te.reduce_axis(inner, "rci")

        def body(n, cb, h, w, ci):
            y, z = win.padded_taps((h, w), (ry, rx))
            first = rcb if groups is None else groups.start_block(cb, inner) + rcb
            product = xp[n, first, y, z, rci] * wpack[cb, rcb * inner + rci, ry + y0, rx + x0, ci]
            return te.sum(_tap_row(win, x.shape[2], y, product), axis=[rcb, rci, ry, rx])
    else:
        rc = te.reduce_axis(in_channels, "rc")

        def body(n, cb, h, w, ci):
            y, z = win.padded_taps((h, w), (ry, rx))
            channel = rc if groups is None else groups.start(cb) + rc
            product = xp[n, channel, y, z] * wpack[cb, rc, ry + y0, rx + x0, ci]
            return te.sum(_tap_row(win, x.shape[2], y, product), axis=[rc, ry, rx])

    attrs = {**win.attrs(), "kernel": (kh, kw), "block": block}
    acc_name = name if bias is None else f"{name}_acc"
    if x.ndim == 5 and groups is None and pointwise(attrs):
        out = _pixels_as_one_row(_strided(x, win, f"{name}_strided"), wpack, (y0, x0), acc_name, attrs)
    else:
        out = te.compute((x.shape[0], blocks, *win.out_sizes, block), body, name=acc_name, tag="conv2d_nchwc",
                         attrs=attrs)
    return _add_bias(out, bias, name, "conv2d_nchwc", attrs)


def _tap_row(win: Window, height: int, y: E.Expr, product: E.Expr) -> E.Expr:
    """A tap's `product`, read from row `y` of the padded input, under a test that the row lies in the input
    where the window is dilated: a dilated tap row in the padding multiplies zeros for many output rows, and the
    test lets loop/tails.py skip such a tap row whole (ONNX Runtime's kernel skips them too)."""
    (top, _), _ = win.stage_pads
    if win.dilation[0] == 1 or top == 0:
        return product
    return E.select((y >= top) & (y < top + height), product, E.const(0, product.dtype))


def pointwise(attrs: dict) -> bool:
    """Whether a convolution (its attributes) is 1 x 1 and unpadded: each output pixel reads one input pixel."""
    return tuple(attrs["kernel"]) == (1, 1) and not any(lo or hi for lo, hi in attrs["padding"])


def _strided(x: te.Tensor, win: Window, name: str) -> te.Tensor:
    """The pixels a strided 1 x 1 convolution reads, as an image of their own: a stage of the kernel (tagged
    "blocked_strided", which the default inlining leaves alone, as "blocked_pad"), or inlined where the schedule
    tiles the rows (rules_nchwc); x itself without a stride."""
    (sh, sw), (oh, ow) = win.stride, win.out_sizes
    if (sh, sw) == (1, 1):
        return x
    return te.compute((*x.shape[:2], oh, ow, x.shape[4]), lambda n, cb, h, w, ci: x[n, cb, h * sh, w * sw, ci],
                      name=name, tag="blocked_strided")


def _pixels_as_one_row(x: te.Tensor, wpack: te.Tensor, tap: tuple[int, int], name: str, attrs: dict) -> te.Tensor:
    """A 1 x 1 convolution of blocked x (unstrided: a strided one reads `_strided`'s image) as a reduction over
    the image's pixels as one row (N, O / b, 1, H * W, b), read back as (N, O / b, H, W, b) by a view its consumer
    inlines: a register tile may then span rows (ResNet's 14- and 56-wide rows leave a tail for any tile of 6
    columns; the flattened 196 and 3136 pixels one tail each). The pixel p is row p // W, column p % W of both
    images, the same address."""
    images, _, height, width, inner = x.shape
    blocks, in_channels, _, _, block = wpack.shape
    rcb, rci = te.reduce_axis(in_channels // inner, "rcb"), te.reduce_axis(inner, "rci")
    ry, rx = te.reduce_axis(1, "ry"), te.reduce_axis(1, "rx")

    def body(n, cb, h, p, ci):
        weight = wpack[cb, rcb * inner + rci, ry + tap[0], rx + tap[1], ci]
        return te.sum(x[n, rcb, p // width + ry, p % width + rx, rci] * weight, axis=[rcb, rci, ry, rx])

    pixels = te.compute((images, blocks, 1, height * width, block), body, name=f"{name}_pixels",
                        tag="conv2d_nchwc", attrs={**attrs, "pixels": (height, width)})
    return te.compute((images, blocks, height, width, block),
                      lambda n, cb, h, w, ci: pixels[n, cb, 0, h * width + w, ci], name=name, tag="conv2d_nchwc",
                      attrs=attrs)


def depthwise_conv2d_nchwc(x: te.Tensor, wpack: te.Tensor, stride=1, padding=0, dilation=1,
                           bias: te.Tensor | None = None, name: str = "depthwise_conv2d_nchwc") -> te.Tensor:
    """Depthwise conv2d (groups = C = O) of blocked x (N, C / b, H, W, b) with weights packed as
    (C / b, KH, KW, b): each lane of a block convolves its own channel."""
    if x.ndim != 5 or wpack.ndim != 4 or wpack.shape[0] != x.shape[1] or wpack.shape[3] != x.shape[4]:
        raise ShapeError(f"depthwise_conv2d_nchwc: expected x (N, C / b, H, W, b) and packed weights "
                         f"(C / b, KH, KW, b) with the same blocks, got {x.shape} and {wpack.shape}")
    check_same_dtype([x, wpack], "depthwise_conv2d_nchwc")
    blocks, kh, kw, block = wpack.shape
    _check_bias("depthwise_conv2d_nchwc", bias, blocks, block)
    win = Window.of("depthwise_conv2d_nchwc", x.shape[2:4], (kh, kw), stride, padding, dilation)
    xp = _pad_spatial(x, win.stage_pads, f"{name}_pad")
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")

    def body(n, cb, h, w, ci):
        y, z = win.padded_taps((h, w), (ry, rx))
        return te.sum(xp[n, cb, y, z, ci] * wpack[cb, ry, rx, ci], axis=[ry, rx])

    attrs = {**win.attrs(), "kernel": (kh, kw), "block": block}
    out = te.compute((x.shape[0], blocks, *win.out_sizes, block), body, name=name if bias is None else f"{name}_acc",
                     tag="depthwise_conv2d_nchwc", attrs=attrs)
    return _add_bias(out, bias, name, "depthwise_conv2d_nchwc", attrs)


def lane_group_conv2d_nchwc(x: te.Tensor, upack: te.Tensor, stride=1, padding=0, dilation=1,
                            bias: te.Tensor | None = None, name: str = "lane_group_conv2d_nchwc") -> te.Tensor:
    """A grouped conv2d whose groups of k channels (in and out) lie inside one block, of blocked x
    (N, C / b, H, W, b) with weights packed as (C / b, k, KH, KW, b) (te/nn/lane_groups.py): the k rotations'
    window sums `{name}_rot` (N, C / b, k, OH, OW, b), lane-wise, then the output, each lane summing its group's
    rotated accumulators (`{name}_sum` where a bias is added after). The stages are tagged
    "lane_group_conv2d_nchwc" (schedule/rules_lane_groups.py)."""
    if x.ndim != 5 or upack.ndim != 5 or upack.shape[0] != x.shape[1] or upack.shape[4] != x.shape[4]:
        raise ShapeError(f"lane_group_conv2d_nchwc: expected x (N, C / b, H, W, b) and packed weights "
                         f"(C / b, k, KH, KW, b) with the same blocks, got {x.shape} and {upack.shape}")
    check_same_dtype([x, upack], "lane_group_conv2d_nchwc")
    blocks, k, kh, kw, block = upack.shape
    if block % k or k >= block:
        raise ShapeError(f"lane_group_conv2d_nchwc: groups of {k} channels must divide a block of {block} lanes")
    _check_bias("lane_group_conv2d_nchwc", bias, blocks, block)
    win = Window.of("lane_group_conv2d_nchwc", x.shape[2:4], (kh, kw), stride, padding, dilation)
    xp = _pad_spatial(x, win.stage_pads, f"{name}_pad")
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    attrs = {**win.attrs(), "kernel": (kh, kw), "block": block, "group_size": k}

    def rotation(n, cb, d, h, w, ci):
        y, z = win.padded_taps((h, w), (ry, rx))
        return te.sum(xp[n, cb, y, z, ci] * upack[cb, d, ry, rx, ci], axis=[ry, rx])

    rot = te.compute((x.shape[0], blocks, k, *win.out_sizes, block), rotation, name=f"{name}_rot",
                     tag="lane_group_conv2d_nchwc", attrs=attrs)

    def rotations_summed(n, cb, h, w, ci):
        first = ci // k * k  # the group's first lane
        total = rot[n, cb, 0, h, w, ci]
        for d in range(1, k):
            total = total + rot[n, cb, d, h, w, first + (ci + d) % k]
        return total

    out = te.compute((x.shape[0], blocks, *win.out_sizes, block), rotations_summed,
                     name=name if bias is None else f"{name}_sum", tag="lane_group_conv2d_nchwc", attrs=attrs)
    return _add_bias(out, bias, name, "lane_group_conv2d_nchwc", attrs)


def max_pool2d_nchwc(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                     name: str = "max_pool2d_nchwc") -> te.Tensor:
    """The maximum over each window of blocked x (N, C / b, H, W, b); padding never counts."""
    win = _pool_window("max_pool2d_nchwc", x, kernel, stride, padding, dilation, ceil_mode)
    lowest = te.reduce_identity("max", x.dtype)
    ky, kx = te.reduce_axis(win.kernel[0], "ky"), te.reduce_axis(win.kernel[1], "kx")

    def body(n, cb, h, w, ci):
        return te.max(_guarded(x, n, cb, win.taps((h, w), (ky, kx)), ci, lowest), axis=[ky, kx])

    return te.compute((*x.shape[:2], *win.out_sizes, x.shape[4]), body, name=name, tag="pool_nchwc",
                      attrs={**win.attrs(), "kernel": win.kernel, "pool_type": "max"})


def avg_pool2d_nchwc(x: te.Tensor, kernel, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                     count_include_pad: bool = True, name: str = "avg_pool2d_nchwc") -> te.Tensor:
    """The mean over each window of blocked x (N, C / b, H, W, b): a window sum `{name}_sum`, then a division by
    the taps inside the input (or inside the padded input, with `count_include_pad`), as pool.avg_pool2d."""
    if not E.is_float(x.dtype):
        raise ShapeError(f"avg_pool2d_nchwc: {x.name} must have a float dtype to be averaged, got {x.dtype}")
    win = _pool_window("avg_pool2d_nchwc", x, kernel, stride, padding, dilation, ceil_mode)
    ky, kx = te.reduce_axis(win.kernel[0], "ky"), te.reduce_axis(win.kernel[1], "kx")
    shape = (*x.shape[:2], *win.out_sizes, x.shape[4])
    attrs = {**win.attrs(), "kernel": win.kernel, "pool_type": "avg", "count_include_pad": count_include_pad}

    def window_sum(n, cb, h, w, ci):
        return te.sum(_guarded(x, n, cb, win.taps((h, w), (ky, kx)), ci, 0), axis=[ky, kx])

    sums = te.compute(shape, window_sum, name=f"{name}_sum", tag="pool_nchwc", attrs=attrs)

    def mean(n, cb, h, w, ci):
        count = E.const(1)
        for o, size, k, s, p, dl in zip((h, w), x.shape[2:4], win.kernel, win.stride, win.pads, win.dilation):
            edges = (-p[0], size + p[1]) if count_include_pad else (0, size)
            count = count * taps_between(o * s - p[0], k, dl, *edges)
        return sums[n, cb, h, w, ci] / E.cast(x.dtype, count)

    return te.compute(shape, mean, name=name, tag="pool_nchwc", attrs=attrs)


def global_avg_pool_nchwc(x: te.Tensor, name: str = "global_avg_pool_nchwc") -> te.Tensor:
    """The mean over H and W of blocked x (N, C / b, H, W, b), as (N, C / b, 1, 1, b): a pool whose one window
    covers the image, so it shares the pools' schedule (a vector of lanes accumulated over the image)."""
    if x.ndim != 5:
        raise ShapeError(f"global_avg_pool_nchwc: {x.name} must be (N, C / b, H, W, b), got shape {x.shape}")
    if not E.is_float(x.dtype):
        raise ShapeError(f"global_avg_pool_nchwc: {x.name} must have a float dtype to be averaged, got {x.dtype}")
    n, blocks, height, width, block = x.shape
    ry, rx = te.reduce_axis(height, "ry"), te.reduce_axis(width, "rx")
    shape = (n, blocks, 1, 1, block)
    attrs = {"pool_type": "global_avg"}
    sums = te.compute(shape, lambda n, cb, h, w, ci: te.sum(x[n, cb, ry, rx, ci], axis=[ry, rx]), name=f"{name}_sum",
                      tag="pool_nchwc", attrs=attrs)
    count = dims.count(height * width, x.dtype)
    return te.compute(shape, lambda n, cb, h, w, ci: sums[n, cb, h, w, ci] / count, name=name, tag="pool_nchwc",
                      attrs=attrs)


def _pool_window(op: str, x: te.Tensor, kernel, stride, padding, dilation, ceil_mode: bool) -> Window:
    if x.ndim != 5:
        raise ShapeError(f"{op}: {x.name} must be (N, C / b, H, W, b), got shape {x.shape}")
    kernel = int_tuple(kernel, 2, "kernel", op)
    win = Window.of(op, x.shape[2:4], kernel, kernel if stride is None else stride, padding, dilation, ceil_mode)
    win.check_inside(op)
    return win


def _guarded(x: te.Tensor, n, cb, coords, ci, fill) -> E.Expr:
    """x[n, cb, coords, ci] inside the image, `fill` in the padding."""
    return E.select(in_bounds(coords, x.shape[2:4]), x[n, cb, coords[0], coords[1], ci], E.as_expr(fill, x.dtype))


def _pad_spatial(x: te.Tensor, pads: Pads, name: str) -> te.Tensor:
    """x (blocked or NCHW) with its spatial axes 2 and 3 zero-padded; x itself when there is no padding."""
    if not any(lo or hi for lo, hi in pads):
        return x
    shape = (*x.shape[:2], *(size + lo + hi for size, (lo, hi) in zip(x.shape[2:4], pads)), *x.shape[4:])
    fill = E.const(0, x.dtype)

    def read(h, w):
        coords = (h - pads[0][0], w - pads[1][0])
        return coords, in_bounds(coords, x.shape[2:4])

    if x.ndim == 5:
        def body(n, cb, h, w, ci):
            (y, z), inside = read(h, w)
            return E.select(inside, x[n, cb, y, z, ci], fill)
    else:
        def body(n, c, h, w):
            (y, z), inside = read(h, w)
            return E.select(inside, x[n, c, y, z], fill)

    return te.compute(shape, body, name=name, tag="blocked_pad", attrs={"pads": pads})


def tap_spans(taps: Taps | None, kernel: tuple[int, int]) -> Taps:
    """The taps ((y0, y1), (x0, x1)) of a `kernel`-sized weight a window uses, checked: all of them when None."""
    if taps is None:
        return tuple((0, k) for k in kernel)
    spans = tuple(tuple(int(t) for t in span) for span in taps)
    if len(spans) != 2 or any(len(t) != 2 or not 0 <= t[0] < t[1] <= k for t, k in zip(spans, kernel)):
        raise ShapeError(f"conv2d_nchwc: taps must be two (begin, end) spans inside the kernel {kernel}, got {taps!r}")
    return spans


def _check_bias(op: str, bias: te.Tensor | None, blocks: int, block: int) -> None:
    if bias is not None and bias.shape != (blocks, block):
        raise ShapeError(f"{op}: the bias must be packed as ({blocks}, {block}), one lane per output channel, got "
                         f"{bias.shape}")


def _add_bias(out: te.Tensor, bias: te.Tensor | None, name: str, tag: str, attrs: dict) -> te.Tensor:
    """The reduction `out` plus a per-channel bias (O / b, b); tagged like the reduction, whose rule computes the
    accumulator inside this stage's register tile."""
    if bias is None:
        return out
    return te.compute(out.shape, lambda n, cb, h, w, ci: out[n, cb, h, w, ci] + bias[cb, ci], name=name, tag=tag,
                      attrs=attrs)
