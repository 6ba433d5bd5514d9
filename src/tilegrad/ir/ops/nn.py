"""Neural-network ops: convolutions, matrix products and pooling (the normalisations are in norm.py).

Attributes follow ONNX, spelled in snake case: `pads` lists all the begins then all the ends, strides and
dilations default to 1, and an average excludes the padding unless `count_include_pad` is set. Window ops take
channels-first layouts with 1 to 3 spatial axes and pick te.nn's 1-, 2- or 3-d compute by the rank of the input.
The type rules and references of conv and the pools are in windows.py, which their variants share.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ...dtype import is_float
from ...errors import ShapeError
from ...te import nn
from ...te import tensor as te
from ...te.nn._window import Window
from ..registry import OUT_FUSABLE, REDUCTION, Sample, TensorType, declare
from .operands import broadcasts_to, float_dtype, same_dtype, te_type, widened
from .windows import (
    avg_pool_ref, avg_pool_type, check_conv_channels, check_conv_weight, conv_compute, conv_flops, conv_ref, conv_type,
    max_pool_ref, max_pool_type, onnx_ints, pool_window, spatial_rank, window_attrs,
)

_CONV_TRANSPOSE = {1: nn.conv1d_transpose, 2: nn.conv2d_transpose, 3: nn.conv3d_transpose}
_MAX_POOL = {1: nn.max_pool1d, 2: nn.max_pool2d, 3: nn.max_pool3d}
_AVG_POOL = {1: nn.avg_pool1d, 2: nn.avg_pool2d, 3: nn.avg_pool3d}
_WINDOW_ATTRS = {"strides": None, "pads": None, "dilations": None}


def _add_channel_bias(out: te.Tensor, bias: te.Tensor | None, name: str) -> te.Tensor:
    if bias is None:
        return out
    return te.compute(out.shape, lambda *i: out[i] + bias[i[1]], name=name, tag="broadcast")


# ---- conv and conv_transpose ----

def _conv_te(x, w, bias=None, *, strides, pads, dilations, group):
    conv_type(te_type(x), te_type(w), te_type(bias), strides=strides, pads=pads, dilations=dilations, group=group)
    out = conv_compute(x, w, strides=strides, pads=pads, dilations=dilations, group=group)
    return _add_channel_bias(out, bias, "conv_bias")


def _transposed_window(x, w, strides, pads, dilations, output_padding) -> tuple[Window, tuple[int, ...]]:
    """The window of a transposed convolution and its output padding, from the shapes of x and w (types or
    arrays)."""
    nd = len(x.shape) - 2
    extra = onnx_ints(output_padding, nd, "output_padding", "conv_transpose", 0, minimum=0)
    return Window.transposed("conv_transpose", x.shape[2:], w.shape[2:],
                             *window_attrs("conv_transpose", nd, strides, pads, dilations), extra)


def _conv_transpose_type(x, w, bias=None, *, strides, pads, dilations, group, output_padding):
    spatial_rank(x)
    dtype = float_dtype(x, w, bias)
    check_conv_weight(x, w, group, "C, M / group, *kernel")
    if w.shape[0] != x.shape[1]:
        raise ShapeError(f"the weight has {w.shape[0]} input channels (axis 0), but x has {x.shape[1]}")
    out_channels = w.shape[1] * group
    check_conv_channels(group, x.shape[1], out_channels, bias)
    out = _transposed_window(x, w, strides, pads, dilations, output_padding)[0].out_sizes
    return [TensorType((x.shape[0], out_channels, *out), dtype)]


def _conv_transpose_ref(x, w, bias=None, *, strides, pads, dilations, group, output_padding):
    nd = x.ndim - 2
    win, _ = _transposed_window(x, w, strides, pads, dilations, output_padding)
    out_sizes = win.out_sizes
    (n, c, *sizes), (_, per_group, *kernel) = x.shape, w.shape
    full = [(i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip(sizes, win.stride, win.dilation, kernel)]
    room = [max(f, p[0] + o) for f, p, o in zip(full, win.pads, out_sizes)]
    y = np.zeros((n, group, per_group, *room))
    xg = x.astype(np.float64).reshape(n, group, c // group, *sizes)
    wg = w.astype(np.float64).reshape(group, c // group, per_group, *kernel)
    for taps in np.ndindex(*kernel):
        scatter = tuple(slice(k * d, k * d + s * (i - 1) + 1, s)
                        for k, d, s, i in zip(taps, win.dilation, win.stride, sizes))
        y[(..., *scatter)] += np.einsum("ngc...,gco->ngo...", xg, wg[(..., *taps)])
    y = y[(..., *(slice(p[0], p[0] + o) for p, o in zip(win.pads, out_sizes)))].reshape(n, -1, *out_sizes)
    if bias is not None:
        y += bias.reshape(-1, *[1] * nd)
    return y.astype(x.dtype)


def _conv_transpose_te(x, w, bias=None, *, strides, pads, dilations, group, output_padding):
    _conv_transpose_type(te_type(x), te_type(w), te_type(bias), strides=strides, pads=pads,
                         dilations=dilations, group=group, output_padding=output_padding)
    win, extra = _transposed_window(x, w, strides, pads, dilations, output_padding)
    out = _CONV_TRANSPOSE[x.ndim - 2](x, w, win.stride, win.pads, extra, win.dilation, int(group))
    return _add_channel_bias(out, bias, "conv_transpose_bias")


def _conv_transpose_flops(ins, outs, **_) -> int:
    """2 x the multiply-adds: w is (C, M / group, *kernel), each input element meets prod(w[1:]) weights (the
    compute also multiplies the zeros between strided inputs)."""
    return 2 * math.prod(ins[0].shape) * math.prod(ins[1].shape[1:])


_CONV_ATTRS = {**_WINDOW_ATTRS, "group": 1}
declare("conv", kind=OUT_FUSABLE, attrs=_CONV_ATTRS, infer=conv_type, reference=conv_ref, compute=widened(_conv_te),
        flops=conv_flops,
        num_inputs=(2, 3), samples=(
            Sample((((1, 4, 9, 8), "float32"), ((6, 4, 3, 3), "float32"), ((6,), "float32")),
                   {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((1, 4, 8, 7), "float32"), ((8, 1, 3, 3), "float32")),
                   {"pads": [2, 1, 2, 1], "dilations": [2, 1], "group": 4}),
            Sample((((2, 4, 11), "float32"), ((6, 2, 3), "float32"), ((6,), "float32")),
                   {"strides": [2], "pads": [1, 0], "group": 2}),
        ))
declare("conv_transpose", kind=OUT_FUSABLE, attrs={**_CONV_ATTRS, "output_padding": None}, infer=_conv_transpose_type,
        flops=_conv_transpose_flops,
        reference=_conv_transpose_ref, compute=_conv_transpose_te, num_inputs=(2, 3), samples=(
            Sample((((1, 4, 5, 4), "float32"), ((4, 3, 3, 3), "float32"), ((3,), "float32")),
                   {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]}),
            Sample((((2, 4, 6), "float32"), ((4, 2, 3), "float32")), {"dilations": [2], "group": 2}),
            Sample((((1, 2, 3, 3, 2), "float32"), ((2, 2, 2, 2, 2), "float32")), {"strides": [2, 1, 2]}),
        ))


# ---- matmul and gemm ----

def _matmul_type(a, b):
    """NumPy's matmul rule: a 1-d operand is a row (left) or a column (right) that the output drops."""
    dtype = same_dtype(a, b)
    if not a.shape or not b.shape:
        raise ShapeError("matmul needs operands of rank 1 or more; a scalar product is a mul")
    a2 = (1, *a.shape) if len(a.shape) == 1 else a.shape
    b2 = (*b.shape, 1) if len(b.shape) == 1 else b.shape
    if a2[-1] != b2[-2]:
        raise ShapeError(f"the inner extents differ: a has {a2[-1]} columns, b has {b2[-2]} rows")
    batch = nn.broadcast_shape(a2[:-2], b2[:-2])
    rows = (a2[-2],) if len(a.shape) > 1 else ()
    cols = (b2[-1],) if len(b.shape) > 1 else ()
    return [TensorType((*batch, *rows, *cols), dtype)]


