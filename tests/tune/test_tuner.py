"""The tuning loop end to end on a tiny model: records appended, the best applied by compile(db=), a rerun
resumes without measuring a candidate twice, and the CLI lists tasks and tunes."""

import dataclasses
import io
import json
import random
import sqlite3
import warnings
from typing import ClassVar

import numpy as np
import pytest
import torch
from torch import nn

import tilegrad
from tilegrad.cli import main
from tilegrad.errors import TilegradError
from tilegrad.executor import compile_graph
from tilegrad.schedule.trace import Trace
from tilegrad.tune.apply import BestRecords
from tilegrad.tune.callbacks import TimingNoiseWarning, WarnNoisyTimings, default_callbacks
from tilegrad.tune.confirm import confirm_best, retime
from tilegrad.tune.measure import MeasureInput, MeasureResult
from tilegrad.tune.model import model_graph
from tilegrad.tune.records import Database, Record, RecordsFromAnotherMachine, machine_class, machine_fingerprint
from tilegrad.tune.search import register_policy
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy
from tilegrad.tune.search.policy import POLICIES
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.state import TaskState
from tilegrad.tune.task import extract_tasks
from tilegrad.tune.tuner import _challenge, _resume, tune_tasks
from tilegrad.tune.tuning_run import Callback, TuneOptions

SMALL = EvolutionaryPolicy(population=48, generations=2, measure_per_round=6)
QUIET = default_callbacks(progress=False)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 48), nn.ReLU(), nn.Linear(48, 16)).eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(8, 32),), buf, input_names=["x"], dynamo=False)
    path = tmp_path_factory.mktemp("model") / "mlp.onnx"
    path.write_bytes(buf.getvalue())
    return path


def _origins(db):
    with sqlite3.connect(db) as con:
        return [row[0] for row in con.execute("SELECT origin FROM records")]


def _measured_origins(db):
    """The origins of measured candidates, re-timings (`confirm` records) left out."""
    return [o for o in _origins(db) if json.loads(o)["policy"] != "confirm"]


def test_tuning_records_every_candidate_and_compile_applies_the_best(model, tmp_path):
    db = tmp_path / "tune.db"
    tasks = extract_tasks(model_graph(str(model)))
    result = tune_tasks(tasks, db, SMALL, TuneOptions(trials=12, confirm=0), callbacks=QUIET)
    assert result.trials == 12
    origins = _measured_origins(db)
    assert len(origins) == 12 + len(tasks)  # every candidate, and each task's default schedule first
    assert sum(json.loads(o)["policy"] == "default" for o in origins) == len(tasks)
    for r in result.tasks:
        assert r.best_s <= r.default_s
    x = np.random.default_rng(0).standard_normal((8, 32)).astype("float32")
    graph = model_graph(str(model))
    with BestRecords(db) as chooser:
        tuned = compile_graph(graph, choose=chooser)
        assert chooser.applied == len(graph.nodes)  # every kernel of this graph was tuned
    np.testing.assert_allclose(tuned(x), tilegrad.compile(str(model))(x), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tilegrad.compile(str(model), db=db)(x), tuned(x), rtol=1e-6)

    # Resumes: defaults are not re-measured
    again = tune_tasks(tasks, db, SMALL, TuneOptions(trials=6, confirm=0),
                       callbacks=QUIET)
    origins = _measured_origins(db)
    assert len(origins) == 12 + len(tasks) + 6
    assert again.trials == 6
    assert len({(json.loads(o)["sketch"], json.dumps(json.loads(o)["params"], sort_keys=True)) for o in origins}
               ) >= len(origins) - len(tasks)  # no candidate measured twice


