"""A stride-1 dilated convolution as an undilated one over its input's phases, so that Winograd runs it.

With dilation d and stride 1, output row y reads input rows y - p + d * t: all of one class modulo d where the
pad p is a multiple of d. The rows (and columns) of one class, taken apart, form an image that the undilated
kernel with pad p / d maps to the outputs of the same class. So the d_h * d_w phases of the input go through
the dense convolution as a batch and its outputs go back to their places (space-to-batch, as TensorFlow's
atrous convolution does it). A side that is not a multiple of its dilation is first extended with zeros, which
the pad would have supplied anyway, and the extra outputs are cut off.

passes/conv_algorithm.py prices the phases' Winograd against the direct kernel on the dilated form and emits
this form where it wins: DeepLab's dilated ResNet blocks (rates 2 and 4 on a 28 x 28 map) become Winograd over
14 x 14 and 7 x 7 phases.
"""

from __future__ import annotations

from typing import NamedTuple

from ..ir.graph import Value
from ..te.dims import is_static
from .editor import GraphEditor


class Phases(NamedTuple):
    """How a dilated convolution splits: its dilations, the zero rows and columns that make each side a multiple
    of its dilation, and the undilated convolution's pads (top, left, bottom, right)."""

    dilations: tuple[int, int]
    extension: tuple[int, int]
    pads: tuple[int, int, int, int]

    def input_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The batch of phases the undilated convolution reads, for an input of `shape`."""
        (n, c, h, w), (dh, dw), (eh, ew) = shape, self.dilations, self.extension
        return n * dh * dw, c, (h + eh) // dh, (w + ew) // dw


def phases_of(shape: tuple, attrs: dict) -> Phases | None:
    """The phases of a 2-D convolution over an input of `shape`, or None: it is not dilated, strided, static, or
    has a pad that is not a multiple of its axis' dilation."""
    strides, dilations = attrs["strides"] or (1, 1), attrs["dilations"] or (1, 1)
    pads = attrs["pads"] or (0, 0, 0, 0)
    if len(shape) != 4 or not is_static(shape) or tuple(strides) != (1, 1) or tuple(dilations) == (1, 1):
        return None
    if any(p % dilations[i % 2] for i, p in enumerate(pads)):
        return None
    extension = tuple(-size % d for size, d in zip(shape[2:], dilations))
    return Phases(tuple(dilations), extension, tuple(p // dilations[i % 2] for i, p in enumerate(pads)))


def to_phases(ed: GraphEditor, x: Value, phases: Phases, name: str) -> Value:
    """`x` (N, C, H, W) as the batch of its phases (N * d_h * d_w, C, H / d_h, W / d_w), phase-major per image."""
    (dh, dw), (eh, ew), shape = phases.dilations, phases.extension, phases.input_shape(x.shape)
    if eh or ew:
        x = ed.op("pad", x, name=f"{name}_extend", pads=[0, 0, 0, 0, 0, 0, eh, ew])
    n, c, h, w = x.shape
    split = ed.op("reshape", x, name=f"{name}_split", shape=(n, c, h // dh, dh, w // dw, dw))
    apart = ed.op("transpose", split, name=f"{name}_apart", perm=[0, 3, 5, 1, 2, 4])
    return ed.op("reshape", apart, name=f"{name}_phases", shape=shape)


def from_phases(ed: GraphEditor, y: Value, phases: Phases, out_shape: tuple[int, ...], name: str) -> Value:
    """The undilated convolution's outputs per phase put back in their places: `out_shape`, the dilated one's."""
    (dh, dw), (batch, o, ph, pw) = phases.dilations, y.shape
    split = ed.op("reshape", y, name=f"{name}_unphases", shape=(batch // (dh * dw), dh, dw, o, ph, pw))
    placed = ed.op("transpose", split, name=f"{name}_together", perm=[0, 3, 4, 1, 5, 2])
    out = ed.op("reshape", placed, name=f"{name}_joined", shape=(batch // (dh * dw), o, ph * dh, pw * dw))
    if out.shape == tuple(out_shape):
        return out
    return ed.op("slice", out, name=f"{name}_cut", starts=[0, 0], ends=list(out_shape[2:]), axes=[2, 3],
                 steps=[1, 1])
