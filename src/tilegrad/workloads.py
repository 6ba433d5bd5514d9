"""A catalogue of named small workloads, one or more per compute family, shared by tests and benchmarks.

Each entry builds fresh tensors: `(inputs, output)`. Index inputs (for gather) are int64 placeholders whose name
starts with "idx"; a test fills them with valid indices.
"""

from __future__ import annotations

from typing import Callable

from . import te
from .te import nn

Workload = Callable[[], tuple[list[te.Tensor], te.Tensor]]


def _p(shape, name, dtype="float32"):
    return te.placeholder(shape, dtype, name)


def _matmul():
    a, b = _p((64, 48), "A"), _p((48, 40), "B")
    return [a, b], nn.matmul(a, b, name="C")


def _packed_matmul():
    a, b = _p((37, 13), "A"), _p((29, 13), "B")
    return [a, b], nn.packed_matmul(a, b, transpose_b=True, mr=6, nr=8, name="C")


def _batch_matmul():
    a, b = _p((3, 17, 12), "A"), _p((3, 12, 9), "B")
    return [a, b], nn.batch_matmul(a, b, name="C")


def _dense():
    x, w, bias = _p((5, 24), "X"), _p((10, 24), "W"), _p((10,), "bias")
    return [x, w, bias], nn.dense(x, w, bias, name="Y")


def _conv(nd, **kw):
    def make():
        spatial = {1: (19,), 2: (14, 14), 3: (6, 7, 5)}[nd]
        x = _p((1, 4, *spatial), "X")
        groups = kw.get("groups", 1)
        w = _p((8, 4 // groups, *([3] * nd)), "W")
        fn = {1: nn.conv1d, 2: nn.conv2d, 3: nn.conv3d}[nd]
        return [x, w], fn(x, w, name="Y", **kw)
    return make


def _packed_conv():
    x, w = _p((1, 5, 9, 10), "X"), _p((11, 5, 3, 3), "W")
    return [x, w], nn.packed_conv2d(x, w, stride=(1, 2), padding=1, block=8, name="Y")


def _depthwise():
    x, w = _p((1, 8, 13, 15), "X"), _p((8, 1, 3, 3), "W")
    return [x, w], nn.depthwise_conv2d(x, w, stride=2, padding=1, name="Y")


def _conv_transpose():
    x, w = _p((1, 4, 6, 7), "X"), _p((4, 3, 3, 3), "W")
    return [x, w], nn.conv2d_transpose(x, w, stride=2, padding=1, output_padding=1, name="Y")


def _max_pool():
    x = _p((1, 3, 11, 12), "X")
    return [x], nn.max_pool2d(x, 3, stride=2, padding=1, name="Y")


def _avg_pool():
    x = _p((1, 3, 11, 12), "X")
    return [x], nn.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, name="Y")


def _global_avg_pool():
    x = _p((2, 5, 7, 7), "X")
    return [x], nn.global_avg_pool(x, name="Y")


def _elementwise_chain():
    a, b = _p((4, 33), "A"), _p((33,), "B")
    return [a, b], nn.gelu(nn.add(a, b, name="S"), name="Y")


def _broadcast_compare():
    a, b = _p((3, 1, 5), "A"), _p((4, 1), "B")
    return [a, b], nn.where(nn.less(a, b, name="L"), a, nn.sigmoid(b, name="G"), name="Y")


def _reduce_mean():
    x = _p((6, 7, 9), "X")
    return [x], nn.reduce_mean(x, axis=(0, 2), keepdims=True, name="Y")


def _reduce_max_rows():
    x = _p((10, 37), "X")
    return [x], nn.reduce_max(x, axis=1, name="Y")


def _softmax():
    x = _p((4, 6, 40), "X")
    return [x], nn.softmax(x, name="Y")


def _log_softmax():
    x = _p((5, 18), "X")
    return [x], nn.log_softmax(x, axis=0, name="Y")


def _layer_norm():
    x, g, b = _p((6, 64), "X"), _p((64,), "G"), _p((64,), "Bt")
    return [x, g, b], nn.layer_norm(x, g, b, name="Y")


def _transpose():
    x = _p((3, 4, 5), "X")
    return [x], nn.transpose(x, (2, 0, 1), name="Y")


def _reshape():
    x = _p((4, 6, 5), "X")
    return [x], nn.reshape(x, (8, 15), name="Y")


def _pad():
    x = _p((3, 5), "X")
    return [x], nn.pad(x, ((1, 2), (0, 3)), value=0.5, name="Y")


def _concat():
    a, b = _p((2, 3, 4), "A"), _p((2, 5, 4), "B")
    return [a, b], nn.concat([a, b], axis=1, name="Y")


def _slice():
    x = _p((9, 10), "X")
    return [x], nn.slice(x, starts=[1, -8], stops=[8, 9], steps=[2, 3], name="Y")


def _gather():
    x, idx = _p((7, 5), "X"), _p((4,), "idx", "int64")
    return [x, idx], nn.gather(x, idx, axis=0, name="Y")


WORKLOADS: dict[str, Workload] = {
    "matmul_64x48x40": _matmul,
    "packed_matmul_37x29x13_bt": _packed_matmul,
    "batch_matmul_3x17x12x9": _batch_matmul,
    "dense_5x24x10": _dense,
    "conv1d_c4_19_stride2": _conv(1, stride=2, padding=1),
    "conv2d_3x3_c4_14x14": _conv(2, padding=1),
    "conv2d_groups2_dilation2": _conv(2, padding=2, dilation=2, groups=2),
    "conv3d_c4_6x7x5": _conv(3, padding=(1, 0, 1)),
    "packed_conv2d_o11_block8": _packed_conv,
    "depthwise_conv2d_c8_stride2": _depthwise,
    "conv2d_transpose_stride2": _conv_transpose,
    "max_pool2d_3x3_stride2": _max_pool,
    "avg_pool2d_ceil": _avg_pool,
    "global_avg_pool_7x7": _global_avg_pool,
    "add_gelu_4x33": _elementwise_chain,
    "broadcast_where": _broadcast_compare,
    "reduce_mean_keepdims": _reduce_mean,
    "reduce_max_rows": _reduce_max_rows,
    "softmax_4x6x40": _softmax,
    "log_softmax_axis0": _log_softmax,
    "layernorm_6x64": _layer_norm,
    "transpose_3d": _transpose,
    "reshape_4x6x5": _reshape,
    "pad_constant": _pad,
    "concat_axis1": _concat,
    "slice_steps": _slice,
    "gather_axis0": _gather,
}