def _matmul_ref(a, b):
    wide = np.float64 if is_float(str(a.dtype)) else np.int64
    return np.matmul(a.astype(wide), b.astype(wide)).astype(a.dtype)


def _matmul_te(a, b):
    (out,) = _matmul_type(te_type(a), te_type(b))
    lhs = nn.reshape(a, (1, *a.shape), name="matmul_row") if a.ndim == 1 else a
    rhs = nn.reshape(b, (*b.shape, 1), name="matmul_column") if b.ndim == 1 else b
    product = nn.matmul(lhs, rhs) if lhs.ndim == rhs.ndim == 2 else nn.batch_matmul(lhs, rhs)
    return product if product.shape == out.shape else nn.reshape(product, out.shape, name="matmul_squeeze")


def _gemm_type(a, b, c=None, *, alpha, beta, trans_a, trans_b):
    dtype = same_dtype(a, b, c)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"A and B must be matrices, got shapes {a.shape} and {b.shape}")
    m, k = a.shape[::-1] if trans_a else a.shape
    kb, n = b.shape[::-1] if trans_b else b.shape
    if k != kb:
        raise ShapeError(f"the inner extents differ: op(A) is {m} x {k}, op(B) is {kb} x {n} "
                         f"(trans_a={trans_a}, trans_b={trans_b})")
    if c is not None and not broadcasts_to(c.shape, (m, n)):
        raise ShapeError(f"C of shape {c.shape} does not broadcast to the output shape {(m, n)}")
    return [TensorType((m, n), dtype)]


