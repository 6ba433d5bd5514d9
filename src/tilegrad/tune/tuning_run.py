"""A tuning run as its callbacks see it: the options it runs under, its state round by round, and the hooks it
calls (`Callback`).

The run and the hooks are defined in terms of each other (every hook is handed the run, and the run hands each
record to every hook), so they share this module; the loop that drives a run (`tuner.py`) and the callbacks it
runs by default (`callbacks.py`) both build on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .confirm import PASSES
from .results import TaskResult
from .task_scheduler import TaskScheduler

if TYPE_CHECKING:
    from .graph_choice import GraphDecision
    from .cost_model import CostModel
    from .measure import MeasureResult
    from .records import Database, Record
    from .search import SearchPolicy
    from .search.space import Candidate
    from .state import TaskState


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How long and how carefully to tune; the search's own settings belong to its policy.

    The run ends when `trials` new candidates are measured or `budget` seconds pass (give at least one).
    `measure_per_round` overrides the policy's batch size. With `from_defaults` false the default schedules
    neither seed the search nor count in the history (a task's best is what the search measured), so that two
    policies can be compared from nothing. A round's fastest candidate that beats its task's best is timed
    `recheck` more times beside that best before it replaces it (0 trusts single timings). After the last round,
    each task's `confirm` fastest candidates are timed again beside its default and the winner becomes the record
    `compile` uses (0 skips it). `seed` seeds each task's search (the i-th task's with seed + i)."""

    trials: int | None = None
    budget: float | None = None
    measure_per_round: int | None = None
    scheduler: str = "gradient"
    seed: int = 0
    from_defaults: bool = True
    confirm: int = 3
    recheck: int = 3


@dataclasses.dataclass
class TuningRun:
    """A tuning run in progress, as its callbacks see it."""

    options: TuneOptions
    policy: SearchPolicy
    model: CostModel
    database: Database
    states: list[TaskState]
    callbacks: Sequence[Callback]
    clock: Callable[[], float]
    start: float
    outside: Callable[[TuningRun], float] = lambda run: 0.0
    """Seconds of the budget spent outside the search loop: before it (the import, the variant graphs) and, as
    foretold from the run so far, after it (the whole-graph confirmation)."""
    done: int = 0  # candidates measured in this run
    rechecks: int = 0
    history: list[tuple[float, int, float]] = dataclasses.field(default_factory=list)
    incumbents: list[tuple[float, int, str, str]] = dataclasses.field(default_factory=list)
    build_s: float = 0.0  # the mean seconds a candidate's build took (those built, not found built)
    built: int = 0
    confirmed: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    """Per task key, the (default, best) latencies of the final confirmation, once it ran."""
    search_start: float | None = None  # `elapsed()` when the first round began

    def round_s(self) -> float:
        """The mean seconds of a search round so far (0 before one ended): a round begun just before the deadline
        ends about that long after it, and a task whose candidates are timed at several points (`range_task.py`)
        has long ones."""
        if self.search_start is None or not self.history:
            return 0.0
        return (self.history[-1][0] - self.search_start) / len(self.history)

    def elapsed(self) -> float:
        return self.clock() - self.start

    def confirmation_s(self) -> float:
        """About how long the final confirmation will take (`confirm.confirm_best`): each task searched re-times
        its `confirm` fastest, its standing best and its default PASSES times, each as long as its candidates'
        timings took so far."""
        if self.options.confirm <= 0:
            return 0.0
        return sum((min(self.options.confirm, len(st.measured)) + 2) * PASSES * st.timing_s
                   for st in self.states if st.trials)

    def deadline(self) -> float | None:
        """When, on `clock`, the budget's search and final confirmation must end; None without a budget."""
        return None if self.options.budget is None else self.start + self.options.budget - self.outside(self)

    def note_build(self, build_s: float) -> None:
        if build_s > 0:
            self.built += 1
            self.build_s += (build_s - self.build_s) / self.built

    def commit(self, rec: Record) -> None:
        for cb in self.callbacks:
            cb.recorded(self, rec)

    def estimate(self) -> float:
        """Sum over the tasks of weight x best latency so far (the default where nothing beat it, if it counts;
        inf while a task has nothing that works), each convolution counted in its fastest algorithm so far, as
        `TaskScheduler.estimated_latency`."""
        tasks = [s.task for s in self.states]
        latencies = [min(s.best_s, s.default_s) if self.options.from_defaults else s.best_s for s in self.states]
        return TaskScheduler.for_tasks(tasks, initial_latencies=latencies).estimated_latency()

    def report(self, st: TaskState) -> None:
        """Note the task's best in `incumbents` when it changed."""
        c = st.incumbent()
        if c is not None and c != st.reported:
            st.reported = c
            self.incumbents.append((self.elapsed(), self.done, st.task.key, st.space.trace(c).to_json()))

    def task_results(self) -> list[TaskResult]:
        """Each task's untuned and best latency: the confirmed figures where the final confirmation ran."""
        return [TaskResult(s.task, *self.confirmed.get(s.task.key, (s.default_s, min(s.best_s, s.default_s))),
                           s.trials, s.space.note) for s in self.states]


class Callback:
    """Hooks of the tuning loop; each does nothing unless a subclass overrides it."""

    def started(self, run: TuningRun) -> None:
        """Earlier records are loaded and the defaults timed: the search begins."""

    def recorded(self, run: TuningRun, rec: Record) -> None:
        """A measurement or a tally of re-timings to keep."""

    def measured(self, run: TuningRun, st: TaskState, batch: list[Candidate], results: list[MeasureResult]) -> None:
        """A round ended: `batch` of `st`'s task was measured, and its state and the scheduler updated."""

    def confirming(self, run: TuningRun) -> None:
        """The search ended; the final confirmation of each task's best begins."""

    def finished(self, run: TuningRun) -> None:
        """The run ended, normally or not."""

    def graph_confirmed(self, decision: GraphDecision) -> None:
        """After the run, `tilegrad.tune` timed whole models (untuned, tuned, the estimate's graph) and chose."""
