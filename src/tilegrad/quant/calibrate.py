"""Activation ranges from calibration data: the float model runs over the batches with the tensors to quantize
as extra outputs, their statistics are accumulated, and a range method turns them into (lo, hi) per tensor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import TilegradError
from .ranges import (
    DEFAULT_SEARCH,
    SearchSettings,
    divergence_search,
    max_min,
    remove_outlier,
)
from .statistics import Extremes, Histogram
from .tap import Observer

METHODS = ("max_min", "remove_outlier", "kl", "symmetric_kl", "js")


def calibrate(observer: Observer, tensors: Sequence[str], batches: Sequence[dict[str, np.ndarray]],
              method: str, symmetric: bool, settings: SearchSettings = DEFAULT_SEARCH
              ) -> dict[str, tuple[float, float]]:
    """(lo, hi) of each of `tensors` (observed by `observer` in the float model) by `method`: max_min in one pass over the batches; the others in two (the
    extremes, then a histogram over them)."""
    if method not in METHODS:
        raise TilegradError(f"unknown calibration method {method!r}; choose one of {', '.join(METHODS)}")
    extremes = {t: Extremes() for t in tensors}
    for seen in observer.run(batches):
        for t in tensors:
            extremes[t].add(seen[t])
    empty = [t for t, e in extremes.items() if not e.seen]
    if empty:
        raise TilegradError(f"tensor(s) {empty} held no values over the calibration data")
    if method == "max_min":
        return {t: max_min(e, symmetric) for t, e in extremes.items()}
    hists = {t: Histogram(e.lo, e.hi) for t, e in extremes.items()}
    for seen in observer.run(batches):
        for t in tensors:
            hists[t].add(seen[t])
    if method == "remove_outlier":
        return {t: remove_outlier(h, symmetric) for t, h in hists.items()}
    return {t: divergence_search(h, symmetric, method, settings) for t, h in hists.items()}