def test_tuning_from_nothing_leaves_the_defaults_out_of_the_search(model, tmp_path):
    db = tmp_path / "tune.db"
    tasks = extract_tasks(model_graph(str(model)))
    result = tune_tasks(tasks, db, SMALL, TuneOptions(trials=6 * len(tasks), from_defaults=False, confirm=0, recheck=0),
                        callbacks=QUIET)
    origins = [json.loads(o) for o in _origins(db)]
    assert sum(o["policy"] == "default" for o in origins) == len(tasks)  # timed once, for the timeouts
    # The history counts only what the search measured: nothing until every task has a working candidate.
    searched = {t.key: [] for t in tasks}
    with Database(db) as database:
        for t in tasks:
            searched[t.key] = [r.latency for r in database.records(t.key) if json.loads(r.origin)["policy"] != "default"]
    final = sum(t.weight * min(searched[t.key]) for t in tasks)
    assert result.history[-1][2] == pytest.approx(final)
    assert all(np.isinf(h[2]) for h in result.history[:len(tasks) - 1])
    # Resumes without timing the defaults again
    again = tune_tasks(tasks, db, SMALL, TuneOptions(trials=6, from_defaults=False, confirm=0, recheck=0),
                       callbacks=QUIET)
    assert sum(json.loads(o)["policy"] == "default" for o in _origins(db)) == len(tasks)
    assert again.history[-1][2] <= final


def test_the_best_candidates_are_confirmed_and_compile_uses_the_winner(model, tmp_path):
    db = tmp_path / "tune.db"
    tasks = extract_tasks(model_graph(str(model)))
    result = tune_tasks(tasks, db, SMALL, TuneOptions(trials=6 * len(tasks), confirm=2, recheck=0), callbacks=QUIET)
    origins = [json.loads(o) for o in _origins(db)]
    confirmed = [o for o in origins if o["policy"] == "confirm"]
    assert len(confirmed) == len(tasks)  # one winner per task: its default or one of its two fastest candidates
    with Database(db) as database:
        for t, r in zip(tasks, result.tasks):
            best = database.best(t.key)
            assert json.loads(best.origin)["policy"] == "confirm"
            assert len(best.costs) == 3 and best.latency == pytest.approx(r.best_s)  # the median of 3 passes
            assert r.best_s <= r.default_s  # the default is timed in the same passes, so the winner is no slower
            fastest = database.top(t.key, 3)
            assert best.trace_json in {rec.trace_json for rec in fastest} | {t.default_trace().to_json()}
    x = np.random.default_rng(0).standard_normal((8, 32)).astype("float32")
    np.testing.assert_allclose(tilegrad.compile(str(model), db=db)(x), tilegrad.compile(str(model))(x),
                               rtol=1e-4, atol=1e-5)
    again = tune_tasks(tasks, db, SMALL, TuneOptions(trials=6, confirm=0), callbacks=QUIET)
    assert again.trials == 6  # a rerun recovers confirmed records as measured candidates


class _FixedTimings:
    """A measurer stand-in: each trace always times at the latency given for it (seconds), on this machine."""

    fingerprint = None

    def __init__(self, latencies: dict[str, float]):
        self.latencies = latencies
        self.batches: list[list[str]] = []  # the traces of each call, in order

    def measure(self, inputs, on_result=None):
        self.batches.append([inp.trace.to_json() for inp in inputs])
        results = [MeasureResult((self.latencies[inp.trace.to_json()],)) for inp in inputs]
        for i, r in enumerate(results if on_result else ()):
            on_result(i, r)
        return results


def _distinct_candidates(space, n):
    rng, found = random.Random(0), {space.default()}
    while len(found) < n + 1:
        found.add(space.sample(rng))
    return [space.default(), *(found - {space.default()})][:n + 1]


