"""The sizes rules pick for loops and register tiles: a loop's extent, a tile size's candidate values, and the
register tile of a direct convolution or sliding window."""

from __future__ import annotations

from .state import Stage


def extent(s: Stage, loop: str) -> int:
    """The integer extent of `loop` of stage `s` (not one a parameter leaves symbolic)."""
    return s.loops[loop].extent.value


def largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def values(default: int, candidates, limit: int) -> tuple[int, ...]:
    """A parameter's values: the default and the candidates up to `limit` (a larger tile than its loop only adds
    a guarded tail)."""
    return tuple(sorted({default} | {v for v in candidates if v <= limit}))


WINDOW_VECTORS = 8  # the most vectors of output columns a sliding window's register tile accumulates


def window_columns(width: int, lanes: int) -> int:
    """Columns of a sliding window's register tile (a depthwise convolution or pooling on rows of pixels): the
    whole row where it spans at most WINDOW_VECTORS vectors, else its largest divisor within them, else one vector
    (a prime width; the last tile guarded). Each vector is a chain of one multiply-add per tap: one chain waited
    on its own latency at every tap, where several run side by side."""
    wr = width if width <= WINDOW_VECTORS * lanes else largest_divisor(width, WINDOW_VECTORS * lanes)
    return lanes if wr < lanes // 2 and width > 2 * lanes else wr


def conv_tile(channels: int, width: int, lanes: int, accumulators: int = 12) -> tuple[int, int]:
    """(columns, channels) of the register tile: whole vectors of output columns where the width allows, else a
    divisor of the width (a tile that overshoots the row runs its last tile guarded), unless no divisor fills half
    a vector on a row of more than two (a prime width, 37: the divisor 1 ran scalar), then one vector; and as
    many channels as fill the accumulator registers."""
    if width % (2 * lanes) == 0:
        wr = 2 * lanes
    elif width % lanes == 0:
        wr = lanes
    else:
        wr = largest_divisor(width, 2 * lanes)
        if wr < lanes // 2 and width > 2 * lanes:
            wr = lanes
    vectors = -(-wr // lanes)
    return wr, largest_divisor(channels, max(1, accumulators // vectors))
