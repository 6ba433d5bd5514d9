"""Integer ops of quantized models: `conv_integer`, the convolution of zero-point-centred int32 operands summed
exactly in int32 (ONNX ConvInteger and QLinearConv before requantizing). It is its own op, not an int32 `conv`,
so the float convolution's rewrites (blocked layouts, Winograd, batch-norm folding) never see it."""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..registry import OUT_FUSABLE, Sample, TensorType, declare
from .nn import _CONV, _conv_flops, _conv_ref, _conv_type, _window

_ATTRS = {"strides": None, "pads": None, "dilations": None, "group": 1}


def _conv_integer_type(x, w, *, strides, pads, dilations, group):
    if x.dtype != "int32" or w.dtype != "int32":
        raise ShapeError(f"conv_integer takes int32 operands (zero points already subtracted), got {x.dtype} and "
                         f"{w.dtype}")
    (out,) = _conv_type(TensorType(x.shape, "float32"), TensorType(w.shape, "float32"), strides=strides, pads=pads,
                        dilations=dilations, group=group)
    return [TensorType(out.shape, "int32")]


def _conv_integer_ref(x, w, *, strides, pads, dilations, group):
    """Summed in float64, exact while every sum stays below 2**53; wraps to int32 as the int32 sums do."""
    y = _conv_ref(x.astype(np.float64), w.astype(np.float64), strides=strides, pads=pads, dilations=dilations,
                  group=group)
    return y.astype(np.int64).astype(np.int32)


def _conv_integer_te(x, w, *, strides, pads, dilations, group):
    _conv_integer_type(x, w, strides=strides, pads=pads, dilations=dilations, group=group)
    win = _window("conv", x.shape[2:], w.shape[2:], strides, pads, dilations)
    return _CONV[x.ndim - 2](x, w, win.stride, win.pads, win.dilation, int(group))


declare("conv_integer", kind=OUT_FUSABLE, attrs=_ATTRS, infer=_conv_integer_type, reference=_conv_integer_ref,
        compute=_conv_integer_te, flops=_conv_flops, num_inputs=2, samples=(
            Sample((((1, 4, 9, 8), "int32"), ((6, 4, 3, 3), "int32")), {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((1, 4, 8, 7), "int32"), ((8, 1, 3, 3), "int32")), {"pads": [2, 1, 2, 1], "group": 4}),
            Sample((((2, 4, 11), "int32"), ((6, 2, 3), "int32")), {"strides": [2], "group": 2})))