def test_a_lucky_timing_does_not_displace_the_best_and_the_final_confirmation_sees_the_standing_best(
        model, tmp_path):
    task = extract_tasks(model_graph(str(model)))[0]
    st = TaskState(task, lambda space: None)
    default, lucky, steady = _distinct_candidates(st.space, 2)
    trace = {c: st.space.trace(c).to_json() for c in (default, lucky, steady)}
    db = tmp_path / "tune.db"
    with Database(db) as database:
        # Measured once each: the default at 3 ms; then steady at 1 ms; then lucky at 0.5 ms, which re-times at 2 ms.
        st.observe([default], [3e-3])
        again = _FixedTimings({trace[default]: 3e-3, trace[steady]: 1e-3})
        assert _challenge(st, [steady], [MeasureResult((1e-3,))], again, database.add, "gradient", 3) == 6
        st.observe([steady], [1e-3])
        assert st.incumbent() == steady and st.best_s == pytest.approx(1e-3)
        again = _FixedTimings({trace[steady]: 1e-3, trace[lucky]: 2e-3})
        assert _challenge(st, [lucky], [MeasureResult((0.5e-3,))], again, database.add, "gradient", 3) == 6
        database.add(Record.from_measurement(MeasureInput(task, st.space.trace(lucky)), MeasureResult((0.5e-3,)),
                                             origin=st.space.origin(lucky, "gradient")))
        st.observe([lucky], [0.5e-3])
        assert st.incumbent() == steady and st.best_s == pytest.approx(1e-3)  # the lucky timing did not count
        assert st.retimed[lucky] == [2e-3] * 3 and st.retimed[steady] == [1e-3] * 6
        standing = database.best(task.key)
        assert standing.trace_json == trace[steady] and standing.costs == (1e-3,) * 6
        assert database.top(task.key, 1)[0].trace_json == trace[lucky]
    # The final confirmation times the fastest record (lucky), the standing best and the default side by side.
    timings = {trace[default]: 3e-3, trace[lucky]: 2e-3, trace[steady]: 1e-3}
    result = confirm_best([task], db, _FixedTimings(timings), top=1)
    assert result[task.key] == pytest.approx((3e-3, 1e-3))
    with Database(db) as database:
        assert database.best(task.key).trace_json == trace[steady]


def test_a_first_working_candidate_is_timed_once_more_and_its_tally_grows_when_challenged(model, tmp_path):
    task = extract_tasks(model_graph(str(model)))[0]
    st = TaskState(task, lambda space: None)
    first, second = _distinct_candidates(st.space, 2)[1:]
    trace = {c: st.space.trace(c).to_json() for c in (first, second)}
    with Database(tmp_path / "tune.db") as database:
        again = _FixedTimings({trace[first]: 2e-3})
        assert _challenge(st, [first], [MeasureResult((1.5e-3,))], again, database.add, "gradient", 3) == 1
        st.observe([first], [1.5e-3])
        assert st.retimed[first] == [2e-3] and st.best_s == pytest.approx(2e-3)  # the re-timing, not the luck
        again = _FixedTimings({trace[first]: 2e-3, trace[second]: 1e-3})
        assert _challenge(st, [second], [MeasureResult((1e-3,))], again, database.add, "gradient", 3) == 6
        assert st.retimed[first] == [2e-3] * 4 and st.incumbent() == second


def test_an_unchallenged_incumbent_is_timed_again_until_its_tally_is_full(model, tmp_path):
    """One unlucky re-timing must not pin a task's best: rounds that bring no faster candidate time the incumbent
    once more each, until its tally holds `passes` timings; then they cost nothing."""
    task = extract_tasks(model_graph(str(model)))[0]
    st = TaskState(task, lambda space: None)
    first, slow = _distinct_candidates(st.space, 2)[1:]
    trace = {c: st.space.trace(c).to_json() for c in (first, slow)}
    with Database(tmp_path / "tune.db") as database:
        assert _challenge(st, [first], [MeasureResult((3e-3,))], _FixedTimings({trace[first]: 5e-3}), database.add,
                          "gradient", 3) == 1
        st.observe([first], [3e-3])
        assert st.best_s == pytest.approx(5e-3)  # the unlucky re-timing
        steady = _FixedTimings({trace[first]: 3e-3})
        for retimings, tally in ((1, 2), (1, 3), (0, 3)):
            assert _challenge(st, [slow], [MeasureResult((9e-3,))], steady, database.add, "gradient", 3) == retimings
            assert len(st.retimed[first]) == tally
            if tally == 2:  # the lower of two timings: interference only slows, so a mean would keep the bad one
                assert st.best_s == pytest.approx(3e-3)
        assert steady.batches == [[trace[first]]] * 2
        assert st.best_s == pytest.approx(3e-3)  # the median of 5, 3 and 3 ms
        assert database.best(task.key).costs == (5e-3, 3e-3, 3e-3)


