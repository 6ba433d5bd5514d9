"""How a row of outputs splits into register tiles: one rule for the schedules that tile it and for the
conv_algorithm pass that estimates what the tiles cost."""

from __future__ import annotations


def row_tile(n: int, at_most: int) -> int:
    """A register tile's columns for a row of `n`: the fewest tiles of at most `at_most` columns, then the least
    padding (a divisor where one gives as few tiles). The last tile of a row it does not divide runs guarded,
    which costs far less than a prime row's largest divisor, 1 (DCGAN's 17-wide phase convolution:
    docs/benchmarks.md, machine D)."""
    most = max(1, min(n, at_most))
    return min(range(1, most + 1), key=lambda c: (-(-n // c), -(-n // c) * c - n, -c))
