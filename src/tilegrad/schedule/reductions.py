"""Where and in what order rules compute a reduction: its work per output element, the order of its loops, a row
reduction as vector partials, and a sliding window's accumulator with the padding only it reads."""

from __future__ import annotations

import math

from ..dtype import itemsize
from ..target import Target
from .knobs import Knobs
from .schedule import Schedule
from .state import Stage
from .tiling import extent


def reduction_work(sch: Schedule, stage: str) -> int:
    """Multiply-adds per output element of a reduction stage: what makes a small output still worth threads."""
    st = sch.state.stage(stage)
    return math.prod(extent(st, a.name) for a in st.op.reduce_axes)


def reduction_order(knobs: Knobs, stage: str, reduce: list[str]) -> list[str]:
    """The reduction loops (input channels first, then the taps) in the order a parameter picks: as they are, or
    the taps outside the channels."""
    if len(reduce) < 2 or knobs.pick(f"{stage}_taps_outer", (0, 1), 0) == 0:
        return reduce
    return reduce[1:] + reduce[:1]


def vectorised_row_reduction(sch: Schedule, p: Stage, consumer: str, row: str, target: Target) -> None:
    """Compute reduction `p` per row of `consumer` (at loop `row`), split over the vector lanes into partial
    results (rfactor) when its one reduction loop holds whole vectors, so that it vectorises."""
    lanes = target.vector_lanes
    reduce = [lp for lp in p.leaves if p.loops[lp].is_reduce]
    if len(reduce) == 1 and extent(p, reduce[0]) % lanes == 0 and extent(p, reduce[0]) >= 2 * lanes:
        _, k1 = sch.split(p.name, reduce[0], lanes)
        rf = sch.rfactor(p.name, k1)
        rst = sch.state.stage(rf)
        lane, *spatial_and_reduce = rst.leaves
        sch.reorder(rf, *spatial_and_reduce, lane)
        sch.vectorize(rf, lane)
        sch.compute_at(rf, consumer, row)
    sch.compute_at(p.name, consumer, row)


def window_pads(sch: Schedule, s: Stage, window: str) -> list[Stage]:
    """The padding stages that only the window stage `window` reads (`s`'s own accumulator or `s`)."""
    return [p for p in sch.state.stages if p.attach is None and not p.op.reduce_axes and p is not s
            and [r.name for r in sch.state.readers(p.tensor)] == [window]]


def attach_window(sch: Schedule, out: str, pads: list[Stage], local: str, w0: str, w1: str,
                  per_plane: bool = False) -> None:
    """The output's vector of columns `w1`; each padding stage computed per output row (a few rows of input, in
    cache), or, `per_plane`, per loop around the rows (a plane's padded copy, each input row copied once where
    per row it is copied once for every tap row), rather than as a whole copy; the accumulator at the tile loop
    `w0`, so it stays in registers."""
    sch.vectorize(out, w1)
    loops = sch.loops(out)
    row = loops[-4] if per_plane and len(loops) >= 4 else loops[-3]
    for p in pads:
        sch.compute_at(p.name, out, row)
        sch.vectorize(p.name, sch.loops(p.name)[-1])
    sch.compute_at(local, out, w0)


PLANES_PER_THREAD = 4  # planes enough to share out whole: a window padded per plane keeps its rows serial
UNROLLED_TAPS = 49  # the largest window whose taps a rule unrolls: a 7 x 7 depthwise convolution's (ConvNeXt's)
UNROLLED_TAP_ROW = 8  # the longest row of taps a convolution's register tile unrolls (`unroll_tap_row`)
TAP_ROW_TILES = ("conv2d_nchwc", "packed_conv2d_tiles")  # the register tiles whose reduction ends in a tap row
ONE_PLANE_WINDOWS = {"depthwise_conv2d", "pool"}  # windows whose output plane reads one input plane


def pads_per_plane(sch: Schedule, window: str, pads: list[Stage], target: Target) -> bool:
    """Whether `window`'s padding is best made per plane: each output plane reads one input plane, and each
    padded plane (the last two axes of a padding stage) fits a quarter of L2, where it stays in cache for the
    rows that read it."""
    return sch.state.stage(window).op.tag in ONE_PLANE_WINDOWS and all(plane_fits(p, 2, target) for p in pads)


def plane_fits(pad: Stage, axes: int, target: Target) -> bool:
    """Whether a plane of padding stage `pad`, its last `axes` axes, fits a quarter of L2."""
    plane = math.prod(extent(pad, a.name) for a in pad.op.axes[-axes:])
    return plane * itemsize(pad.tensor.dtype) <= target.l2_bytes // 4


def planes_share_out(outer: list[int], target: Target) -> bool:
    """Whether the planes (the extents of the loops around the rows, `outer` less its last, the rows) give every
    thread PLANES_PER_THREAD or more, so that the parallel loop may leave the rows out."""
    return math.prod(outer[:-1]) >= PLANES_PER_THREAD * target.cores


def unroll_tap_row(sch: Schedule, stage: str, reduce: list[str], knobs: Knobs) -> None:
    """Unroll the innermost of a convolution register tile's reduction loops `reduce` where it is the row of
    taps of a window `unrolls_tap_row` takes (a parameter, on by default there)."""
    st = sch.state.stage(stage)
    if st.op.tag not in TAP_ROW_TILES:
        return
    ry, rx = [a.name for a in st.op.reduce_axes][-2:]
    if reduce[-1] == rx and unrolls_tap_row((extent(st, ry), extent(st, rx))) and knobs.pick(
            f"{stage}_unroll_taps", (0, 1), 1):
        sch.unroll(stage, rx)


def unrolls_tap_row(kernel: tuple[int, int]) -> bool:
    """Whether a register tile unrolls its window's row of taps, innermost in its reduction: a row of at most
    UNROLLED_TAP_ROW taps of a window of more than one row. The 7 x 7 stem's loop of seven ran each iteration's
    multiply-adds behind a loop's overhead, and the strided 3 x 3s' of three likewise; a 1-D window's row ran
    slower unrolled (Whisper's k3; the figures: docs/benchmarks.md, "Machine F, thirty-sixth session")."""
    return kernel[0] > 1 and 1 < kernel[1] <= UNROLLED_TAP_ROW
