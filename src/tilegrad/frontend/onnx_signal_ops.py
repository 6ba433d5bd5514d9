"""ONNX's signal ops mapped onto the registry: DFT is the `dft` op along the signal axis; STFT, linear in its
signal, is a strided convolution whose filters are the windowed DFT rows; the window functions are constants.
Lengths, steps and sizes must be constants. The reader (`onnx.py`) imports this module, which registers them."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.ops.signal import dft_matrix
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op


def _scalar_input(v, what: str, name):
    data = constant_input(v, what, name)
    return None if data is None else int(np.asarray(data).reshape(-1)[0])


@onnx_op("DFT")
def _dft(b: B, name, x, dft_length=None, axis_input=None, *, axis=None, inverse=0, onesided=0):
    """The `dft` op along one signal axis, moved next to the components and back. Before opset 20 the axis is
    an attribute (default 1), since then an input (default -2)."""
    rank = len(x.shape)
    chosen = axis if b.opset < 20 else _scalar_input(axis_input, "axis", name)
    a = (1 if b.opset < 20 else -2) if chosen is None else chosen
    a = a % rank if -rank <= a < rank else rank
    parts = x.shape[-1]
    if a >= rank - 1 or parts not in (1, 2):
        raise ShapeError(f"node {name!r}: DFT needs a signal axis before the last and a last axis of 1 (real) or 2 "
                         f"(complex) components, got axis {chosen} of shape {list(x.shape)}")
    length = x.shape[a]
    n = _scalar_input(dft_length, "dft_length", name)
    if n is None:
        n = 2 * (length - 1) if inverse and onesided else length
    if n < 1:
        raise ShapeError(f"node {name!r}: DFT length {n} must be positive")
    perm = [d for d in range(rank - 1) if d != a] + [a, rank - 1]
    moved = b.op("transpose", x, name=f"{name}_to_last", perm=tuple(perm))
    spectrum = b.op("dft", moved, name=f"{name}_spectrum", n=n, inverse=int(inverse), onesided=int(onesided))
    return b.op("transpose", spectrum, name=name, perm=tuple(perm.index(d) for d in range(rank)))


@onnx_op("STFT")
def _stft(b: B, name, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    """Each frame's DFT as one strided convolution over the signal: filter (k, part) holds the window times the
    DFT row of frequency k."""
    step = _scalar_input(frame_step, "frame_step", name)
    length = _scalar_input(frame_length, "frame_length", name)
    if window is not None:
        taper = np.asarray(constant_input(window, "window", name), np.float64)
        length = length or taper.shape[0]
    if length is None:
        raise ShapeError(f"node {name!r}: STFT needs a window or a frame_length")
    if window is None:
        taper = np.ones(length)
    batch, samples, parts = signal.shape
    if taper.shape != (length,) or parts not in (1, 2) or not 0 < length <= samples or step < 1:
        raise ShapeError(f"node {name!r}: STFT of a signal of shape {list(signal.shape)} with frame_length "
                         f"{length}, frame_step {step} and a window of shape {list(taper.shape)}")
    matrix = dft_matrix(length, parts, length, 0, int(onesided)).reshape(length, parts, -1, 2)
    filters = np.transpose(matrix * taper[:, None, None, None], (2, 3, 1, 0))
    bins = filters.shape[0]
    weights = b.const(filters.reshape(bins * 2, parts, length).astype(signal.dtype), f"{name}_filters")
    channels = b.op("transpose", signal, name=f"{name}_channels", perm=(0, 2, 1))
    frames = b.op("conv", channels, weights, name=f"{name}_frames", strides=(step,), pads=(0, 0), dilations=(1,),
                  group=1)
    split = b.op("reshape", frames, name=f"{name}_split", shape=(batch, bins, 2, frames.shape[-1]))
    return b.op("transpose", split, name=name, perm=(0, 3, 1, 2))


_WINDOWS = {
    "HannWindow": lambda phase: 0.5 - 0.5 * np.cos(phase),
    "HammingWindow": lambda phase: 25 / 46 - (1 - 25 / 46) * np.cos(phase),
    "BlackmanWindow": lambda phase: 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase),
}


def _window(formula):
    def convert(b: B, name, size, *, output_datatype=1, periodic=1):
        """A constant: the window of `size` points, periodic (over size points) or symmetric (over size - 1)."""
        from onnx import helper

        n = _scalar_input(size, "size", name)
        if n is None or n < 1:
            raise ShapeError(f"node {name!r}: a window needs a positive size, got {n}")
        span = n if periodic else max(n - 1, 1)
        values = formula(2 * np.pi * np.arange(n) / span)
        return b.const(values.astype(helper.tensor_dtype_to_np_dtype(output_datatype)), name)
    return convert


for _op_type, _formula in _WINDOWS.items():
    onnx_op(_op_type)(_window(_formula))