def test_retiming_shuffles_each_pass_and_keeps_each_result_with_its_candidate(model):
    task = extract_tasks(model_graph(str(model)))[0]
    space = TaskSpace(task)
    traces = [space.trace(c).to_json() for c in _distinct_candidates(space, 5)]
    measurer = _FixedTimings({t: (k + 1) * 1e-3 for k, t in enumerate(traces)})
    timings = retime(measurer, [MeasureInput(task, Trace.from_json(t)) for t in traces], passes=4)
    assert [[r.latency for r in results] for results in timings] == [[(k + 1) * 1e-3] * 4 for k in range(6)]
    assert all(sorted(b) == sorted(traces) for b in measurer.batches) and len(measurer.batches) == 4
    assert len({tuple(b) for b in measurer.batches}) > 1  # the order changes between passes


def test_a_search_from_nothing_counts_only_retimed_bests(model, tmp_path):
    db = tmp_path / "tune.db"
    tasks = extract_tasks(model_graph(str(model)))
    result = tune_tasks(tasks, db, SMALL, TuneOptions(trials=6 * len(tasks), from_defaults=False, confirm=0, recheck=2),
                        callbacks=QUIET)
    assert result.rechecks >= len(tasks)  # each task's first working candidate is re-timed once, at least
    with Database(db) as database:
        standing = [database.best(t.key) for t in tasks]
    assert all(json.loads(r.origin)["policy"] == "confirm" for r in standing)
    # The estimate is made of the standing bests' re-timings, not of the fastest single timings.
    assert result.history[-1][2] == pytest.approx(sum(t.weight * r.latency for t, r in zip(tasks, standing)))
    latest = {key: trace for _, _, key, trace in result.incumbents}  # each task's best as it changed
    assert latest == {t.key: r.trace_json for t, r in zip(tasks, standing)}
    assert [i[:2] for i in result.incumbents] == sorted(i[:2] for i in result.incumbents)
    states = [TaskState(t, lambda space: None) for t in tasks]
    with Database(db) as database:
        _resume(states, database, from_defaults=False)  # a rerun takes up the tallies
    for st, r in zip(states, standing):
        assert st.best_s == pytest.approx(r.latency)


def test_compile_with_a_missing_database_is_an_error(model, tmp_path):
    with pytest.raises(TilegradError, match="no tuning records"):
        tilegrad.compile(str(model), db=tmp_path / "none.db")


def test_tune_needs_trials_or_budget(model, tmp_path):
    with pytest.raises(TilegradError, match="trials"):
        tune_tasks(extract_tasks(model_graph(str(model))), tmp_path / "x.db", callbacks=QUIET)


def test_an_unknown_policy_names_the_registered_ones(model, tmp_path):
    with pytest.raises(TilegradError, match="annealing.*available:.*gradient"):
        tune_tasks(extract_tasks(model_graph(str(model))), tmp_path / "x.db", "annealing", TuneOptions(trials=1),
                   callbacks=QUIET)


@register_policy("random-test")
@dataclasses.dataclass(frozen=True)
class _RandomPolicy:
    """A third policy, registered here only: random valid candidates, whatever the cost model says."""

    name: ClassVar[str] = "random-test"
    cost_model: ClassVar[str] = "trees"
    measure_per_round: int = 3

    def for_task(self, space, model, seed):
        return _RandomSearch(space, random.Random(seed))


@dataclasses.dataclass
class _RandomSearch:
    space: TaskSpace
    rng: random.Random

    def propose(self, measured, best, n):
        return [self.space.sample(self.rng) for _ in range(n)]


class _Rounds(Callback):
    """Notes each round's task and batch size."""

    def __init__(self):
        self.batches = []

    def measured(self, run, st, batch, results):
        self.batches.append((st.task.key, len(batch)))


def test_a_registered_policy_plugs_into_the_tuner_by_name(model, tmp_path):
    assert "random-test" in POLICIES
    db, rounds = tmp_path / "random.db", _Rounds()
    tasks = extract_tasks(model_graph(str(model)))
    result = tune_tasks(tasks, db, "random-test", TuneOptions(trials=6, confirm=0, recheck=0),
                        callbacks=[*QUIET, rounds])
    assert result.trials == 6 == sum(n for _, n in rounds.batches) and all(n <= 3 for _, n in rounds.batches)
    origins = [json.loads(o)["policy"] for o in _origins(db)]
    assert origins.count("random-test") == 6 and origins.count("default") == len(tasks)


