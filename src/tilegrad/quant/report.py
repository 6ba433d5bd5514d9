"""The per-tensor report of a quantized model: the signal-to-quantization-noise ratio of each quantized tensor
against float32, 10 log10(sum x^2 / sum (x - x^)^2) dB, over the calibration data (like ONNX Runtime's QDQ
debugging). Activations are compared as the quantized model computes them, so errors of earlier layers count."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class TensorError(NamedTuple):
    tensor: str
    kind: str  # "weight" or "activation"
    dtype: str
    scale: float  # the largest scale, for per-channel tensors
    sqnr_db: float


class NoiseSum:
    """Sums of signal and noise energy over batches."""

    def __init__(self):
        self.signal = self.noise = 0.0

    def add(self, x: np.ndarray, x_hat: np.ndarray) -> None:
        x = x.astype(np.float64)
        self.signal += float(np.sum(x * x))
        self.noise += float(np.sum((x - x_hat) ** 2))

    @property
    def sqnr_db(self) -> float:
        if self.noise == 0:
            return float("inf")
        return 10 * np.log10(max(self.signal, 1e-300) / self.noise)


class Report(list):
    """The rows (TensorError), in graph order: weights, then activations."""

    def table(self) -> str:
        width = max([len("tensor")] + [len(r.tensor) for r in self])
        lines = [f"{'tensor':<{width}}  {'kind':<10}  {'dtype':<5}  {'scale':>10}  {'SQNR dB':>8}"]
        lines += [f"{r.tensor:<{width}}  {r.kind:<10}  {r.dtype:<5}  {r.scale:>10.4g}  {r.sqnr_db:>8.2f}"
                  for r in self]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()
