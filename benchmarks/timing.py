"""The one timing loop the benchmark scripts share: a warm-up call, then the median of `repeats` timed calls."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeats: int) -> float:
    """Seconds per call of `fn`: the median over `repeats` calls after one untimed warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
