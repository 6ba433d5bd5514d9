"""Counters that tests read instead of timings: kernels built, cache hits, and the like."""

from __future__ import annotations

import collections

counters: collections.Counter[str] = collections.Counter()


def bump(name: str, n: int = 1) -> None:
    counters[name] += n


def reset() -> None:
    counters.clear()
