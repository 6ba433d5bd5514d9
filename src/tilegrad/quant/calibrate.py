"""Activation ranges from calibration data: the float model runs over the batches with the tensors to quantize
as extra outputs, their statistics are accumulated, and a range method turns them into (lo, hi) per tensor."""

from __future__ import annotations

import warnings
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


class QuantizationWarning(UserWarning):
    """Calibration went through, but on data that leaves some ranges a guess."""

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
    unbounded = [t for t, e in extremes.items() if not (np.isfinite(e.lo) and np.isfinite(e.hi))]
    if unbounded:
        raise TilegradError(f"the float model computes NaN or infinite values in tensor(s) {_some(unbounded)} on the "
                            f"calibration data, so their ranges cannot be calibrated")
    if method == "max_min":
        ranges = {t: max_min(e, symmetric) for t, e in extremes.items()}
    else:
        hists = {t: Histogram(e.lo, e.hi) for t, e in extremes.items()}
        for seen in observer.run(batches):
            for t in tensors:
                hists[t].add(seen[t])
        if method == "remove_outlier":
            ranges = {t: remove_outlier(h, symmetric) for t, h in hists.items()}
        else:
            ranges = {t: divergence_search(h, symmetric, method, settings) for t, h in hists.items()}
    _warn_degenerate(extremes)
    return ranges


def _warn_degenerate(extremes: dict[str, Extremes]) -> None:
    """Warn of tensors that took one value over all the calibration data: their quantized range is a guess."""
    flat = [t for t, e in extremes.items() if e.lo == e.hi]
    if flat:
        warnings.warn(f"{len(flat)} of {len(extremes)} calibrated tensor(s) took a single value over the calibration "
                      f"data ({_some(flat)}); their ranges are degenerate and the quantized model may be inaccurate "
                      f"on other inputs: calibrate on more varied data", QuantizationWarning, stacklevel=3)


def _some(names: list[str], shown: int = 5) -> str:
    return ", ".join(map(repr, names[:shown])) + (f" and {len(names) - shown} more" if len(names) > shown else "")
