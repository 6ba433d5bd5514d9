"""THOR's trace rule: per layer, whether a refresh adopts the new curvature, reuses the old one, or freezes.

Why traces: the Fisher block of a layer settles at its own pace; the relative change of the trace of the damped
block is a cheap scalar that says when it has. With F = A ⊗ G the damped block (A + λI) ⊗ (G + λI) has trace
tr(A + λI) · tr(G + λI), so no Kronecker product is formed.
"""

from __future__ import annotations

import enum

import torch

from ..errors import OptimizerError

# (w1, w2) of the seed's three variants: THOR reuses below 1% change, THOR_stop also freezes below 0.1%,
# THOR_NT ("no trace") updates whenever anything changed.
PRESETS: dict[str, tuple[float, float]] = {"THOR": (0.01, 0.0), "THOR_stop": (0.01, 0.001), "THOR_NT": (0.0, 0.0)}


class Decision(enum.Enum):
    UPDATE = "update"    # Δ in (w1, ∞): invert the new factors
    REUSE = "reuse"      # Δ in [w2, w1]: keep the previous inverses this time
    FREEZE = "freeze"    # Δ in [0, w2): keep the previous inverses for good


def thresholds_of(thresholds: tuple[float, float] | str) -> tuple[float, float]:
    """(w1, w2) from a pair or a preset name, checked: 0 <= w2 <= w1."""
    if isinstance(thresholds, str):
        if thresholds not in PRESETS:
            raise OptimizerError(f"unknown THOR preset {thresholds!r}; the presets are {sorted(PRESETS)}")
        return PRESETS[thresholds]
    w1, w2 = (float(w) for w in thresholds)
    if not 0.0 <= w2 <= w1:
        raise OptimizerError(f"THOR thresholds (w1, w2) = ({w1}, {w2}) must satisfy 0 <= w2 <= w1")
    return w1, w2


def damped_trace(a: torch.Tensor, g: torch.Tensor, damping: float) -> float:
    """tr((A + λI) ⊗ (G + λI)); a diagonal factor is given as its diagonal (a vector)."""
    def trace(m: torch.Tensor) -> float:
        diagonal = m if m.dim() == 1 else m.diagonal()
        return float(diagonal.sum()) + damping * diagonal.numel()
    return trace(a) * trace(g)


def trace_change(new: float, old: float) -> float:
    """Δ_k = | |tr_k| - |tr_{k-1}| | / |tr_{k-1}|."""
    return abs(abs(new) - abs(old)) / abs(old)


def decide(delta: float, thresholds: tuple[float, float]) -> Decision:
    """The branch of the trace rule that Δ falls in."""
    w1, w2 = thresholds
    if delta > w1:
        return Decision.UPDATE
    if delta >= w2:
        return Decision.REUSE
    return Decision.FREEZE
