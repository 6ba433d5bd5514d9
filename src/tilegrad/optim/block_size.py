"""Choosing THOR's block size b on the machine at hand: where the information kept and the inversion speed cross.

Two curves over candidate sizes: the normalised loss score (the share of the model's factors that lose under 1%
of their spectral norm when split at b; it rises to 1 at the largest dimension) and the normalised speed p₁/pₙ
(the time to invert every factor of the model split at the smallest candidate, over that time at b; it falls).
The seed picks the candidate nearest their crossing (128 for ResNet-50, crossing at 106).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import TextIO

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import OptimizerError
from .blocks import damped_inverse, information_loss
from .factors import FactorCollector, find_layers

LOSS_LIMIT = 0.01   # a factor "keeps its information" when L < 1%


@dataclasses.dataclass(frozen=True)
class BlockSizeChoice:
    """Both curves over the candidates, where they cross, and the candidate chosen."""
    candidates: tuple[int, ...]
    loss_score: tuple[float, ...]   # share of factors with L < 1% at each size
    speed: tuple[float, ...]        # p₁ / pₙ: inversion time at the smallest candidate over the time at each size
    seconds: tuple[float, ...]      # pₙ, the measured time to invert all factors at each size
    crossing: float                 # the size where the curves cross (interpolated linearly)
    block_size: int

    def table(self) -> str:
        rows = [f"{'b':>6} {'loss score':>10} {'p1/pn':>8} {'invert ms':>10}"]
        rows += [f"{b:>6} {s:>10.3f} {v:>8.3f} {1e3 * t:>10.3f}"
                 for b, s, v, t in zip(self.candidates, self.loss_score, self.speed, self.seconds)]
        rows.append(f"curves cross at b = {self.crossing:.1f}; block size {self.block_size}")
        return "\n".join(rows)


def candidate_sizes(largest: int) -> list[int]:
    """1, then 16, 32, 64, ... below the largest factor dimension, then that dimension (the seed's rule)."""
    sizes, b = [1], 16
    while b < largest:
        sizes.append(b)
        b *= 2
    return sizes + [largest] if largest > 1 else sizes


def model_factors(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Every dense factor (A and G) of `model`'s preconditioned layers on one batch; without `targets` the labels
    are sampled from the model's own predictions, which makes G the true Fisher's factor."""
    layers = find_layers(model)
    collector = FactorCollector(layers)
    collector.collecting = set(layers)
    try:
        logits = model(inputs)
        if targets is None:
            targets = torch.multinomial(F.softmax(logits.detach(), dim=-1), 1).squeeze(-1)
        F.cross_entropy(logits, targets).backward()
        pairs = [collector.take(layer) for layer in layers]
    finally:
        collector.remove()
        model.zero_grad(set_to_none=True)
    return [m for pair in pairs if pair for m in pair if m.dim() == 2]


def _inversion_seconds(factors: list[torch.Tensor], size: int, damping: float, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for m in factors:
            damped_inverse(m, damping, size)
        best = min(best, time.perf_counter() - start)
    return best


def _crossing(sizes: list[int], rising: list[float], falling: list[float]) -> float:
    """The first size where rising - falling turns non-negative, interpolated between the candidates around it."""
    gap = [r - f for r, f in zip(rising, falling)]
    if gap[0] >= 0:
        return float(sizes[0])
    for i in range(1, len(sizes)):
        if gap[i] >= 0:
            t = -gap[i - 1] / (gap[i] - gap[i - 1])
            return sizes[i - 1] + t * (sizes[i] - sizes[i - 1])
    return float(sizes[-1])


def choose_thor_block_size(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor | None = None,
                           damping: float = 0.03, candidates: list[int] | None = None, repeats: int = 5,
                           out: TextIO | None = sys.stdout) -> BlockSizeChoice:
    """Measure both curves for `model` on the batch `inputs` (labels `targets`, or sampled), write them to `out`
    (None: silent) and return them with the chosen block size."""
    factors = model_factors(model, inputs, targets)
    if not factors:
        raise OptimizerError(f"{type(model).__name__} has no Linear or Conv2d layer for THOR to precondition")
    sizes = sorted(set(candidates or candidate_sizes(max(m.shape[0] for m in factors))))
    score = [sum(information_loss(m, b) < LOSS_LIMIT for m in factors) / len(factors) for b in sizes]
    seconds = [_inversion_seconds(factors, b, damping, repeats) for b in sizes]
    speed = [seconds[0] / t for t in seconds]
    crossing = _crossing(sizes, score, speed)
    chosen = min(sizes, key=lambda b: abs(b - crossing))
    choice = BlockSizeChoice(tuple(sizes), tuple(score), tuple(speed), tuple(seconds), crossing, chosen)
    if out is not None:
        out.write(choice.table() + "\n")
    return choice
