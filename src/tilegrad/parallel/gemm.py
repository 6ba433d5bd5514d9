"""A thread's matrix-product throughput by shape: measured on a grid of (m, k, n) and interpolated.

One FLOP/s figure does not price a product: a BLAS reaches its peak on large square products, but a skinny one
(a 32-row batch against a 131,072-column classifier, or its weight gradient, whose inner dimension is the
batch) runs at a fraction of it. So the grid's rates are interpolated in log2 of each dimension (clamped to the
grid), and each of a matmul's three products (forward, the input gradient, the weight gradient) is priced by
its own shape. Beyond the grid, a product slows again once an operand outgrows the caches; that drop is measured
as a function of the largest operand's bytes beyond the grid's 4 MiB (`SPILL_COLUMNS`) and multiplies the
grid's rate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

GRID = (16, 64, 256, 1024)  # each of m, k, n
SPILL_ROWS, SPILL_INNER = 64, 256
SPILL_COLUMNS = (4096, 16384, 65536)  # the spill measurement: (64 x 256) @ (256 x n), operands of 4 to 64 MiB
REPEATS = 3


@dataclass(frozen=True)
class GemmRates:
    """FLOP/s of an (m x k) @ (k x n) product at each point of `GRID`^3 (m major, then k, then n); `spill`, the
    rate at each of `SPILL_COLUMNS` over the rate at the first; all times `scale` (the threads and core share
    of the process that runs it)."""
    rates: tuple[float, ...]
    spill: tuple[float, ...]
    scale: float = 1.0

    def flops_per_second(self, m: int, k: int, n: int) -> float:
        grid = np.log2(GRID)
        table = np.log(np.array(self.rates)).reshape(len(GRID), len(GRID), len(GRID))
        weights = [_bracket(grid, math.log2(max(size, 1))) for size in (m, k, n)]
        log_rate = sum(wa * wb * wc * table[a, b, c]
                       for a, wa in weights[0] for b, wb in weights[1] for c, wc in weights[2])
        largest = 4.0 * max(m * k, k * n, m * n)
        spilled = np.log2([4.0 * SPILL_INNER * c for c in SPILL_COLUMNS])
        factor = sum(w * math.log(self.spill[i]) for i, w in _bracket(spilled, math.log2(largest)))
        return float(math.exp(log_rate + factor)) * self.scale

    def seconds(self, batch: int, m: int, k: int, n: int) -> float:
        return 2.0 * batch * m * k * n / self.flops_per_second(m, k, n)


def _bracket(points: np.ndarray, x: float) -> tuple[tuple[int, float], tuple[int, float]]:
    """The two grid points around x (clamped to the grid) and their linear interpolation weights."""
    x = float(np.clip(x, points[0], points[-1]))
    i = min(int(np.searchsorted(points, x, side="right")) - 1, len(points) - 2)
    t = (x - points[i]) / (points[i + 1] - points[i])
    return (i, 1 - t), (i + 1, t)


def products(kind: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    """(batch, m, k, n) of the product a matmul or linear runs on local blocks a and b; leading dimensions of a
    fold into the rows where b is a shared 2-D weight (as torch does)."""
    k = a[-1]
    n = b[0] if kind == "linear" else b[-1]
    if len(b) == 2:
        return 1, math.prod(a[:-1]), k, n
    return math.prod(a[:-2]), a[-2], k, n


def training_seconds(rates: GemmRates, batch: int, m: int, k: int, n: int) -> tuple[float, float]:
    """(forward, backward) seconds: C = A B, then dA = dC B^T (m, n, k) and dB = A^T dC (k, m, n)."""
    return rates.seconds(batch, m, k, n), rates.seconds(batch, m, n, k) + rates.seconds(batch, k, m, n)


def measure_rates() -> GemmRates:
    """The grid's rates and the spill on this process's threads, each the best of a few products."""
    rates = tuple(_rate(m, k, n) for m in GRID for k in GRID for n in GRID)
    spill = [_rate(SPILL_ROWS, SPILL_INNER, n) for n in SPILL_COLUMNS]
    return GemmRates(rates, tuple(r / spill[0] for r in spill))


def _rate(m: int, k: int, n: int) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    torch.mm(a, b, out=out)
    best = math.inf
    for _ in range(REPEATS):
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        best = min(best, time.perf_counter() - start)
    return 2.0 * m * k * n / best
