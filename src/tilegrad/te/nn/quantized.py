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

from ...errors import ShapeError
from .. import expr as E
from .. import tensor as te
from ._arguments import check_rank
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
        return E.cast(zero_point.dtype, E.minimum(E.maximum(q, float(lo)), float(hi)))

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
    scaled = E.round_(E.cast("float32", acc) * multiplier) + float(zero_point)
    return E.cast(dtype, E.minimum(E.maximum(scaled, float(lo)), float(hi)))


DOT_GROUP = 4  # k values per int32 lane of the u8 x s8 dot product (vpdpbusd's group)


def quantized_matmul(a: te.Tensor, wpack: te.Tensor, bias: te.Tensor, multiplier: te.Tensor | None, n: int,
                     zero_point: int, lo: int, hi: int, out_dtype: str, mr: int = 6,
                     name: str = "qgemm") -> te.Tensor:
    """requantize(u8(a) @ w + bias) with a (M, K) and w packed as (ceil(N / nr), ceil(K / 4), nr, 4) s8: column
    panels of nr, each k group of 4 interleaved, the layout of a u8 x s8 dot-product instruction (vpdpbusd: four
    byte products summed into each int32 lane). An s8 `a` enters as u8(a + 128) (the caller's bias holds
    -128 * the weight sums), so the products are always u8 x s8.

    Stages: `{name}_apack` holds u8(a) in panels of mr rows and k groups of 4 (zero past M and K),
    `{name}_padded` (tag "packed_int8_tiles") sums the int32 products of each register tile over the k groups and
    the 4 values of each, and the output (tag "packed_int8_matmul") adds the bias and requantizes
    (schedule/rules_int8.py schedules them; loop/dot4.py gives the tile's inner loops to the dot-product
    instruction)."""
    check_rank(a, 2, "quantized_matmul", "M, K")
    m, k = a.shape
    groups = -(-k // DOT_GROUP)
    if wpack.ndim != 4 or wpack.shape[1] != groups or wpack.shape[3] != DOT_GROUP:
        raise ShapeError(f"quantized_matmul: packed weights must be (N / nr, {groups}, nr, {DOT_GROUP}), got "
                         f"{wpack.shape}")
    panels, _, nr, _ = wpack.shape
    if not (panels - 1) * nr < n <= panels * nr:
        raise ShapeError(f"quantized_matmul: {n} columns do not fit {panels} panels of {nr}")
    mp = -(-m // mr) * mr

    def a_panel(io, ko, ii, g):
        row, col = io * mr + ii, ko * DOT_GROUP + g
        value = a[E.minimum(row, m - 1), E.minimum(col, k - 1)]
        if a.dtype == "int8":
            value = E.cast("int32", value) + 128
        return E.select((row < m) & (col < k), E.cast("uint8", value), E.const(0, "uint8"))

    attrs = {"mr": mr, "nr": nr}
    ap = te.compute((mp // mr, groups, mr, DOT_GROUP), a_panel, name=f"{name}_apack", tag="pack")
    ko, g = te.reduce_axis(groups, "ko"), te.reduce_axis(DOT_GROUP, "g")
    padded = te.compute(
        (mp, panels * nr),
        lambda i, j: te.sum(E.cast("int32", ap[i // mr, ko, i % mr, g])
                            * E.cast("int32", wpack[j // nr, ko, j % nr, g]), axis=[ko, g]),
        name=f"{name}_padded", tag="packed_int8_tiles", attrs=attrs)

    def output(i, j):
        scale = None if multiplier is None else _per_channel(multiplier, j)
        return requantize(padded[i, j] + bias[j], scale, zero_point, lo, hi, out_dtype)

    return te.compute((m, n), output, name=name, tag="packed_int8_matmul", attrs=attrs)


def quantized_conv2d(x: te.Tensor, w: te.Tensor, bias: te.Tensor, multiplier: te.Tensor | None, x_zero_point: int,
                     stride, pads, dilation, groups: int, zero_point: int, lo: int, hi: int, out_dtype: str,
                     name: str = "qconv") -> te.Tensor:
    """requantize(conv(x, w) + bias) with x (N, C, H, W) u8/s8 padded with its zero point and w (O, C / groups,
    KH, KW) s8, summed in int32: the int32 convolution (tag "conv2d", so the convolution's default rule schedules
    it) and the requantization as its element-wise epilogue."""
    check_rank(x, 4, "quantized_conv2d", "N, C, H, W")
    if any(lo_ or hi_ for lo_, hi_ in pads):
        x = pad(x, ((0, 0), (0, 0), *pads), value=float(x_zero_point), name=f"{name}_pad")
    acc = conv2d(cast(x, "int32", name=f"{name}_x32"), cast(w, "int32", name=f"{name}_w32"), stride, 0, dilation,
                 groups, name=f"{name}_acc")

    def output(n_, c, h, w_):
        scale = None if multiplier is None else _per_channel(multiplier, c)
        return requantize(acc[n_, c, h, w_] + bias[c], scale, zero_point, lo, hi, out_dtype)

    return te.compute(acc.shape, output, name=name, tag="elemwise")


def _range(dtype: str, where: str) -> tuple[int, int]:
    if dtype not in QUANTIZED_RANGES:
        raise ShapeError(f"{where}: quantized tensors are uint8 or int8, got {dtype}")
    return QUANTIZED_RANGES[dtype]
