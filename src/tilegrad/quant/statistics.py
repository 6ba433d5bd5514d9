"""What calibration keeps of each activation tensor, accumulated batch by batch: its extremes (first pass), then a
fine histogram over them (second pass, for the methods that look at the distribution)."""

from __future__ import annotations

import numpy as np

FINE_BINS = 4096  # fine enough that a bin is far narrower than a uint8 step on the narrowest candidate range


class Extremes:
    """The running minimum and maximum of a tensor over the calibration batches."""

    def __init__(self):
        self.lo, self.hi = np.inf, -np.inf

    def add(self, x: np.ndarray) -> None:
        if x.size:
            self.lo, self.hi = min(self.lo, float(x.min())), max(self.hi, float(x.max()))

    @property
    def seen(self) -> bool:
        return self.lo <= self.hi


class Histogram:
    """Counts of a tensor's values in FINE_BINS equal bins over [lo, hi], summed over batches."""

    def __init__(self, lo: float, hi: float, bins: int = FINE_BINS):
        self.lo, self.hi = lo, hi if hi > lo else lo + 1.0
        self.counts = np.zeros(bins, np.int64)

    def add(self, x: np.ndarray) -> None:
        self.counts += np.histogram(x, bins=len(self.counts), range=(self.lo, self.hi))[0]

    @property
    def centres(self) -> np.ndarray:
        edges = np.linspace(self.lo, self.hi, len(self.counts) + 1)
        return 0.5 * (edges[:-1] + edges[1:])

    def percentile(self, fraction: float, side: str = "left") -> float:
        """The value below which `fraction` of the counted values lie (linear within a bin). Where `fraction`
        falls between bins, side="left" gives the end of the bin before, "right" the start of the bin after."""
        cumulative = np.cumsum(self.counts)
        target = round(fraction * cumulative[-1], 6)  # a count: 0.05 of 1000 is 50, not 49.99999
        i = min(int(np.searchsorted(cumulative, target, side=side)), len(cumulative) - 1)
        before = cumulative[i - 1] if i else 0
        within = (target - before) / max(cumulative[i] - before, 1)
        width = (self.hi - self.lo) / len(self.counts)
        return self.lo + (i + within) * width
