"""What the tuner keeps per task: its space and search, the candidates measured with their features and
latencies, and the re-timings of the candidates that contended for its best."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import numpy as np

from .search.policy import TaskSearch
from .search.space import Candidate, TaskSpace
from .task import Task


class TaskState:
    """One task's standing in a tuning run; `search` binds the run's policy to the task's space (the task's
    sketches, unless the policy brings its own: `search.policy.task_space`)."""

    def __init__(self, task: Task, search: Callable[[TaskSpace], TaskSearch], space: TaskSpace | None = None):
        self.task = task
        self.space = space if space is not None else TaskSpace(task)
        self.search = search(self.space)
        self.measured: dict[Candidate, float] = {}
        self.retimed: dict[Candidate, list[float]] = {}
        self.x: list[np.ndarray] = []
        self.latency: list[float] = []
        self.trained = 0  # rows of x the cost model has seen
        self.reported: Candidate | None = None  # the incumbent last reported in `TuneResult.incumbents`
        self.default_s = math.inf
        self.default_timed = False  # whether the database holds a timing of the default schedule
        self.trials = 0
        self.prior: list[Candidate] = []  # the fastest first on a machine of this one's class, never timed here
        self.timing_s = 0.0  # the mean wall time of timing one working candidate (warm-up and calibration included)
        self._timed = 0

    @property
    def best_s(self) -> float:
        """The incumbent's median re-timing, or its measurement while nothing has been re-timed."""
        return self._standing()[0]

    def incumbent(self) -> Candidate | None:
        """The candidate a challenger must beat; None while nothing works."""
        return self._standing()[1]

    def _standing(self) -> tuple[float, Candidate | None]:
        """(latency, candidate) of the re-timed candidate with the lowest median if any was re-timed (and did not
        fail), else of the fastest measured one. The lower median: interference only ever slows a timing, and
        with two timings a mean lets one disturbed re-timing raise a task's best severalfold."""
        scored = [(statistics.median_low(v), c) for c, v in self.retimed.items()]
        scored = [sc for sc in scored if math.isfinite(sc[0])] or [
            (s, c) for c, s in self.measured.items() if math.isfinite(s)]
        return min(scored, key=lambda sc: sc[0]) if scored else (math.inf, None)

    def best(self, k: int) -> list[Candidate]:
        """The `k` fastest candidates measured, best first; then, to make up `k`, the fastest on another machine of
        this one's class (`prior`) that are not measured here yet."""
        ok = [(s, c) for c, s in self.measured.items() if math.isfinite(s)]
        fastest = [c for _, c in sorted(ok)[:k]]
        return fastest + [c for c in self.prior if c not in self.measured][:k - len(fastest)]

    def learn(self, cands: list[Candidate], latencies: list[float]) -> None:
        """Rows for the cost model from another machine of this one's class: trained on, never counted as
        measured here; the fastest working ones become `prior`, the search's first seeds."""
        if not cands:
            return
        for c, f, s in zip(cands, self.space.features(cands), latencies):
            self.x.append(f)
            self.latency.append(s)
        ranked = sorted((s, i) for i, s in enumerate(latencies) if math.isfinite(s))
        self.prior = list(dict.fromkeys(cands[i] for _, i in ranked))

    def note_timing(self, wall_s: float) -> None:
        """A working candidate took `wall_s` to time: what each re-timing of the confirmation will cost."""
        self._timed += 1
        self.timing_s += (wall_s - self.timing_s) / self._timed

    def observe(self, cands: list[Candidate], latencies: list[float]) -> None:
        if not cands:
            return
        feats = self.space.features(cands)
        for c, f, s in zip(cands, feats, latencies):
            self.measured[c] = s
            self.x.append(f)
            self.latency.append(s)
