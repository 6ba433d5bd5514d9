"""Integer kernels of quantized models: quantize and dequantize, and the integer matmul and convolution with
their requantization epilogue.

The sign convention is ONNX's: q = saturate(round(x / s) + z) and x = s * (q - z), rounding half to even. (The
MindSpore text the design follows writes (3.14) as q = round(r / s + z) but derives z from (3.17) with q_max on the
other side of the same equation, so its sign of z is not one convention throughout; ONNX's is the one its models
and ONNX Runtime use.) A scale and zero point are per tensor (a scalar) or per channel (a vector along `axis`).

The products take u8 or s8 activations and s8 weights and sum exactly in int32. The activation's zero point is
not subtracted per element: sum((a - za) * w) = sum(a * w) - za * sum(w), and the second term is a constant of
each output column, folded into the int32 bias when the weights are packed (as gemmlowp and MLAS do). Convolution
pads its input with za, so padded taps contribute (za - za) * w = 0 as ONNX's centred zeros do.

The epilogue multiplies the int32 sum by a float32 multiplier (s_a * s_w / s_y per output channel), rounds half
to even, adds the output zero point and saturates to [lo, hi] (the output type's range, narrowed by a fused
ReLU or Clip) -- ONNX Runtime's order (MlasRequantizeOutput), so the integer outputs agree bit for bit.
"""

from __future__ import annotations

import math

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_rank
from ._window import Window, guarded_load, in_bounds
from .conv import conv2d
from .elementwise import cast
from .transform import pad

QUANTIZED_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


def _per_channel(v: te.Tensor, index) -> E.Expr:
    """Element `index` of a per-channel vector, or the one value of a scalar."""
    return v[()] if v.ndim == 0 else v[(index,)]


def quantize(x: te.Tensor, scale: te.Tensor, zero_point: te.Tensor, axis: int = 1,
             name: str = "quantize") -> te.Tensor:
    """saturate(round(x / scale) + zero_point) in the zero point's type; a vector scale lies along `axis`."""
    lo, hi = _range(zero_point.dtype, name)

    def body(*i):
        channel = i[axis] if scale.ndim else None
        q = E.round_(x[i] / _per_channel(scale, channel)) + E.cast(x.dtype, _per_channel(zero_point, channel))
        return E.cast(zero_point.dtype, _saturated(q, lo, hi))

    return te.compute(x.shape, body, name=name, tag="elemwise", attrs={"axis": axis})


def dequantize(q: te.Tensor, scale: te.Tensor, zero_point: te.Tensor, axis: int = 1,
               name: str = "dequantize") -> te.Tensor:
    """(q - zero_point) * scale in float32; a vector scale lies along `axis`."""
    def body(*i):
        channel = i[axis] if scale.ndim else None
        centred = E.cast("float32", q[i]) - E.cast("float32", _per_channel(zero_point, channel))
        return centred * _per_channel(scale, channel)

    return te.compute(q.shape, body, name=name, tag="elemwise", attrs={"axis": axis})


def requantize(acc: E.Expr, multiplier: E.Expr | None, zero_point: int, lo: int, hi: int, dtype: str) -> E.Expr:
    """The int32 sum `acc` as `dtype`: times `multiplier`, rounded half to even, plus `zero_point`, saturated
    to [lo, hi]. With no multiplier the sum is the result (int32 outputs: MatMulInteger, ConvInteger)."""
    if multiplier is None:
        return acc
    return E.cast(dtype, _saturated(E.round_(E.cast("float32", acc) * multiplier) + float(zero_point), lo, hi))


def _saturated(value: E.Expr, lo: int, hi: int) -> E.Expr:
    """`value` clamped to [lo, hi] by comparisons, not by minimum and maximum: those propagate NaN (ONNX's Min and
    Max), and their NaN tests kept gcc from vectorising an epilogue fully (a k-mask juggle per vector). A NaN
    stays NaN either way, and its cast to an integer is undefined either way."""
    low, high = E.const(float(lo), value.dtype), E.const(float(hi), value.dtype)
    return E.select(value < low, low, E.select(value > high, high, value))


DOT_GROUP = 4  # k values per int32 lane of the u8 x s8 dot product (vpdpbusd's group)


