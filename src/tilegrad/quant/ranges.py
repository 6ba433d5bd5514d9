"""Activation ranges from calibration statistics: the seed's MAX_MIN, RemoveOutlier and the divergence search
(KL, symmetric KL, JS) over candidate thresholds.

The search follows the seed's settings: candidates are `search_value` times start, start + step, ..., end
(0.8-1.2 by 0.01 around a max of 100 gives the 41 values 80...120; 0.3-1.7 by 0.01 gives 141). Symmetric
ranges search a threshold T on |x| with a histogram of |x| over [0, 2 max|x|] (the seed's scheme 1); asymmetric
ones search a width r on x - min with a histogram over [0, 2 (max - min)] (scheme 2). For each candidate the
values are quantized to the grid of that range (127 or 255 steps) and histogrammed in the same `bins` bins; the
candidate whose histogram Q diverges least from the float one P wins. The histograms are derived from the fine
histogram that calibration accumulates over batches, so they too are sums over batches."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import TilegradError
from .divergence import DIVERGENCES
from .statistics import Extremes, Histogram


class SearchSettings(NamedTuple):
    """The seed's hyperparameters of the divergence search (its second example by default)."""

    bins: int = 150
    start: float = 0.3
    end: float = 1.7
    step: float = 0.01


DEFAULT_SEARCH = SearchSettings()


def candidates(search_value: float, settings: SearchSettings) -> np.ndarray:
    """search_value * (start, start + step, ..., end): (end - start) / step + 1 values."""
    n = round((settings.end - settings.start) / settings.step) + 1
    return search_value * (settings.start + settings.step * np.arange(n))


def max_min(ext: Extremes, symmetric: bool) -> tuple[float, float]:
    """MAX_MIN: the observed range ([-max|x|, max|x|] when symmetric)."""
    if symmetric:
        bound = max(abs(ext.lo), abs(ext.hi))
        return -bound, bound
    return ext.lo, ext.hi


def remove_outlier(hist: Histogram, symmetric: bool, keep: float = 0.9) -> tuple[float, float]:
    """RemoveOutlier: the range of the central `keep` of the sorted values (5% cut at each end by default)."""
    cut = (1.0 - keep) / 2
    lo, hi = hist.percentile(cut, side="right"), hist.percentile(1.0 - cut)
    if symmetric:
        bound = max(abs(lo), abs(hi))
        return -bound, bound
    return lo, hi


def divergence_search(hist: Histogram, symmetric: bool, metric: str,
                      settings: SearchSettings = DEFAULT_SEARCH) -> tuple[float, float]:
    """The range whose quantized histogram diverges least (by `metric`: kl, symmetric_kl or js) from P."""
    if metric not in DIVERGENCES:
        raise TilegradError(f"unknown divergence {metric!r}; choose one of {', '.join(DIVERGENCES)}")
    centres, counts = hist.centres, hist.counts
    if symmetric:
        values, levels, extent = np.abs(centres), 127, max(abs(hist.lo), abs(hist.hi))
    else:
        values, levels, extent = centres - hist.lo, 255, hist.hi - hist.lo
    scores = search_scores(values, counts, levels, extent, metric, settings)
    best = candidates(extent, settings)[int(np.argmin(scores))]
    return (-best, best) if symmetric else (hist.lo, hist.lo + best)


def search_scores(values: np.ndarray, counts: np.ndarray, levels: int, extent: float, metric: str,
                  settings: SearchSettings) -> np.ndarray:
    """The divergence of each candidate: `values` (>= 0, each with its count) histogrammed over [0, 2 extent]
    as P, and quantized to `levels` steps of each candidate's range as Q."""
    width = 2 * extent / settings.bins
    p = np.bincount(_bin(values, width, settings.bins), weights=counts, minlength=settings.bins)
    scores = []
    for c in candidates(extent, settings):
        step = c / levels
        quantized = np.minimum(np.rint(values / step), levels) * step
        q = np.bincount(_bin(quantized, width, settings.bins), weights=counts, minlength=settings.bins)
        scores.append(DIVERGENCES[metric](p, q))
    return np.array(scores)


def _bin(values: np.ndarray, width: float, bins: int) -> np.ndarray:
    return np.clip((values / width).astype(np.int64), 0, bins - 1)
