"""Split a padded blocked convolution into regions that read no padding (atrous convolutions above all).

A convolution with dilation d and padding d (DeepLab's ASPP: 3 x 3 taps at rates 12, 24, 36 on a 28 x 28 map)
multiplies padding for most of its outputs: at rate 24 an output reads, along each axis, one tap inside the map
and two in the padding, except for four rows (columns) at each edge. Computed whole, the kernel copies the input
into a padded buffer 2.7 times its height and width and spends 82% of its multiply-adds on zeros. ONNX Runtime's
NCHWc kernel skips the kernel rows that fall in the padding, row by row.

Along each spatial axis, the outputs fall into bands within which the same contiguous taps stay inside the input
(rows 0-3 read taps 1-2, rows 4-23 tap 1, rows 24-27 taps 0-1). This pass rewrites such a `conv_nchwc` as one
`conv_nchwc` per pair of row and column bands, each restricted to its taps (`taps`: the same packed weights, no
copy) with pads that crop the input to the part its outputs read (negative pads; te/nn/nchwc.py): no region
reads padding, so none needs the padded copy; the regions' outputs are concatenated along the width, then the
height, in the blocked layout.

It splits where `estimate` says the regions cost at least MIN_GAIN less than the whole, in multiply-adds as
passes/conv_algorithm.py counts them (each region's register tile slowed on narrow rows, the weights it streams,
the padded copy it no longer makes, the concatenation's copies), so ordinary convolutions with a pad of one,
whose border bands are one row wide and save little, stay whole, and so do convolutions whose border bands are
too narrow to tile well (rate 4 on 28 x 28).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..ir.graph import Node, Value
from ..te.dims import is_static, representative
from ..target import Target
from ..te.tiling import row_tile
from .context import PassContext
from .conv_algorithm import DIRECT_COLUMNS, TRANSFORM, weight_load
from .editor import GraphEditor, map_nodes

MIN_GAIN = 0.1  # the fraction of the whole convolution's estimated cost the regions must save
FULL_SPEED_COLUMNS = 8  # register-tile columns from which a blocked tile runs at full speed


class Band(NamedTuple):
    """Outputs [start, stop) of one axis, which read taps [first, last) of the kernel, all inside the input, with
    `before` and `after` the pads (at most zero: crops) that give the region exactly those reads."""

    start: int
    stop: int
    first: int
    last: int
    before: int
    after: int


def bands(size: int, kernel: int, stride: int, pad: int, dilation: int, out: int) -> list[Band] | None:
    """The bands of one axis whose outputs read the same taps inside the input; None if some output reads only
    padding (it would have no taps)."""
    spans = []
    for o in range(out):
        origin = o * stride - pad  # where tap 0 reads
        first, last = max(0, -(origin // dilation)), min(kernel, (size - 1 - origin) // dilation + 1)
        if first >= last:
            return None
        spans.append((first, last))
    result, start = [], 0
    for o in range(1, out + 1):
        if o == out or spans[o] != spans[start]:
            first, last = spans[start]
            before = pad - start * stride - first * dilation
            after = (o - start - 1) * stride + dilation * (last - first - 1) + 1 - size - before
            result.append(Band(start, o, first, last, before, after))
            start = o
    return result


def _axes(node: Node) -> list[list[Band]] | None:
    """Each spatial axis's bands, or None where a region split does not apply."""
    x, wpack = node.inputs[:2]
    a = node.attrs
    if a["taps"] is not None or not any(p > 0 for p in a["pads"] or ()) or not is_static(x.shape[2:4]):
        return None  # a dynamic size's bands are not known until the call
    strides, dilations, pads = a["strides"] or (1, 1), a["dilations"] or (1, 1), a["pads"]
    out = node.outputs[0].shape[2:4]
    axes = [bands(x.shape[2 + i], wpack.shape[2 + i], strides[i], pads[i], dilations[i], out[i]) for i in (0, 1)]
    return None if None in axes else axes


def slowdown(width: int) -> float:
    """The blocked kernel's cost per multiply-add on rows of `width` outputs against a wide row: its tile's columns
    short of FULL_SPEED_COLUMNS (narrow regions of DeepLab's rate-4 convolutions lost what their split saved:
    docs/passes.md), and a tail tile's padding."""
    columns = row_tile(width, DIRECT_COLUMNS)
    return max(1.0, FULL_SPEED_COLUMNS / columns) * -(-width // columns) * columns / width


def estimate(node: Node, axes: list[list[Band]], target: Target) -> tuple[float, float]:
    """The estimated cost of the convolution whole and in regions, in multiply-adds."""
    load = weight_load(target)
    x, wpack = node.inputs[:2]
    out_shape = [representative(d) for d in node.outputs[0].shape]  # a dynamic batch at its schedules' value
    n, blocks, oh, ow, block = out_shape
    channels, kh, kw = wpack.shape[1:4]
    per_tap = n * blocks * block * channels  # multiply-adds per output position and tap
    h, w = (representative(d) for d in x.shape[2:4])
    pads = node.attrs["pads"]
    padded = n * channels * (h + pads[0] + pads[2]) * (w + pads[1] + pads[3])
    whole = (per_tap * oh * ow * kh * kw * slowdown(ow) + load * blocks * block * channels * kh * kw
             + TRANSFORM * padded)
    split = TRANSFORM * math.prod(out_shape) * ((len(axes[0]) > 1) + (len(axes[1]) > 1))  # concats
    for rows in axes[0]:
        for cols in axes[1]:
            taps = (rows.last - rows.first) * (cols.last - cols.first)
            width = cols.stop - cols.start
            split += (per_tap * (rows.stop - rows.start) * width * taps * slowdown(width)
                      + load * blocks * block * channels * taps)
    return whole, split


def _regions(ed: GraphEditor, node: Node, axes: list[list[Band]]) -> Value:
    x, wpack, *bias = ed.inputs_of(node)
    a = node.attrs
    rows = []
    for i, r in enumerate(axes[0]):
        pieces = [ed.op("conv_nchwc", x, wpack, *bias, name=f"{node.name}_region{i}_{j}", strides=a["strides"],
                        pads=[r.before, c.before, r.after, c.after], dilations=a["dilations"],
                        group_channels=a["group_channels"], taps=[r.first, c.first, r.last, c.last])
                  for j, c in enumerate(axes[1])]
        rows.append(pieces[0] if len(pieces) == 1 else ed.op("concat", *pieces, name=f"{node.name}_row{i}", axis=3))
    return rows[0] if len(rows) == 1 else ed.op("concat", *rows, name=node.name, axis=2)


def conv_regions(g, ctx: PassContext):
    """Split each padded `conv_nchwc` whose padding costs more than its regions would into those regions."""
    changed = []

    def rewrite(ed: GraphEditor, node: Node):
        axes = _axes(node) if node.op == "conv_nchwc" else None
        if axes is None or len(axes[0]) * len(axes[1]) == 1:
            return None
        whole, split = estimate(node, axes, ctx.target)
        if split > (1 - MIN_GAIN) * whole:
            return None
        ctx.note(f"{node.name}: {len(axes[0])} x {len(axes[1])} regions reading no padding (estimated "
                 f"multiply-adds {split / whole:.2f} of the whole)")
        changed.append(node.name)
        return _regions(ed, node, axes)

    out = map_nodes(g, rewrite)
    return out if changed else g
