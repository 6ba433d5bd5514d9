"""A transposed convolution rewritten as a direct one, for the frontends that meet one with constant weights.

The direct convolution gets the fast kernels (the conv_algorithm pass picks Winograd or im2col for it), which the
transposed form has no schedules for. The ONNX and PyTorch frontends share the rewrite.

With a stride s > 1 (and dilation 1) the rewrite is sub-pixel: output pixel t = q*s + r (counted from the start of
the unpadded output) only meets the taps k = j*s + r, so each phase r is a direct convolution of the undilated input
with its sub-kernel. The s_h*s_w sub-kernels, zero-padded to a common ceil(K/s) taps, are stacked into one convolution
with s_h*s_w*Cout output channels, then interleaved (depth to space) and cropped to ONNX's pads and output_padding.
Work: the spread form does Cout*Cin*Kh*Kw multiply-adds for each of the Oh*Ow output pixels, most of them against
inserted zeros; the stacked form does Cout*Cin*ceil(Kh/sh)*ceil(Kw/sw) per output pixel (plus at most one row and
column of phases cropped away), about 1/(sh*sw) of it when s divides K (DCGAN's kernel 4, stride 2: a quarter).

On a 1 x 1 input (a generator's first layer, from its latent vector) each output pixel meets one tap, so the
transposed convolution is one matrix product, (N, Cin) @ (Cin, Cout*Oh*Ow): the panel GEMM streams the weights
once, where a convolution over the padded point would run one small kernel per output pixel.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import GraphBuilder, Value


def transposed_as_conv(b: GraphBuilder, name: str, x: Value, w: Value, bias: Value | None, strides, pads, dilations,
                       output_padding, group: int) -> Value | None:
    """A 2-D transposed convolution (group 1, constant float32 weights) as a direct one: sub-pixel for a stride > 1
    with dilation 1, else over the input spread by the stride. `pads` are ONNX's (all begins, then all ends). None
    when the rewrite does not apply or a pad exceeds dilation * (kernel - 1)."""
    if len(x.shape) != 4 or group != 1 or not w.is_constant or x.dtype != "float32":
        return None
    kernel = w.shape[2:]
    strides = tuple(strides) if strides else (1, 1)
    dilations = tuple(dilations) if dilations else (1, 1)
    pads = tuple(pads) if pads else (0,) * 4
    extra = tuple(output_padding) if output_padding else (0, 0)
    begins = [d * (k - 1) - p for d, k, p in zip(dilations, kernel, pads[:2])]
    ends = [d * (k - 1) - p + e for d, k, p, e in zip(dilations, kernel, pads[2:], extra)]
    if min(begins + ends) < 0:
        return None
    if tuple(x.shape[2:]) == (1, 1) and dilations == (1, 1) and extra == (0, 0):
        return _from_a_point(b, name, x, w, bias, pads)
    if max(strides) > 1 and dilations == (1, 1):
        return _sub_pixel(b, name, x, w, bias, strides, pads, extra)
    flipped = b.const(np.ascontiguousarray(w.data.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]), f"{name}_flipped")
    spread = b.op("dilate", x, name=f"{name}_spread", strides=strides) if max(strides) > 1 else x
    inputs = (spread, flipped) if bias is None else (spread, flipped, bias)
    return b.op("conv", *inputs, name=name, strides=(1, 1), pads=(*begins, *ends), dilations=dilations, group=1)


def _from_a_point(b: GraphBuilder, name: str, x: Value, w: Value, bias: Value | None, pads) -> Value:
    """A transposed convolution of a 1 x 1 input: output pixel (i, j) is x @ w[:, :, top + i, left + j], so the
    whole output is one product with the kernel's uncropped taps as the columns."""
    n, cin = x.shape[:2]
    cout, kh, kw = w.shape[1:]
    (top, left), (bottom, right) = pads[:2], pads[2:]
    taps = w.data[:, :, top:kh - bottom, left:kw - right]
    oh, ow = taps.shape[2:]
    columns = b.const(np.ascontiguousarray(taps.reshape(cin, cout * oh * ow)), f"{name}_taps")
    rows = b.op("reshape", x, name=f"{name}_rows", shape=(n, cin))
    product = b.op("matmul", rows, columns, name=f"{name}_product")
    out = b.op("reshape", product, name=name if bias is None else f"{name}_image", shape=(n, cout, oh, ow))
    if bias is None:
        return out
    return b.op("add", out, b.op("reshape", bias, name=f"{name}_bias_column", shape=(cout, 1, 1)), name=name)


def _sub_pixel(b: GraphBuilder, name: str, x: Value, w: Value, bias: Value | None, strides, pads, extra) -> Value:
    """The stacked phase convolution, interleaved and cropped. Per axis, with taps = ceil(K/s), phase output q reads
    input q - taps + 1 .. q; rows first..last of q cover the output [pad, pad + out) (first >= 0 and last >= input
    size follow from pad <= K - 1, which the caller checked)."""
    n, _, *sizes = x.shape
    cin, cout, *kernel = w.shape
    taps = [-(-k // s) for k, s in zip(kernel, strides)]
    outs = [(i - 1) * s + k - pb - pe + e
            for i, s, k, pb, pe, e in zip(sizes, strides, kernel, pads[:2], pads[2:], extra)]
    firsts = [pb // s for pb, s in zip(pads[:2], strides)]
    lasts = [-(-(pb + o) // s) for pb, o, s in zip(pads[:2], outs, strides)]
    conv_pads = (*(t - 1 - f for t, f in zip(taps, firsts)), *(l - i for l, i in zip(lasts, sizes)))
    (sh, sw), (th, tw) = strides, taps
    padded = np.zeros((cin, cout, th * sh, tw * sw), np.float32)
    padded[:, :, :kernel[0], :kernel[1]] = w.data
    # stacked[(r, c, co), ci, m, n] = w[ci, co, (th-1-m)*sh + r, (tw-1-n)*sw + c]: each phase's taps, flipped.
    phases = padded.reshape(cin, cout, th, sh, tw, sw)[:, :, ::-1, :, ::-1, :].transpose(3, 5, 1, 0, 2, 4)
    stacked = b.const(np.ascontiguousarray(phases.reshape(sh * sw * cout, cin, th, tw)), f"{name}_phases")
    inputs = (x, stacked)
    if bias is not None:
        inputs += (b.op("tile", bias, name=f"{name}_phase_bias", repeats=(sh * sw,)),)
    conv = b.op("conv", *inputs, name=f"{name}_phase_conv", strides=(1, 1), pads=conv_pads, dilations=(1, 1), group=1)
    rows, cols = (l - f for l, f in zip(lasts, firsts))
    split = b.op("reshape", conv, name=f"{name}_phase_split", shape=(n, sh, sw, cout, rows, cols))
    moved = b.op("transpose", split, name=f"{name}_interleave", perm=(0, 3, 4, 1, 5, 2))
    full = b.op("reshape", moved, name=f"{name}_full", shape=(n, cout, rows * sh, cols * sw))
    starts = tuple(pb - f * s for pb, f, s in zip(pads[:2], firsts, strides))
    if full.shape[2:] == tuple(outs):
        return full
    return b.op("slice", full, name=name, starts=starts, ends=tuple(st + o for st, o in zip(starts, outs)), axes=(2, 3),
                steps=(1, 1))
