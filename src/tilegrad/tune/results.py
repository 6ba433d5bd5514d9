"""What a tuning run hands back: per task the untuned and the best latency, and the run's history."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

from .task import Task
from .task_scheduler import TaskScheduler

if TYPE_CHECKING:
    from .graph_choice import GraphDecision


@dataclasses.dataclass
class TaskResult:
    task: Task
    default_s: float
    best_s: float
    trials: int
    note: str = ""
    """How the task was searched, where the policy says (an AutoTVM task without a template, say)."""

    @property
    def speedup(self) -> float:
        return self.default_s / self.best_s if self.best_s > 0 else math.nan


@dataclasses.dataclass
class TuneResult:
    """Per task: untuned and best latency and how many candidates were measured; the database path."""

    tasks: list[TaskResult]
    db: Path
    trials: int
    seconds: float
    rechecks: int = 0
    """Re-timings of challengers and incumbents during the search (`tuner._challenge`), beside the `trials`."""
    history: list[tuple[float, int, float]] = dataclasses.field(default_factory=list)
    """After each round: seconds since the start, candidates measured, estimated end-to-end latency."""
    incumbents: list[tuple[float, int, str, str]] = dataclasses.field(default_factory=list)
    """Whenever a task's best candidate changes (from the start on): seconds since the start, candidates measured,
    the task's key and the new best's trace as JSON. Lets a benchmark re-time what the search believed best."""
    graph: GraphDecision | None = None
    """Whole-graph timings of the default graph and the records' pick, when they were confirmed (`graph_choice`)."""
    distribution: dict[str, float] | None = None
    """Tuned for a distribution of dynamic dimensions (`distribution.py`): per dynamic kernel's key, the mean
    latency over the sample points of the schedule recorded for it."""
    points: int = 0
    """How many sample points of the dynamic dimensions the kernels were tuned at (0: fixed shapes)."""

    def estimated_latency(self, tuned: bool = True) -> float:
        """Sum of weight x latency over the kernels of the graph `compile(db=)` builds: untuned, the default
        graph's defaults; tuned, as the whole-graph confirmation chose (`graph`), else each convolution in its
        fastest algorithm (`TaskScheduler.estimated_latency`)."""
        from .graph_choice import UNTUNED

        chosen = self.graph.chosen if self.graph is not None else None
        if not tuned or chosen == UNTUNED:
            return sum(r.task.weight * r.default_s for r in self.tasks if not r.task.algorithm)
        if chosen == "default":
            return sum(r.task.weight * r.best_s for r in self.tasks if not r.task.algorithm)
        return TaskScheduler.for_tasks([r.task for r in self.tasks],
                                       initial_latencies=[r.best_s for r in self.tasks]).estimated_latency()

    def table(self) -> str:
        lines = [f"{'task':<44} {'weight':>6} {'trials':>6} {'default ms':>11} {'tuned ms':>9} {'speedup':>8}"]
        for r in self.tasks:
            name = r.task.name if not r.task.algorithm else f"({r.task.algorithm}) {r.task.name}"
            lines.append(f"{name[:44]:<44} {r.task.weight:>6} {r.trials:>6} {r.default_s * 1e3:>11.3f} "
                         f"{r.best_s * 1e3:>9.3f} {r.speedup:>7.2f}x")
            if r.note:
                lines.append(f"    {r.note}")
        before, after = self.estimated_latency(False), self.estimated_latency(True)
        lines.append(f"estimated end-to-end (sum of weight x latency, default algorithms): {before * 1e3:.2f} ms -> "
                     f"{after * 1e3:.2f} ms ({before / after:.2f}x), {self.trials} trials and {self.rechecks} "
                     f"re-timings of new bests in {self.seconds:.0f} s")
        if self.graph is not None:
            lines.append(self.graph.summary())
        return "\n".join(lines)