def test_cli_lists_tasks_and_tunes(model, tmp_path, capsys):
    assert main(["tune", str(model), "--list-tasks"]) == 0
    out = capsys.readouterr().out
    assert "2 tasks" in out and "share" in out
    db = tmp_path / "cli.db"
    assert main(["tune", str(model), "--db", str(db), "--trials", "6", "--measure-per-round", "6"]) == 0
    out = capsys.readouterr().out
    assert "estimated end-to-end" in out and db.exists()
    assert main(["tune", str(model), "--trials", "6"]) == 2  # no --db


def test_tilegrad_tune_is_the_entry_point(model, tmp_path):
    result = tilegrad.tune(str(model), db=tmp_path / "api.db", policy=SMALL, trials=6, progress=False)
    assert result.trials == 6 and "estimated end-to-end" in result.table()


def test_tune_is_reachable_from_the_top_level_package():
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", "import tilegrad; assert callable(tilegrad.tune)"], check=True)


class _KilledMidBatch:
    """A measurer that times `before_kill` candidates, then dies like a process killed in the middle of a batch."""

    fingerprint = None

    def __init__(self, before_kill: int):
        self.left = before_kill

    def measure(self, inputs, on_result=None):
        for i, _ in enumerate(inputs):
            if self.left == 0:
                raise KeyboardInterrupt
            self.left -= 1
            on_result(i, MeasureResult((1e-3 * (i + 1),)))
        return [MeasureResult((1e-3 * (i + 1),)) for i in range(len(inputs))]

    def limit_by_default(self, task, default_latency):
        pass


def test_a_run_killed_in_the_middle_of_a_batch_keeps_every_candidate_it_timed(model, tmp_path):
    """Records are committed as each timing ends, not when its batch does."""
    tasks = extract_tasks(model_graph(str(model)))
    db = tmp_path / "tune.db"
    with pytest.raises(KeyboardInterrupt):
        tune_tasks(tasks, db, policy=SMALL, options=TuneOptions(trials=50), measurer=_KilledMidBatch(len(tasks) + 4),
                   callbacks=QUIET)
    assert len(_origins(db)) == len(tasks) + 4  # every default, and the first four candidates of the first batch


class _ClockedTimings:
    """A measurer stand-in on a fake clock: timing a candidate takes `each_s` of it (and says so in `run_s`); a
    trace's latency is a fixed function of its text, so some candidates beat the default."""

    fingerprint = None

    def __init__(self, each_s: float):
        self.now, self.each_s = 0.0, each_s

    def clock(self) -> float:
        return self.now

    def measure(self, inputs, on_result=None):
        results = []
        for i, inp in enumerate(inputs):
            self.now += self.each_s
            results.append(MeasureResult((1e-3 * (1 + hash(inp.trace.to_json()) % 97 / 97),), run_s=self.each_s))
            if on_result:
                on_result(i, results[-1])
        return results

    def limit_by_default(self, task, default_latency):
        pass


def test_the_budget_covers_the_final_confirmation_and_the_time_spent_outside_the_search(model, tmp_path):
    tasks = extract_tasks(model_graph(str(model)))
    timings = _ClockedTimings(each_s=0.5)
    budget, outside = 60.0, 10.0
    result = tune_tasks(tasks, tmp_path / "tune.db", SMALL, TuneOptions(budget=budget, confirm=2),
                        measurer=timings, callbacks=QUIET, clock=timings.clock, outside_s=outside)
    deadline = budget - outside
    round_s = (6 + 2 * 3) * timings.each_s  # a batch and its challenge: the most a search's last round overruns
    assert deadline - round_s <= timings.now <= deadline + round_s
    assert result.trials > 0
    with Database(tmp_path / "tune.db") as database:  # the search left time for every task's confirmation
        assert all(json.loads(database.best(t.key).origin)["policy"] == "confirm" for t in tasks)