def group_channels(channels: int) -> int:
    """The channels rounded up to whole dot groups: a `whole_groups` packing's channels."""
    return -(-channels // DOT_GROUP) * DOT_GROUP


def _padded_nhwc(x: te.Tensor, pads, fill: int, channels: int, name: str, tag: str) -> te.Tensor:
    """Channels-last `x` surrounded by `fill` ((before, after) pads of H and W), with `channels` channels (those
    past x's read `fill` too)."""
    batch, height, width, real = x.shape
    (top, bottom), (left, right) = pads
    return te.compute((batch, height + top + bottom, width + left + right, channels),
                      lambda n_, h, w_, c: E.select(in_bounds((h - top, w_ - left, c), (height, width, real)),
                                                    x[n_, h - top, w_ - left, E.minimum(c, real - 1)],
                                                    E.const(fill, x.dtype)),
                      name=name, tag=tag)


def quantized_matmul(a: te.Tensor, wpack: te.Tensor, bias: te.Tensor, multiplier: te.Tensor | None, n: int,
                     zero_point: int, lo: int, hi: int, out_dtype: str, mr: int = 6, weight_bits: int = 8,
                     name: str = "qgemm") -> te.Tensor:
    """requantize(u8(a) @ w + bias) with a (M, K) and w packed as (ceil(N / nr), ceil(K / 4), nr, 4) s8: column
    panels of nr, each k group of 4 interleaved, the layout of a u8 x s8 dot-product instruction (vpdpbusd: four
    byte products summed into each int32 lane). An s8 `a` enters as u8(a + 128) (the caller's bias holds
    -128 * the weight sums), so the products are always u8 x s8. `weight_bits` 7 promises weights in [-64, 64]
    (`_int8_gemm` says what that allows)."""
    check_rank(a, 2, "quantized_matmul", "M, K")
    m, k = a.shape
    groups = -(-k // DOT_GROUP)
    if wpack.ndim != 4 or wpack.shape[1] != groups or wpack.shape[3] != DOT_GROUP:
        raise ShapeError(f"quantized_matmul: packed weights must be (N / nr, {groups}, nr, {DOT_GROUP}), got "
                         f"{wpack.shape}")
    panels, _, nr, _ = wpack.shape
    if not (panels - 1) * nr < n <= panels * nr:
        raise ShapeError(f"quantized_matmul: {n} columns do not fit {panels} panels of {nr}")

    def a_value(row, ko, g):
        value = a[row, E.minimum(ko[0] * DOT_GROUP + g, k - 1)]
        return E.cast("int32", value) + 128 if a.dtype == "int8" else value

    return _int8_gemm((m, k), a_value, (groups,), True, wpack, n, mr, weight_bits, name,
                      lambda acc, i, j: requantize(acc[i, j] + bias[j], _scale(multiplier, j), zero_point, lo, hi,
                                                   out_dtype))


def quantized_conv2d(x: te.Tensor, w: te.Tensor, bias: te.Tensor, multiplier: te.Tensor | None, x_zero_point: int,
                     stride, pads, dilation, groups: int, zero_point: int, lo: int, hi: int, out_dtype: str,
                     weight_bits: int = 8, name: str = "qconv") -> te.Tensor:
    """requantize(conv(x, w) + bias) with x (N, C, H, W) u8/s8 padded with its zero point and w (O, C / groups,
    KH, KW) s8, summed in int32.

    A u8 x with one group is the int8 GEMM of the implicit im2col (`quantized_im2col_conv`), its weights packed
    at the start of the call; ir/integer_products.py packs them at compile time instead. Otherwise the int32
    convolution (tag "conv2d", the convolution's default rule) with the requantization as its element-wise
    epilogue."""
    check_rank(x, 4, "quantized_conv2d", "N, C, H, W")
    Window.of("quantized_conv2d", x.shape[2:], w.shape[2:], stride, pads, dilation)  # checks the window
    if x.dtype == "uint8" and groups == 1:
        wpack = pack_int8_conv_weight(w, name=f"{name}_wpack")
        return quantized_im2col_conv(x, wpack, bias, multiplier, w.shape[0], w.shape[2:], x_zero_point, stride,
                                     pads, dilation, zero_point, lo, hi, out_dtype, weight_bits, name)
    if any(lo_ or hi_ for lo_, hi_ in pads):
        x = pad(x, ((0, 0), (0, 0), *pads), value=float(x_zero_point), name=f"{name}_pad")
    acc = conv2d(cast(x, "int32", name=f"{name}_x32"), cast(w, "int32", name=f"{name}_w32"), stride, 0, dilation,
                 groups, name=f"{name}_acc")

    def output(n_, c, h, w_):
        return requantize(acc[n_, c, h, w_] + bias[c], _scale(multiplier, c), zero_point, lo, hi, out_dtype)

    return te.compute(acc.shape, output, name=name, tag="elemwise")


CONV_PANEL = 16  # output channels per column panel of a packed convolution weight (two AVX2 int32 vectors)


def int8_conv_weight_shape(out_channels: int, depth: int) -> tuple[int, int, int, int]:
    """The packed shape of a convolution weight with `depth` = C * KH * KW values per output channel."""
    return -(-out_channels // CONV_PANEL), -(-depth // DOT_GROUP), CONV_PANEL, DOT_GROUP


def pack_int8_conv_weight(w: te.Tensor, name: str = "wpack") -> te.Tensor:
    """w (O, C, KH, KW) s8 as the GEMM's column panels (ceil(O / 16), ceil(K / 4), 16, 4), its K columns in the
    order (tap row, tap column, channel), zeros past O and K: the order in which the implicit im2col reads x."""
    out_channels, channels, _, kw = w.shape
    k = math.prod(w.shape[1:])

    def w_panel(p, ko, jj, g):
        o, col = p * CONV_PANEL + jj, ko * DOT_GROUP + g
        safe_o, safe_col = E.minimum(o, out_channels - 1), E.minimum(col, k - 1)
        value = w[safe_o, safe_col % channels, safe_col // (kw * channels), (safe_col // channels) % kw]
        return E.select((o < out_channels) & (col < k), value, E.const(0, "int8"))

    return te.compute(int8_conv_weight_shape(out_channels, k), w_panel, name=name, tag="pack")


def quantized_im2col_conv(x: te.Tensor, wpack: te.Tensor, bias: te.Tensor, multiplier: te.Tensor | None,
                          out_channels: int, kernel, x_zero_point: int, stride, pads, dilation, zero_point: int,
                          lo: int, hi: int, out_dtype: str, weight_bits: int = 8, name: str = "qconv",
                          channels_last: bool = False, whole_groups: bool = False) -> te.Tensor:
    """requantize(conv(x, w) + bias) for a u8 x (N, C, H, W) and one group, with w packed by
    `pack_int8_conv_weight`: the int8 GEMM whose a-panels read x's windows directly (rows are output pixels),
    laid out as NCHW after.

    The GEMM columns run over (tap row, tap column, channel), so that a k group of 4 is 4 neighbouring channels
    of `{name}_nhwc`, x padded with its zero point and laid out channels-last (a copy the size of x). With
    `channels_last`, x is (N, H, W, C) and the output (N, OH, OW, O): the GEMM's own row order, so neither side
    is transposed, and x is read in place where the window has no padding. With `whole_groups` (channels-last
    only), the packed weights' columns run over the channels rounded up to a multiple of 4 (zero weights past
    C), so that the tiles read every k group in place from the padded copy, which then has those channels too,
    instead of gathering byte by byte into a packed copy of a (an RGB stem's 3 channels)."""
    check_rank(x, 4, "quantized_im2col_conv", "N, H, W, C" if channels_last else "N, C, H, W")
    if x.dtype != "uint8":
        raise ShapeError(f"quantized_im2col_conv takes a uint8 x, got {x.dtype}")
    if channels_last:
        batch, height, width, channels = x.shape
    else:
        batch, channels, height, width = x.shape
    kh, kw = tuple(kernel)
    lanes = group_channels(channels) if whole_groups else channels  # channels of the padded copy
    k = lanes * kh * kw
    if wpack.shape != int8_conv_weight_shape(out_channels, k):
        raise ShapeError(f"quantized_im2col_conv: {out_channels} output channels of a {kh} x {kw} kernel over "
                         f"{channels} channels need packed weights {int8_conv_weight_shape(out_channels, k)}, got "
                         f"{wpack.shape}")
    win = Window.of("quantized_im2col_conv", (height, width), (kh, kw), stride, pads, dilation)
    oh, ow = win.out_sizes
    (top, bottom), (left, right) = win.pads
    if channels_last and not (top or bottom or left or right) and lanes == channels:
        nhwc = x
    elif channels_last:
        nhwc = _padded_nhwc(x, win.pads, x_zero_point, lanes, f"{name}_nhwc", "pack")
    else:
        nhwc = te.compute((batch, height + top + bottom, width + left + right, channels),
                          lambda n_, h, w_, c: guarded_load(x, (n_, c), (h - top, w_ - left), x_zero_point),
                          name=f"{name}_nhwc", tag="pack")
    (sh, sw), (dh, dw) = win.stride, win.dilation

    in_place = lanes % DOT_GROUP == 0  # a k group is then 4 neighbouring channels of one tap: read in place

    def a_value(row, ko, g):
        n_, h, w_ = row // (oh * ow), (row // ow) % oh, row % ow
        if in_place:
            tap_row, tap_col, c = ko[0], ko[1], ko[2] * DOT_GROUP + g
        else:
            first = E.minimum(ko[0] * DOT_GROUP + g, k - 1)
            tap_row, tap_col, c = first // (kw * channels), (first // channels) % kw, first % channels
        return nhwc[n_, h * sh + tap_row * dh, w_ * sw + tap_col * dw, c]

    outer = (kh, kw, lanes // DOT_GROUP) if in_place else (wpack.shape[1],)

    def epilogue(acc, i, j):
        return requantize(acc[i, j] + bias[j], _scale(multiplier, j), zero_point, lo, hi, out_dtype)
    if channels_last:  # the GEMM's rows are the output's pixels: its epilogue writes the output itself
        return _int8_gemm((batch * oh * ow, k), a_value, outer, not in_place, wpack, out_channels, 6, weight_bits,
                          name, epilogue, out_shape=(batch, oh, ow, out_channels))
    gemm = _int8_gemm((batch * oh * ow, k), a_value, outer, not in_place, wpack, out_channels, 6, weight_bits,
                      f"{name}_gemm", epilogue)
    return te.compute((batch, out_channels, oh, ow), lambda n_, c, h, w_: gemm[(n_ * oh + h) * ow + w_, c],
                      name=name, tag="injective")


def quantized_depthwise_nhwc(x: te.Tensor, w: te.Tensor, bias: te.Tensor, multiplier: te.Tensor | None,
                             x_zero_point: int, stride, pads, dilation, zero_point: int, lo: int, hi: int,
                             out_dtype: str, name: str = "qconv", taps_grouped: bool = False) -> te.Tensor:
    """requantize(depthwise conv(x, w) + bias) with x (N, H, W, C) u8/s8 and w (C, 1, KH, KW) s8: each output
    pixel's channels are a run of bytes, so a vector of channels accumulates its taps in int32 (tag
    "depthwise_nhwc", schedule/rules_int8.py) where NCHW's strided windows gave one channel at a time. The
    weights are read as (KH, KW, C), `{name}_wt`, a copy of a few KiB, so that a tap's channels are a run too.
    With `taps_grouped` (u8 activations, the window undilated along the row) the sum is `_grouped_taps`'s."""
    check_rank(x, 4, "quantized_depthwise_nhwc", "N, H, W, C")
    _, height, width, channels = x.shape
    if w.shape[:2] != (channels, 1):
        raise ShapeError(f"quantized_depthwise_nhwc: weights must be ({channels}, 1, KH, KW), got {list(w.shape)}")
    win = Window.of("quantized_depthwise_nhwc", (height, width), w.shape[2:], stride, pads, dilation)
    if taps_grouped and x.dtype == "uint8" and win.dilation[1] == 1:
        acc = _grouped_taps(x, w, win, x_zero_point, name)
    else:
        acc = _tap_by_tap(x, w, win, x_zero_point, name)

    def output(n_, h, w_, c):
        return requantize(acc[n_, h, w_, c] + bias[c], _scale(multiplier, c), zero_point, lo, hi, out_dtype)

    return te.compute(acc.shape, output, name=name, tag="elemwise")


def _tap_by_tap(x: te.Tensor, w: te.Tensor, win: Window, x_zero_point: int, name: str) -> te.Tensor:
    """The depthwise int32 sums, one tap at a time: each tap's vector of channels widened and multiplied."""
    batch, _, _, channels = x.shape
    xp = _padded_nhwc(x, win.pads, x_zero_point, channels, f"{name}_pad", "pad") if any(map(any, win.pads)) else x
    (sh, sw), (dh, dw) = win.stride, win.dilation
    wt = te.compute((*w.shape[2:], channels), lambda r_, q_, c: w[c, 0, r_, q_], name=f"{name}_wt", tag="pack")
    kh = w.shape[2]
    r, q = te.reduce_axis(kh, "r"), te.reduce_axis(w.shape[3], "q")
    return te.compute((batch, *win.out_sizes, channels),
                      lambda n_, h, w_, c: te.sum(E.cast("int32", xp[n_, h * sh + r * dh, w_ * sw + q * dw, c])
                                                  * E.cast("int32", wt[r, q, c]), axis=[r, q]),
                      name=f"{name}_acc", tag="depthwise_nhwc", attrs={"window_rows": (kh, sh, dh)})


TAP_LANES = 16  # channels per block of the grouped-taps form: one vector of int32 sums (AVX-512)


def _grouped_taps(x: te.Tensor, w: te.Tensor, win: Window, x_zero_point: int, name: str) -> te.Tensor:
    """The depthwise int32 sums with a row's taps in groups of DOT_GROUP, for the u8 x s8 dot product: the padded
    input (`{name}_pad`) is laid out in blocks of TAP_LANES channels, (N, H', C / 16, W', 16), so that the 4
    neighbouring pixels a group reads for 16 channels are 64 contiguous bytes, and the weights (`{name}_wt`) as
    (KH, ceil(KW / 4), C', 4), zero past KW: then a group of one output pixel and 16 channels is one transposing
    byte permute and one vpdpbusd (loop/dot4.py's transposed form) where the tap-by-tap form widens each byte to
    32 bits and multiplies. The rows are padded on the right to the last group's pixels (weights zero there)."""
    batch, height, width, channels = x.shape
    kh, kw = w.shape[2:]
    (sh, sw), (dh, _) = win.stride, win.dilation
    (top, bottom), (left, _) = win.pads
    oh, ow = win.out_sizes
    groups = -(-kw // DOT_GROUP)
    blocks = -(-channels // TAP_LANES)
    padded_width = (ow - 1) * sw + groups * DOT_GROUP
    fill = E.const(x_zero_point, x.dtype)

    def padded(n_, h, cb, w_, lane):
        c = cb * TAP_LANES + lane
        inside = in_bounds((h - top, w_ - left, c), (height, width, channels))
        return E.select(inside, x[n_, h - top, w_ - left, E.minimum(c, channels - 1)], fill)

    xb = te.compute((batch, height + top + bottom, blocks, padded_width, TAP_LANES), padded,
                    name=f"{name}_pad", tag="pad")
    wt = te.compute((kh, groups, blocks * TAP_LANES, DOT_GROUP),
                    lambda r_, g_, c, t: E.select((g_ * DOT_GROUP + t < kw) & (c < channels),
                                                  w[E.minimum(c, channels - 1), 0, r_,
                                                    E.minimum(g_ * DOT_GROUP + t, kw - 1)],
                                                  E.const(0, w.dtype)),
                    name=f"{name}_wt", tag="pack")
    r, g, t = te.reduce_axis(kh, "r"), te.reduce_axis(groups, "g"), te.reduce_axis(DOT_GROUP, "t")

    def body(n_, h, w_, c):
        lanes = E.floordiv(c, TAP_LANES), E.floormod(c, TAP_LANES)
        tap = xb[n_, h * sh + r * dh, lanes[0], w_ * sw + g * DOT_GROUP + t, lanes[1]]
        return te.sum(E.cast("int32", tap) * E.cast("int32", wt[r, g, c, t]), axis=[r, g, t])

    return te.compute((batch, oh, ow, channels), body, name=f"{name}_acc", tag="depthwise_nhwc",
                      attrs={"taps_grouped": True, "window_rows": (kh, sh, dh)})


def _scale(multiplier: te.Tensor | None, channel) -> E.Expr | None:
    return None if multiplier is None else _per_channel(multiplier, channel)


def _int8_gemm(shape: tuple[int, int], a_value, outer: tuple[int, ...], pack_a: bool, wpack: te.Tensor, n: int,
               mr: int, weight_bits: int, name: str, epilogue, out_shape: tuple[int, ...] | None = None):
    """The int8 GEMM's stages. The k groups are numbered by the indices of `outer` (row-major: a convolution's
    tap row, tap column and group of channels, so that each has a loop and the tiles' addresses stay affine), and
    `a_value(row, ko, g)` is the u8 value of row `row` in value g of group `ko` (a tuple of those indices). With
    `pack_a`, `{name}_apack` holds it in panels of mr rows and k groups of 4 (zero past the rows and columns);
    without, the tiles read it in place, where each k group is 4 neighbouring bytes and k a multiple of 4 (rows
    past the last read the last: their sums are cropped). `{name}_padded` (tag
    "packed_int8_tiles") sums the int32 products of each register tile over the k groups and the 4 values of
    each, and the output (tag "packed_int8_matmul") is `epilogue(tiles, i, j)` (schedule/rules_int8.py schedules
    them; loop/dot4.py gives the tile's inner loops to the dot-product instruction). With `out_shape`, whose
    leading axes number the m rows in row-major order and whose last is the n columns, the output has that shape
    (a channels-last convolution's (N, OH, OW, O)), so that no copy reshapes it after.

    With 7-bit weights (`weight_bits` 7) a group is summed as two int16 sums of two products each, which cannot
    overflow (2 * 255 * 64 = 32640 < 2**15): the form of AVX2's vpmaddubsw, which saturates there, so that the lowering
    may use it (MLAS's AVX2 kernels take the same promise from ONNX Runtime's reduce_range)."""
    m, k = shape
    panels, groups, nr, _ = wpack.shape
    mp = -(-m // mr) * mr

    def a_panel(io, ko, ii, g):
        row = io * mr + ii
        inside = (row < m) & (ko * DOT_GROUP + g < k)
        return E.select(inside, E.cast("uint8", a_value(E.minimum(row, m - 1), (ko,), g)), E.const(0, "uint8"))

    attrs = {"mr": mr, "nr": nr}
    axes = [te.reduce_axis(e, f"ko{d}" if len(outer) > 1 else "ko") for d, e in enumerate(outer)]
    ko = axes[0]
    for axis, e in zip(axes[1:], outer[1:]):
        ko = ko * e + axis
    if pack_a:  # (one group index)
        ap = te.compute((mp // mr, groups, mr, DOT_GROUP), a_panel, name=f"{name}_apack", tag="pack")

        def a_at(i, g):
            return ap[i // mr, ko, i % mr, g]
    else:  # (only for u8 values: a convolution's)
        def a_at(i, g):
            return a_value(E.minimum(i, m - 1), tuple(axes), g)
    if weight_bits == 7:
        h = te.reduce_axis(DOT_GROUP // 2, "h")

        def pair(i, j, g):
            return E.cast("int16", a_at(i, g)) * E.cast("int16", wpack[j // nr, ko, j % nr, g])

        def body(i, j):
            return te.sum(E.cast("int32", pair(i, j, 2 * h) + pair(i, j, 2 * h + 1)), axis=[*axes, h])
    else:
        g = te.reduce_axis(DOT_GROUP, "g")

        def body(i, j):
            return te.sum(E.cast("int32", a_at(i, g)) * E.cast("int32", wpack[j // nr, ko, j % nr, g]),
                          axis=[*axes, g])

    padded = te.compute((mp, panels * nr), body, name=f"{name}_padded", tag="packed_int8_tiles", attrs=attrs)
    if out_shape is None:
        return te.compute((m, n), lambda i, j: epilogue(padded, i, j), name=name, tag="packed_int8_matmul",
                          attrs=attrs)
    if math.prod(out_shape[:-1]) != m or out_shape[-1] != n:
        raise ShapeError(f"{name}: an output of {list(out_shape)} does not hold {m} rows of {n} columns")

    def shaped(*index):
        row = index[0]
        for axis, size in zip(index[1:-1], out_shape[1:-1]):
            row = row * size + axis
        return epilogue(padded, row, index[-1])
    return te.compute(out_shape, shaped, name=name, tag="packed_int8_matmul", attrs=attrs)


def _range(dtype: str, where: str) -> tuple[int, int]:
    if dtype not in QUANTIZED_RANGES:
        raise ShapeError(f"{where}: quantized tensors are uint8 or int8, got {dtype}")
    return QUANTIZED_RANGES[dtype]
