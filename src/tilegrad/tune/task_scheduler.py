"""The task scheduler: which task gets the next tuning round (Ansor §6).

A network's latency is estimated as f = Σ_i w_i · g_i, where g_i is the best latency found so far for task i and
w_i its weight (how many times the kernel runs in the network). One round is one batch of candidates proposed and
measured for one task. After a warm-up that gives every task `warmup_rounds` rounds in turn (the largest w_i · g_i
first, tasks without a latency before all), the `"gradient"` strategy picks the task whose next round is expected to lower f the most, the one with the most negative

    ∂f/∂t_i ≈ ∂f/∂g_i · ( α · (g_i(t_i) − g_i(t_i − Δt)) / Δt
                          + (1 − α) · min( −g_i(t_i) / t_i,  β · C_i / max_k V_k − g_i(t_i) ) )

with ∂f/∂g_i = w_i, t_i the rounds task i has had and Δt = `backward_window`. The first term is the recent
improvement rate (0 until the task has Δt rounds of history); the second is an optimistic guess of the next one:
either the latency keeps falling like 1/t, or the task reaches β times the FLOP time of the best similar task,
C_i the task's FLOPs and V_k = C_k / g_k the best throughput reached by a task k of the same kind (all tasks
sharing `kinds[i]`, task i included; without kinds or flops only −g_i/t_i). With probability `eps` a random task
is chosen instead, and when all gradients are equal the choice is random too. `"round-robin"` gives the next round
to the task with the fewest rounds so far. Tasks flagged by `mark_exhausted` (no new candidates left) are skipped
by both strategies.

Some places of a network have alternatives: a convolution runs direct, as im2col or as Winograd kernels, an
attention in either softmax form, and the tuned graph keeps the fastest (tune/algorithms.py). `slots` names, per task, its place and the alternative it
belongs to; a place counts in f as its fastest alternative, the sum of w_i · g_i over that alternative's tasks.
A round of a task in another alternative lowers f only if it is expected to make that alternative the fastest,
so ∂f/∂t_i is then the expected drop below the place's current latency (0 when none is expected), and the
warm-up skips such tasks: rounds go to an alternative only while it is close enough to win, and a kernel far
slower than the one it stands in for draws none.

A task without a latency yet (no initial latency given and nothing measured) makes f infinite; the gradient
strategy tunes such tasks first. A task that can never produce a working program should be marked exhausted.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .task import Task

STRATEGIES = ("gradient", "round-robin")


class TaskScheduler:
    """Allocates tuning rounds to tasks; call `next_task`, tune that task for a round, then `update`."""

    def __init__(
        self,
        weights: Sequence[float],
        *,
        strategy: str = "gradient",
        warmup_rounds: int = 1,
        alpha: float = 0.2,
        backward_window: int = 3,
        beta: float = 2.0,
        eps: float = 0.05,
        flops: Sequence[float] | None = None,
        kinds: Sequence[str] | None = None,
        initial_latencies: Sequence[float] | None = None,
        slots: Sequence[tuple[Hashable, Hashable] | None] | None = None,
        rng: np.random.Generator | None = None,
    ):
        n = len(weights)
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown task scheduling strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        for name, seq in (("flops", flops), ("kinds", kinds), ("initial_latencies", initial_latencies),
                          ("slots", slots)):
            if seq is not None and len(seq) != n:
                raise ValueError(f"{len(seq)} {name} for {n} task weights; give one per task")
        self.weights = [float(w) for w in weights]
        self.strategy = strategy
        self.warmup_rounds = warmup_rounds
        self.alpha = alpha
        self.backward_window = backward_window
        self.beta = beta
        self.eps = eps
        self.flops = None if flops is None else [float(c) for c in flops]
        self.kinds = None if kinds is None else list(kinds)
        self.slots = [None] * n if slots is None else list(slots)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        start = [math.inf] * n if initial_latencies is None else [_latency(g) for g in initial_latencies]
        self.best = list(start)
        self.rounds = [0] * n
        self.exhausted: set[int] = set()
        self._curves = [[g] for g in start]  # g_i after 0, 1, 2, ... rounds of task i
        self.total_rounds = 0
        self.history: list[tuple[int, int, float]] = []  # (total rounds, task tuned, estimated latency)

    @classmethod
    def for_tasks(cls, tasks: Sequence[Task], **options) -> TaskScheduler:
        """A scheduler over tuning tasks: their weights and FLOPs, similar tasks being those of the same op, and
        the alternatives for each convolution and attention (`alternative_slots`). A kernel of another variant's
        graph that runs no such place (a layout transform, say) weighs 0: f is the latency of the graph `compile`
        builds."""
        slots = alternative_slots(tasks)
        return cls([0.0 if t.algorithm and slot is None else t.weight for t, slot in zip(tasks, slots, strict=True)],
                   flops=[t.flops for t in tasks], kinds=[t.node.op for t in tasks], slots=slots, **options)

    def estimated_latency(self) -> float:
        """f: Σ w_i · g_i over tasks of nonzero weight, each place of several alternatives counted as its fastest
        (inf while a task that counts has no latency yet)."""
        return slotted_latency(self.weights, self.slots, self.best)

    def next_task(self) -> int | None:
        """The task to tune next, or None when every task is exhausted."""
        alive = [i for i in range(len(self.weights)) if i not in self.exhausted]
        if not alive:
            return None
        warmup = max(self.warmup_rounds, 1 if self.strategy == "gradient" else 0)  # −g/t needs t >= 1
        cold = [i for i in alive if self.rounds[i] < warmup and self.weights[i] != 0 and self._leads(i)]
        if cold:  # the largest share of f first: a budget that ends within the warm-up spent it where it pays
            return min(cold, key=lambda i: (self.rounds[i], -self.weights[i] * self.best[i]))
        if self.strategy == "round-robin":
            return min(alive, key=lambda i: self.rounds[i])
        if self._rng.random() < self.eps:
            return int(self._rng.choice(alive))
        grads = [self.gradient(i) for i in alive]
        if min(grads) == max(grads):
            return int(self._rng.choice(alive))
        return alive[int(np.argmin(grads))]

    def update(self, task: int, best_latency: float, rounds_used: int = 1) -> None:
        """Record that `task` had `rounds_used` more rounds, after which its best latency is `best_latency`
        (seconds; inf or nan if nothing measured has worked yet)."""
        if rounds_used < 1:
            raise ValueError(f"update: rounds_used={rounds_used}; a task is updated after at least one round")
        g = min(self.best[task], _latency(best_latency))
        self.best[task] = g
        self.rounds[task] += rounds_used
        self._curves[task].extend([g] * rounds_used)
        self.total_rounds += rounds_used
        self.history.append((self.total_rounds, task, self.estimated_latency()))

    def mark_exhausted(self, task: int) -> None:
        """Never schedule `task` again (e.g. its search space has no unmeasured candidates left)."""
        self.exhausted.add(task)

    def gradient(self, task: int) -> float:
        """∂f/∂t for `task` (module docstring): how fast one more round of it is expected to lower f."""
        g, t = self.best[task], max(self.rounds[task], 1)
        if math.isinf(g):
            return -math.inf if self._leads(task) else 0.0
        curve, window = self._curves[task], self.backward_window
        backward = 0.0
        if len(curve) > window and math.isfinite(curve[-1 - window]):
            backward = (curve[-1] - curve[-1 - window]) / window
        forward = min(-g / t, self.beta * self._similar_time(task) - g)
        change = self.weights[task] * (self.alpha * backward + (1 - self.alpha) * forward)
        if self.slots[task] is None:
            return change
        totals = self._alternatives(self.slots[task][0])
        mine = self.slots[task][1]
        others = min((s for alt, s in totals.items() if alt != mine), default=math.inf)
        return min(totals[mine] + change, others) - min(totals.values())

    def _alternatives(self, place: Hashable) -> dict[Hashable, float]:
        """The summed w_i · g_i of each alternative of a place."""
        totals: dict[Hashable, float] = {}
        for i, slot in enumerate(self.slots):
            if slot is not None and slot[0] == place:
                totals[slot[1]] = totals.get(slot[1], 0.0) + self.weights[i] * self.best[i]
        return totals

    def _leads(self, task: int) -> bool:
        """Whether the task is in the fastest alternative of its place (or has no alternatives)."""
        if self.slots[task] is None:
            return True
        totals = self._alternatives(self.slots[task][0])
        return totals[self.slots[task][1]] == min(totals.values())

    def _similar_time(self, task: int) -> float:
        """C_i / max_k V_k over the tasks of the same kind with a latency; inf without FLOPs."""
        if self.flops is None:
            return math.inf
        similar = [task] if self.kinds is None else [k for k, kind in enumerate(self.kinds) if kind == self.kinds[task]]
        speeds = [self.flops[k] / self.best[k] for k in similar if math.isfinite(self.best[k]) and self.best[k] > 0]
        return self.flops[task] / max(speeds) if speeds and max(speeds) > 0 else math.inf


def _latency(g: float) -> float:
    """A latency as a float; nan (nothing measured) becomes inf."""
    g = float(g)
    return math.inf if math.isnan(g) else g


def slotted_latency(weights: Sequence[float], slots: Sequence[tuple[Hashable, Hashable] | None],
                    latencies: Sequence[float]) -> float:
    """Σ w_i · g_i over tasks of nonzero weight, each place of several alternatives counted as its fastest."""
    places: dict[Hashable, dict[Hashable, float]] = {}
    total = 0.0
    for w, slot, g in zip(weights, slots, latencies, strict=True):
        if w == 0:
            continue
        if slot is None:
            total += w * g
        else:
            alternatives = places.setdefault(slot[0], {})
            alternatives[slot[1]] = alternatives.get(slot[1], 0.0) + w * g
    return total + sum(min(alternatives.values()) for alternatives in places.values())


def alternative_slots(tasks: Sequence[Task]) -> list[tuple[Hashable, Hashable] | None]:
    """Per task, (the places it runs, its algorithm) where other variants' kernels run the same places
    (convolutions, attention nodes), else None. Kernels whose convolutions are not exactly those of another algorithm's kernels (a
    shared workload that groups differently) stay outside: they count, or not, as before."""
    algorithms: dict[frozenset[str], set[str | None]] = {}
    for t in tasks:
        if t.convolutions:
            algorithms.setdefault(t.convolutions, set()).add(t.algorithm)
    return [(t.convolutions, t.algorithm) if t.convolutions and len(algorithms[t.convolutions]) > 1 else None
            for t in tasks]