def test_the_final_confirmation_begins_no_task_past_its_deadline(model, tmp_path):
    tasks = extract_tasks(model_graph(str(model)))
    db = tmp_path / "tune.db"
    tune_tasks(tasks, db, SMALL, TuneOptions(trials=6 * len(tasks), confirm=0, recheck=0), callbacks=QUIET)
    timings = _ClockedTimings(each_s=1.0)
    assert confirm_best(tasks, db, timings, deadline=0.0, clock=timings.clock) == {}
    assert timings.now == 0.0
    confirmed = confirm_best(tasks, db, timings, deadline=1.0, clock=timings.clock)
    assert len(confirmed) == 1 and timings.now > 1.0  # the heaviest task, begun before the deadline


def _kin_fingerprint() -> str:
    """The fingerprint of another CPU model with 4 threads, of this machine's class (same ISA and flags)."""
    own = machine_fingerprint()
    other = "Another CPU" + own[own.index(";"):own.rindex(";")] + "; 4 threads"
    assert other != own and machine_class(other) == machine_class(own) is not None
    return other


def test_records_of_another_machine_of_this_class_start_the_tuning_and_build_the_model(model, tmp_path):
    tasks = extract_tasks(model_graph(str(model)))
    db = tmp_path / "tune.db"
    elsewhere = _ClockedTimings(each_s=0.01)
    elsewhere.fingerprint = _kin_fingerprint()
    tune_tasks(tasks, db, SMALL, TuneOptions(trials=12, confirm=0), measurer=elsewhere, callbacks=QUIET)
    x = np.random.default_rng(0).standard_normal((8, 32)).astype("float32")
    with pytest.warns(RecordsFromAnotherMachine, match="Another CPU"):
        tuned = tilegrad.compile(str(model), db=db)
    np.testing.assert_allclose(tuned(x), tilegrad.compile(str(model))(x), rtol=1e-4, atol=1e-5)

    class _Seen(Callback):
        def started(self, run):
            self.rows = [len(st.x) for st in run.states]
            self.priors = [len(st.prior) for st in run.states]

    seen = _Seen()
    with pytest.warns(RecordsFromAnotherMachine, match="the cost model trains on them"):
        tune_tasks(tasks, db, SMALL, TuneOptions(trials=6, confirm=0), callbacks=[*QUIET, seen])
    assert all(p > 0 for p in seen.priors) and sum(seen.rows) > len(tasks)  # more rows than the defaults timed here
    with Database(db) as database:
        assert database.count() >= len(tasks) + 6  # the defaults and the new candidates, timed on this machine
        assert database.kin() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordsFromAnotherMachine)
        tilegrad.compile(str(model), db=db)  # now this machine's own records


def test_records_of_a_machine_of_another_class_are_not_used(model, tmp_path):
    tasks = extract_tasks(model_graph(str(model)))
    db = tmp_path / "tune.db"
    elsewhere = _ClockedTimings(each_s=0.01)
    elsewhere.fingerprint = machine_fingerprint().replace("; isa ", "; isa 0").replace("; cflags ", "; cflags 0")
    tune_tasks(tasks, db, SMALL, TuneOptions(trials=12, confirm=0), measurer=elsewhere, callbacks=QUIET)
    with Database(db) as database:
        assert database.kin() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordsFromAnotherMachine)
        tilegrad.compile(str(model), db=db)


def test_a_run_whose_timings_are_noisy_warns_once():
    watch = WarnNoisyTimings(fraction=0.25, after=8)
    quiet, noisy = MeasureResult((1e-3,) * 3), MeasureResult((1e-3, 2e-3, 1e-3), noisy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TimingNoiseWarning)
        watch.measured(None, None, [], [quiet] * 6 + [noisy] * 2)  # 2 of 8: not more than a quarter
        watch.measured(None, None, [], [MeasureResult((), "run", "crashed")] * 8)  # failures are not timings
    with pytest.warns(TimingNoiseWarning, match="3 of 9 timings were noisy"):
        watch.measured(None, None, [], [noisy])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TimingNoiseWarning)
        watch.measured(None, None, [], [noisy] * 8)  # once only
