"""A kernel over dynamic dimensions tuned as one task for the whole range of their values (issue 44, DESIGN §3.3).

A dynamic kernel runs at every value within its bounds, so the search should optimise its schedule for the values
it will see, not for one. Felix's features are formulas of the schedule's parameters; lowered on the *symbolic*
computation (its loop extents and guards expressions of the dimensions), a sketch's features become formulas of
the dimensions too. `RangeSpace` binds them at each sample point (`FeatureRows.at`) and the gradient descent
minimises the weighted sum of the cost model's predictions over the points, so one descent finds the schedule
best on the whole range (`TaskSpace.smooth_points`, `gradient._objective_gradients`); the other sketch policies
rank by the same sum (`TaskSpace.scores`).

The points are weighted by their share of the kernel's work: a kernel's mean latency over the points, what the
task's measurements are (`PointsMeasurer`: each candidate timed at every point, its result their mean), is
dominated by the largest values, and the model's score is a speed, so each point's speed counts in proportion to
the time spent there. The sketches are the task's at the dimensions' representative values (`te/dims.py`), whose
default point is the default rules' trace, what `compile(dynamic=)` builds without records; every trace replays on
the symbolic kernel, as `compile(dynamic=, db=)` replays the best one recorded under the kernel's key. The cost
model trains on the heaviest point's features with the mean latency, which that point dominates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from ..extras import require
from .features.extract import extract
from .features.formulas import FeatureFormulas
from .measure.result import MeasureInput, MeasureResult
from .search.space import Candidate, TaskSpace
from .task import Task


@dataclasses.dataclass
class RangeTask(Task):
    """A dynamic kernel (its symbolic `nodes` and key, the records' key) with its tasks at the sample `points`
    (variable name -> value) and at the representative values, whose program the sketches are made on."""

    points: tuple[dict[str, int], ...] = ()
    at_points: tuple[Task, ...] = ()
    at_representative: Task | None = None

    @staticmethod
    def of(task: Task, points: Sequence[dict[str, int]], at_points: Sequence[Task],
           at_representative: Task) -> RangeTask:
        mean_flops = round(float(np.mean([t.flops for t in at_points])))
        return RangeTask(task.key, task.name, task.nodes, mean_flops, task.algorithm, task.convolutions, task.target,
                         tuple(points), tuple(at_points), at_representative)

    def compute(self):
        return self.at_representative.compute()

    def symbolic_compute(self):
        return Task.compute(self)

    @property
    def weights(self) -> np.ndarray:
        """Each point's share of the work over the points."""
        flops = np.array([max(t.flops, 1) for t in self.at_points], np.float64)
        return flops / flops.sum()

    @property
    def heaviest(self) -> int:
        return int(np.argmax(self.weights))

    @property
    def min_bytes(self) -> int:
        return round(float(np.mean([t.min_bytes for t in self.at_points])))


class RangeSpace(TaskSpace):
    """The sketches of a `RangeTask`, with features per point bound from one symbolic derivation."""

    def __init__(self, task: RangeTask):
        super().__init__(task)
        self._points: dict[tuple, list[FeatureFormulas] | None] = {}
        self._smooth_points: dict[tuple, list | None] = {}

    def point_formulas(self, key: tuple) -> list[FeatureFormulas] | None:
        """The structure's feature formulas at each point: lowered once on the symbolic computation, its features
        extracted once, then bound at each point."""
        if key not in self._points:
            def at_points(kernel, numeric):
                rows = extract(kernel, self.gpu)
                return [FeatureFormulas(kernel, numeric, gpu=self.gpu, rows=rows.at(p)) for p in self.task.points]

            self._points[key] = self._derived(key, self.task.symbolic_compute(), at_points)
        return self._points[key]

    def _formulas_for(self, key: tuple) -> FeatureFormulas | None:
        return self._at_point(key, self.task.heaviest)

    def smooth_points(self, key: tuple, tau: float) -> list[tuple[float, object]] | None:
        if (key, tau) not in self._smooth_points:
            require("torch", "tune", "Felix's gradient search (the default policy)")
            from .felix.smooth import SmoothFormulas

            formulas = self.point_formulas(key)
            self._smooth_points[key, tau] = None if formulas is None else [
                (float(w), SmoothFormulas(f, tau)) for w, f in zip(self.task.weights, formulas)]
        return self._smooth_points[key, tau]

    def scores(self, model, candidates: list[Candidate]) -> np.ndarray:
        """The work-weighted sum of the model's scores at the points."""
        total = np.zeros(len(candidates))
        for k, weight in enumerate(self.task.weights):
            total += weight * model.predict(self._features(candidates, lambda key, k=k: self._at_point(key, k)))
        return total

    def _at_point(self, key: tuple, k: int) -> FeatureFormulas | None:
        formulas = self.point_formulas(key)
        return None if formulas is None else formulas[k]


class PointsMeasurer:
    """A measurer (`measure.Measurer`'s interface) that times a `RangeTask`'s candidate at each of its points and
    gives their mean latency as its result; any other task is measured as it is."""

    def __init__(self, inner):
        self.inner = inner

    @property
    def fingerprint(self) -> str | None:
        return self.inner.fingerprint

    def measure(self, inputs: Sequence[MeasureInput],
                on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        tell = on_result or (lambda i, r: None)
        expanded, owner = [], []
        for i, inp in enumerate(inputs):
            for t in _point_tasks(inp.task):
                expanded.append(dataclasses.replace(inp, task=t))
                owner.append(i)
        parts: list[list[MeasureResult]] = [[] for _ in inputs]
        results: list[MeasureResult | None] = [None] * len(inputs)

        def got(k: int, r: MeasureResult) -> None:
            i = owner[k]
            parts[i].append(r)
            if len(parts[i]) == len(_point_tasks(inputs[i].task)):
                results[i] = mean_result(parts[i])
                tell(i, results[i])

        self.inner.measure(expanded, got)
        return results

    def measure_one(self, task: Task, trace) -> MeasureResult:
        return self.measure([MeasureInput(task, trace)])[0]

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """Each point's limit from the default's mean latency: no point's takes longer than the points' number
        times their mean."""
        for t in _point_tasks(task):
            self.inner.limit_by_default(t, default_latency * len(_point_tasks(task)))

    def close(self) -> None:
        self.inner.close()


def _point_tasks(task: Task) -> Sequence[Task]:
    return task.at_points if isinstance(task, RangeTask) else (task,)


def mean_result(parts: Sequence[MeasureResult]) -> MeasureResult:
    """One result for a candidate timed at several points: the first failure, or the mean of their latencies."""
    build_s, run_s = sum(r.build_s for r in parts), sum(r.run_s for r in parts)
    failed = [r for r in parts if not r.valid]
    if failed:
        return dataclasses.replace(failed[0], build_s=build_s, run_s=run_s)
    return MeasureResult((float(np.mean([r.latency for r in parts])),), build_s=build_s, run_s=run_s,
                         checked=any(r.checked for r in parts), abandoned=any(r.abandoned for r in parts),
                         noisy=any(r.noisy for r in parts))
