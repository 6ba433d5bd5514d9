"""The tuning loop's side effects, as callbacks: keeping records, retraining the cost model, showing progress.

The loop (`tuner.py`) measures and decides; everything it tells the outside world goes through the hooks of its
callbacks (`tuning_run.Callback`), in order. `default_callbacks()` are what `tune_tasks` runs unless given others:
a benchmark or a remote service adds its own (say, streaming each record elsewhere) beside them.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from ..runtime.timing import MAX_SPREAD
from .cost_model.model import labelling_peaks, speed_of
from .tuning_run import Callback

if TYPE_CHECKING:
    from .measure import MeasureResult
    from .records import Record
    from .search.space import Candidate
    from .state import TaskState
    from .tuning_run import TuningRun


class CommitRecords(Callback):
    """Appends every record to the run's database."""

    def recorded(self, run: TuningRun, rec: Record) -> None:
        run.database.add(rec)


class UpdateCostModel(Callback):
    """Hands the cost model the rows measured since its last update: once before the search (the records of
    earlier runs and the defaults), then after every round."""

    def __init__(self):
        self._peaks = None

    def started(self, run: TuningRun) -> None:
        self._peaks = labelling_peaks(run.model)
        retrain(run.model, run.states, self._peaks)

    def measured(self, run: TuningRun, st: TaskState, batch: list[Candidate], results: list[MeasureResult]) -> None:
        retrain(run.model, run.states, self._peaks)


class ShowProgress(Callback):
    """A progress bar: candidates measured against the trial budget, the latest task's best and the estimate."""

    def __init__(self):
        self._bar = None

    def started(self, run: TuningRun) -> None:
        from tqdm import tqdm

        budget = run.options.budget
        self._bar = tqdm(total=run.options.trials, unit="trial", dynamic_ncols=True,
                         desc="tuning" if budget is None else f"tuning ({budget:.0f} s budget)")

    def measured(self, run: TuningRun, st: TaskState, batch: list[Candidate], results: list[MeasureResult]) -> None:
        self._bar.update(len(batch))
        self._bar.set_postfix_str(f"{st.task.name[:28]} best {st.best_s * 1e3:.3f} ms, "
                                  f"model {run.estimate() * 1e3:.2f} ms")

    def confirming(self, run: TuningRun) -> None:
        self._bar.set_postfix_str(f"confirming the best {run.options.confirm} candidates of each task")

    def finished(self, run: TuningRun) -> None:
        if self._bar is not None:
            self._bar.close()


class TimingNoiseWarning(UserWarning):
    """Many of a tuning run's timings were noisy: the records may rank candidates by the machine's load."""


class WarnNoisyTimings(Callback):
    """Warns once when, over at least `after` timings, more than `fraction` were noisy (`MeasureResult.noisy`: their
    repeats far apart even when doubled): another process is busy, and the run had better be stopped."""

    def __init__(self, fraction: float = 0.25, after: int = 32):
        self.fraction, self.after = fraction, after
        self.timed = self.noisy = 0
        self.warned = False

    def measured(self, run: TuningRun, st: TaskState, batch: list[Candidate], results: list[MeasureResult]) -> None:
        ok = [r for r in results if r.valid and not r.abandoned]
        self.timed += len(ok)
        self.noisy += sum(r.noisy for r in ok)
        if not self.warned and self.timed >= self.after and self.noisy > self.fraction * self.timed:
            self.warned = True
            warnings.warn(TimingNoiseWarning(
                f"{self.noisy} of {self.timed} timings were noisy (repeats more than {MAX_SPREAD:.0%} apart): "
                "another process is using the cores, and the records may rank candidates by its load. Tune on "
                "an idle machine; compile(db=) keeps the untuned model if the tuned one runs slower"), stacklevel=2)


def default_callbacks(progress: bool = True) -> list[Callback]:
    """Records to the database, the cost model retrained after each round, a warning when the timings are noisy,
    and (with `progress`) a progress bar."""
    return [CommitRecords(), UpdateCostModel(), WarnNoisyTimings(), *([ShowProgress()] if progress else [])]


def retrain(model, states: list[TaskState], peaks=None) -> None:
    """Hand the cost model the rows measured since its last update, labelled by `speed_of` with `peaks`."""
    xs, tps, groups = [], [], []
    for st in states:
        if st.trained == len(st.x):
            continue
        xs.append(np.stack(st.x[st.trained:]))
        tps.append(speed_of(st.task, np.array(st.latency[st.trained:]), peaks))
        groups += [st.task.key] * (len(st.x) - st.trained)
        st.trained = len(st.x)
    if xs and len({x.shape[1] for x in xs}) == 1:
        model.update(np.concatenate(xs), np.concatenate(tps), groups)
