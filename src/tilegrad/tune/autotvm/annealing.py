"""AutoTVM's explorer: parallel simulated annealing over config indices, guided by predicted scores.

Several chains walk the space at once. Each step moves every chain to a neighbour (one knob changed) and accepts
the move with probability min(1, exp((new - old) / T)), scores being the model's (higher is better, divided by
the spread of the starting scores so that the temperature means the same for any model's scale); T falls
linearly over the steps. Every point visited that is not excluded (measured already) enters a bounded heap of the
best scores, and the walk stops early once the heap has not changed for `early_stop` steps.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
from collections.abc import Callable, Iterable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class AnnealingOptions:
    """TVM's defaults scaled down: its 128 chains x 500 steps score features that cost little there."""

    chains: int = 8
    steps: int = 24
    temperature: tuple[float, float] = (1.0, 0.0)
    early_stop: int = 8


def anneal(size: int, neighbour: Callable[[int, random.Random], int],
           score: Callable[[Sequence[int]], np.ndarray], keep: int, exclude: set[int], rng: random.Random,
           options: AnnealingOptions = AnnealingOptions(), starts: Iterable[int] = ()) -> list[int]:
    """The `keep` best-scored indices in 0..size-1 the chains visit, none in `exclude`, best first. Chains start
    at `starts` (say, the best measured configs), the rest at random indices."""
    points = list(dict.fromkeys(starts))[:options.chains]
    points += [rng.randrange(size) for _ in range(options.chains - len(points))]
    scores = np.asarray(score(points), np.float64)
    scale = float(np.std(scores)) or 1.0
    heap: list[tuple[float, int]] = []
    in_heap: set[int] = set()

    def offer(index: int, s: float) -> bool:
        if index in exclude or index in in_heap:
            return False
        if len(heap) < keep:
            heapq.heappush(heap, (s, index))
        elif s > heap[0][0]:
            in_heap.discard(heapq.heapreplace(heap, (s, index))[1])
        else:
            return False
        in_heap.add(index)
        return True

    for p, s in zip(points, scores):
        offer(p, float(s))
    t0, t1 = options.temperature
    unchanged = 0
    for step in range(options.steps):
        t = t0 - (t0 - t1) * step / max(options.steps, 1)
        moved = [neighbour(p, rng) for p in points]
        moved_scores = np.asarray(score(moved), np.float64)
        changed = False
        for k, (p, s) in enumerate(zip(moved, moved_scores)):
            changed |= offer(p, float(s))
            delta = (s - scores[k]) / scale
            if delta >= 0 or (t > 0 and rng.random() < math.exp(delta / t)):
                points[k], scores[k] = p, s
        unchanged = 0 if changed else unchanged + 1
        if unchanged >= options.early_stop:
            break
    return [i for _, i in sorted(heap, reverse=True)]