def _gemm_ref(a, b, c=None, *, alpha, beta, trans_a, trans_b):
    product = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    return (alpha * product + (0 if c is None else beta * c.astype(np.float64))).astype(a.dtype)


def _gemm_te(a, b, c=None, *, alpha, beta, trans_a, trans_b):
    _gemm_type(te_type(a), te_type(b), te_type(c), alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    plain = alpha == 1 and c is None
    product = nn.matmul(a, b, transpose_a=bool(trans_a), transpose_b=bool(trans_b),
                        name="gemm" if plain else "gemm_matmul")
    if plain:
        return product

    def body(i, j):
        out = product[i, j] if alpha == 1 else product[i, j] * alpha
        if c is None:
            return out
        shift = c[nn.broadcast_index(c.shape, (i, j))]
        return out + (shift if beta == 1 else shift * beta)

    return te.compute(product.shape, body, name="gemm", tag="broadcast" if c is not None else "elemwise")


def _matmul_flops(ins, outs, *, trans_a=0, **_) -> int:
    """2 x the multiply-adds: a dot product over A's inner extent per output element."""
    a = ins[0].shape
    return 2 * math.prod(outs[0].shape) * (a[0] if trans_a else a[-1])


declare("matmul", kind=OUT_FUSABLE, infer=_matmul_type, reference=_matmul_ref, compute=widened(_matmul_te),
        num_inputs=2, flops=_matmul_flops,
        samples=(Sample((((5,), "float32"), ((5,), "float32"))),
                 Sample((((5, 7), "float32"), ((7, 3), "float32"))),
                 Sample((((2, 1, 4, 6), "float32"), ((3, 6, 5), "float32"))),
                 Sample((((2, 4, 6), "float32"), ((6,), "float32")))))
declare("gemm", kind=OUT_FUSABLE, attrs={"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 0},
        infer=_gemm_type, reference=_gemm_ref, compute=widened(_gemm_te), num_inputs=(2, 3), flops=_matmul_flops,
        samples=(Sample((((4, 6), "float32"), ((6, 5), "float32"), ((5,), "float32")), {"alpha": 0.5, "beta": 2.0}),
                 Sample((((6, 4), "float32"), ((5, 6), "float32"), ((4, 1), "float32")),
                        {"trans_a": 1, "trans_b": 1}),
                 Sample((((3, 7), "float32"), ((7, 2), "float32")))))


# ---- pooling ----

def _max_pool_te(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    win = pool_window("max_pool", te_type(x), kernel_shape, strides, pads, dilations, ceil_mode)
    return _MAX_POOL[len(win.kernel)](x, win.kernel, win.stride, win.pads, win.dilation, bool(ceil_mode),
                                      name="max_pool")


def _avg_pool_te(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    float_dtype(te_type(x))
    win = pool_window("avg_pool", te_type(x), kernel_shape, strides, pads, dilations, ceil_mode)
    return _AVG_POOL[len(win.kernel)](x, win.kernel, win.stride, win.pads, win.dilation, bool(ceil_mode),
                                      bool(count_include_pad), name="avg_pool")


_POOL_ATTRS = {"kernel_shape": None, **_WINDOW_ATTRS, "ceil_mode": 0}
declare("max_pool", kind=REDUCTION, attrs=_POOL_ATTRS, infer=max_pool_type, reference=max_pool_ref,
        compute=_max_pool_te, samples=(
            Sample((((1, 2, 7, 6), "float32"),), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
            Sample((((2, 3, 7, 9), "float32"),),
                   {"kernel_shape": [2, 3], "strides": [2, 2], "dilations": [1, 2], "ceil_mode": 1}),
            Sample((((2, 3, 10), "float32"),), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1}),
        ))
declare("avg_pool", kind=REDUCTION, attrs={**_POOL_ATTRS, "count_include_pad": 0}, infer=avg_pool_type,
        reference=avg_pool_ref, compute=_avg_pool_te, samples=(
            Sample((((1, 2, 7, 6), "float32"),), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
            Sample((((1, 2, 8, 7), "float32"),), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                  "ceil_mode": 1, "count_include_pad": 1}),
            Sample((((1, 2, 5, 4, 6), "float32"),), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2],
                                                     "pads": [0, 1, 1, 0, 1, 1], "dilations": [1, 2, 1]}),
        ))


def _global_pool_type(x, *, average: bool):
    if len(x.shape) < 3:
        raise ShapeError(f"x must be (N, C, ...) with at least one spatial axis, got shape {x.shape}")
    if average:
        float_dtype(x)
    return [TensorType((*x.shape[:2], *[1] * (len(x.shape) - 2)), x.dtype)]


def _global_pool_ref(x, *, average: bool):
    axes = tuple(range(2, x.ndim))
    y = x.astype(np.float64).mean(axis=axes, keepdims=True) if average else x.max(axis=axes, keepdims=True)
    return y.astype(x.dtype)


_GLOBAL_SAMPLES = (Sample((((2, 3, 5, 4), "float32"),)), Sample((((1, 4, 6), "float32"),)))
declare("global_avg_pool", kind=REDUCTION, infer=functools.partial(_global_pool_type, average=True),
        reference=functools.partial(_global_pool_ref, average=True),
        compute=lambda x: nn.global_avg_pool(x), rows=lambda x: x[:2], samples=_GLOBAL_SAMPLES)
declare("global_max_pool", kind=REDUCTION, infer=functools.partial(_global_pool_type, average=False),
        reference=functools.partial(_global_pool_ref, average=False),
        compute=lambda x: nn.global_max_pool(x), rows=lambda x: x[:2], samples=_GLOBAL_SAMPLES)
