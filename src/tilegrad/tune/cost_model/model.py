"""The cost-model protocol, and the registry that names its implementations.

A cost model sees a float matrix (one row of program features per candidate, see `features/extract.py`) and
answers a score per row, higher meaning faster. Scores are only compared within one task: a model is trained to
order the candidates of each task, not to predict absolute times across tasks. The tuner takes a model by name
(`register_cost_model`) or as an instance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ...errors import TilegradError


class CostModel(Protocol):
    """Scores candidates from features (higher = faster) and learns from measured throughputs."""

    def predict(self, x: np.ndarray) -> np.ndarray: ...

    def update(self, x: np.ndarray, throughput: np.ndarray, groups: Sequence[str]) -> None: ...

    def save(self, path: str | Path) -> None: ...

    def load(self, path: str | Path) -> None: ...


COST_MODELS: dict[str, Callable[[], CostModel]] = {}
"""Name -> a function making a fresh model (the ones shipped register in `cost_model/__init__.py`)."""


def register_cost_model(name: str, factory: Callable[[], CostModel]) -> None:
    """Make `factory()` the model the tuner builds for `name`."""
    COST_MODELS[name] = factory


def make_cost_model(model: str | CostModel) -> CostModel:
    """The registered model named `model`, freshly made; an instance is returned as it is."""
    if not isinstance(model, str):
        return model
    if model not in COST_MODELS:
        raise TilegradError(f"unknown cost model {model!r}; available: {', '.join(COST_MODELS)}")
    return COST_MODELS[model]()


def speed_of(task, latency: np.ndarray, peaks=None) -> np.ndarray:
    """What the tuner hands a cost model for measured programs of `task` (0 for a failed one): on the CPU with
    the machine's `peaks` (`runtime.peaks.MachinePeaks`), the fraction of its roofline each reaches
    (`Task.roofline_s` over the latency), a speed that compares across tasks and machines; on a GPU, or without
    peaks, FLOPs per second. Models that rank within a task read them all alike."""
    from ...backend import backend_for

    if peaks is None or (task.target is not None and backend_for(task.target).gpu_features):
        return throughput_of(latency, max(task.flops, 1))
    return throughput_of(latency, task.roofline_s(peaks.fma_gflops, peaks.bandwidth_gbs))


def labelling_peaks(model):
    """The peaks `speed_of` reads for `model`: this machine's cached ones; measured now only for a model whose
    labels are roofline fractions (`label == "roofline"`), else none. Tuning must neither wait for nor depend on
    a measurement that a busy machine refuses."""
    from ...runtime.peaks import cached_peaks, measured_peaks

    peaks = cached_peaks()
    if peaks is None and getattr(model, "label", None) == "roofline":
        peaks = measured_peaks()
    return peaks


def throughput_of(latency: np.ndarray, flops: float | None = None) -> np.ndarray:
    """FLOPs per second (or 1/latency without `flops`); failed measurements (inf, nan, <= 0) get 0."""
    lat = np.asarray(latency, dtype=np.float64)
    ok = np.isfinite(lat) & (lat > 0)
    out = np.zeros_like(lat)
    out[ok] = (1.0 if flops is None else flops) / lat[ok]
    return out
