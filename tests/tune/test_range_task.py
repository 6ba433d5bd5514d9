"""A dynamic kernel tuned as one task over its sample points (tune/range_task.py): features derived once on the
symbolic program and bound at each point are the features of the program each point runs; the search's objective
and ranking are the work-weighted sum over the points; each candidate's measurement is its mean over the
points."""

import numpy as np
import pytest

from tilegrad.kernel import lower_kernel
from tilegrad.te.dims import evaluate
from tilegrad.tune.cost_model import make_cost_model
from tilegrad.tune.distribution import kernels_of, sample_points
from tilegrad.tune.features.extract import program_vector
from tilegrad.tune.features.formulas import FeatureFormulas
from tilegrad.tune.measure.result import MeasureInput, MeasureResult
from tilegrad.tune.range_task import PointsMeasurer, RangeSpace, RangeTask
from tilegrad.tune.search.gradient import GradientPolicy, GradientSearch

from .test_distribution import _graph, _rows_model


@pytest.fixture(scope="module")
def range_tasks():
    graph = _graph(_rows_model(), {"seq": (1, 512)})
    return [k.as_range_task() for k in kernels_of(graph, sample_points(graph)) if k.dynamic]


def test_a_range_task_weighs_its_points_by_their_work_and_schedules_at_the_representative_value(range_tasks):
    for task in range_tasks:
        assert [p["dyn_seq"] for p in task.points] == [3, 23, 181]
        flops = np.array([t.flops for t in task.at_points], float)
        np.testing.assert_allclose(task.weights, flops / flops.sum())
        assert task.heaviest == 2
        symbolic = task.symbolic_compute()[1][0].shape
        assert task.compute()[1][0].shape == tuple(evaluate(d, {"dyn_seq": 16}) for d in symbolic)  # 1..512's middle


def test_features_bound_at_each_point_are_the_features_of_the_program_there(range_tasks):
    for task in range_tasks:
        space = RangeSpace(task)
        default = space.default()
        per_point = space.point_formulas(space.structure_key(default))
        assert per_point is not None, task.name
        values = {v: np.array([default.values[v]]) for v in per_point[0].variables}
        bound = [program_vector(f.evaluate(values))[0] for f in per_point]
        for at, features in zip(task.at_points, bound):
            made = lower_kernel(at.compute(), space.trace(default), name="candidate")
            np.testing.assert_allclose(features, program_vector(FeatureFormulas(made, []).evaluate({}))[0], atol=1e-9)
        assert not np.allclose(bound[0], bound[-1])  # the formulas are of the dimension too


class _SumModel:
    def predict(self, x):
        return np.nan_to_num(x).sum(axis=1)


def test_scores_are_the_work_weighted_sum_of_the_model_at_the_points(range_tasks):
    import random

    task = range_tasks[0]
    space = RangeSpace(task)
    rng = random.Random(0)
    cands = [space.default()] + [space.sample(rng) for _ in range(6)]
    expected = np.zeros(len(cands))
    for k, weight in enumerate(task.weights):
        for i, c in enumerate(cands):
            formulas = space.point_formulas(space.structure_key(c))
            if formulas is not None:
                values = {v: np.array([c.values[v]]) for v in formulas[k].variables}
                expected[i] += weight * np.nansum(program_vector(formulas[k].evaluate(values))[0])
    np.testing.assert_allclose(space.scores(_SumModel(), cands), expected)
    np.testing.assert_allclose(space.features(cands[:1]), space._features(cands[:1], lambda key: space._at_point(
        key, task.heaviest)))


def test_the_descent_follows_the_weighted_sum_of_the_points_gradients(range_tasks):
    task = range_tasks[0]
    space = RangeSpace(task)
    search = GradientSearch(space, make_cost_model("mlp"), GradientPolicy(), seed=0)
    key = space.structure_key(space.default())
    box = search._box(key)
    x = box.encode([space.default().values]) + 0.3
    points = space.smooth_points(key, 1.0)
    assert [w for w, _ in points] == pytest.approx(list(task.weights))
    whole = search._objective_gradients([(points, box, x)])[0]
    penalty = search.options.penalty * box.penalty(x)[1]
    apart = sum(w * (search._objective_gradients([([(1.0, smooth)], box, x)])[0] - penalty) for w, smooth in points)
    np.testing.assert_allclose(whole, apart + penalty, rtol=1e-6, atol=1e-9)  # the MLP runs in float32
    proposed = search.propose(set(), [], 8)
    assert proposed and all(space.valid(c) for c in proposed)


class _FakeMeasurer:
    """Latency per (task, trace) from a table; a task named in `failing` fails."""

    fingerprint = "fake"

    def __init__(self, latency, failing=()):
        self.latency, self.failing, self.limits, self.calls = latency, failing, {}, []

    def measure(self, inputs, on_result=None):
        out = []
        for k, inp in enumerate(inputs):
            self.calls.append(inp.task.key)
            r = (MeasureResult((), "run", "boom") if inp.task.key in self.failing
                 else MeasureResult((self.latency[inp.task.key],), build_s=1.0))
            out.append(r)
            if on_result:
                on_result(k, r)
        return out

    def limit_by_default(self, task, s):
        self.limits[task.key] = s


def test_the_points_measurer_gives_a_range_tasks_mean_and_passes_other_tasks_through(range_tasks):
    task = range_tasks[0]
    latency = {t.key: 1e-3 * (k + 1) for k, t in enumerate(task.at_points)}
    other = task.at_points[0]
    inner = _FakeMeasurer(latency)
    told = []
    measurer = PointsMeasurer(inner)
    results = measurer.measure([MeasureInput(task, task.default_trace()), MeasureInput(other, task.default_trace())],
                               lambda i, r: told.append((i, r)))
    assert results[0].latency == pytest.approx(2e-3) and results[0].build_s == 3.0
    assert results[1].latency == pytest.approx(1e-3)
    assert sorted(i for i, _ in told) == [0, 1] and measurer.fingerprint == "fake"
    failed = PointsMeasurer(_FakeMeasurer(latency, failing={task.at_points[1].key})).measure_one(
        task, task.default_trace())
    assert not failed.valid and failed.error == "boom"
    measurer.limit_by_default(task, 2e-3)
    assert inner.limits == {t.key: 6e-3 for t in task.at_points}
    assert isinstance(task, RangeTask)
