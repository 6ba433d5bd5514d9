"""A transposed convolution with constant weights rewritten for the fast kernels, for the frontends that meet one.

The transposed form has no schedules of its own; the ONNX and PyTorch frontends share the rewrite.

With a stride s > 1 (and dilation 1) it is a matrix product and an overlap-add: each input pixel's channels times
the weights (Cin, Kh*Kw*Cout) give that pixel's patch of output taps, and `col2im` adds the patches at their
places (ir/ops/col2im.py), channels last. The product does exactly the transposed convolution's arithmetic,
Cout*Cin*Kh*Kw multiply-adds per input pixel, on the panel GEMM; the overlap-add reads a few taps per output.
A sub-pixel form (one convolution over the input with the s_h*s_w phases' sub-kernels stacked as output channels,
then depth to space) was measured against it on DCGAN: its stacked phases compute a row and a column of phases
that the crop throws away (56% more arithmetic on a 4 x 4 input), and its convolutions ran at 123-178 GFLOP/s
where the product runs at 150-190 (docs/benchmarks.md, "Machine A, twentieth session").

Otherwise (stride 1, a dilation above 1, or an image of dynamic size) it is a direct convolution with the flipped
kernel over the input spread by the stride (the conv_algorithm pass picks Winograd or im2col for it).

On a 1 x 1 input (a generator's first layer, from its latent vector) each output pixel meets one tap, so the
transposed convolution is one matrix product, (N, Cin) @ (Cin, Cout*Oh*Ow), straight into NCHW.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import GraphBuilder, Value


def transposed_as_conv(b: GraphBuilder, name: str, x: Value, w: Value, bias: Value | None, strides, pads, dilations,
                       output_padding, group: int) -> Value | None:
    """A 2-D transposed convolution (group 1, constant float32 weights) as a product and col2im for a stride > 1
    with dilation 1 on an image of static size, else as a direct convolution over the input spread by the stride.
    `pads` are ONNX's (all begins, then all ends). None when the rewrite does not apply or a pad exceeds
    dilation * (kernel - 1)."""
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
    if max(strides) > 1 and dilations == (1, 1) and all(isinstance(d, int) for d in x.shape[2:]):
        return _product_and_overlap(b, name, x, w, bias, strides, pads, extra)
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


def _product_and_overlap(b: GraphBuilder, name: str, x: Value, w: Value, bias: Value | None, strides, pads,
                         extra) -> Value:
    """The product of the input's pixels (rows, channels last) with the weights (Cin, Kh*Kw*Cout), then the
    overlap-add of each pixel's patch of taps (`col2im`), channels last, then back to NCHW."""
    n, channels, *sizes = x.shape
    cin, cout, *kernel = w.shape
    outs = [(i - 1) * s + k - pb - pe + e
            for i, s, k, pb, pe, e in zip(sizes, strides, kernel, pads[:2], pads[2:], extra)]
    taps = b.const(np.ascontiguousarray(w.data.transpose(0, 2, 3, 1).reshape(cin, -1)), f"{name}_taps")
    pixels = b.op("transpose", x, name=f"{name}_channels_last", perm=(0, 2, 3, 1))
    rows = b.op("reshape", pixels, name=f"{name}_pixels", shape=(n * sizes[0] * sizes[1], channels))
    product = b.op("matmul", rows, taps, name=f"{name}_product")
    patches = b.op("reshape", product, name=f"{name}_patches", shape=(n, *sizes, *kernel, cout))
    out = b.op("col2im", patches, name=f"{name}_overlap", strides=tuple(strides), begins=tuple(pads[:2]),
               sizes=tuple(outs))
    if bias is not None:
        out = b.op("add", out, bias, name=f"{name}_biased")
    return b.op("transpose", out, name=name, perm=(0, 3, 1, 2))
