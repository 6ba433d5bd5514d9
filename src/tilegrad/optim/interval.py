"""SPNGD's adaptive refresh interval (Osawa et al. 2020), per layer: compare the new factors X with the last
two refreshes' X₋₁ and X₋₂. Not similar to X₋₁: the curvature moves, halve the interval. Similar to X₋₁ but not to
X₋₂: keep it. Similar to both: it has settled, double it.

Why: a fixed global `frequency` either wastes inversions on layers that settled early or lets fast-moving layers
go stale; this rule lets each layer find its own pace (THOR's trace rule then decides what a refresh does).
"""

from __future__ import annotations

import torch


def similar(x: torch.Tensor, y: torch.Tensor, tolerance: float) -> bool:
    """‖X - Y‖_F <= tolerance · ‖Y‖_F."""
    return float(torch.linalg.vector_norm(x - y)) <= tolerance * float(torch.linalg.vector_norm(y))


def next_interval(interval: int, history: list[tuple[torch.Tensor, ...]], factors: tuple[torch.Tensor, ...],
                  tolerance: float) -> int:
    """The layer's next interval after a refresh with `factors`; `history` holds the previous refreshes' factors,
    newest last (a layer's factors are similar when each of A and G is)."""
    def alike(old: tuple[torch.Tensor, ...]) -> bool:
        return all(similar(new, o, tolerance) for new, o in zip(factors, old))
    if not history:
        return interval
    if not alike(history[-1]):
        return max(1, interval // 2)
    if len(history) < 2 or not alike(history[-2]):
        return interval
    return interval * 2
