"""Tuning a model: the loop that ties tasks, the task scheduler, a search policy, the measurer, the records
database and the cost model together.

Each task's default schedule is measured first (the untuned latency, and the record every later candidate must
beat; with `from_defaults=False`, the setting of the Ansor and Felix papers, it only bounds the measurer's timeout
and the search starts from nothing). Then, round by round, the task scheduler picks a task, the policy proposes a
batch, the measurer times it, every result is appended to the database, and the cost model is retrained on all
measurements. When the batch's fastest candidate beats the task's best, both are timed again side by side and
the lower median becomes the best (`_challenge`): a task's best, which steers the task scheduler and makes the
estimate, is a confirmed figure, not the luckiest of many noisy timings. Last, each task's fastest candidates
are confirmed once more, beside the default (`confirm.py`). A rerun on the same database
resumes: earlier records seed the populations, are never measured again, and train the model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import TilegradError
from ..passes import optimize
from .algorithms import algorithm_tasks, variants
from .confirm import confirm_best, confirmed_origin, median_latency, retime
from .cost_model import TreeCostModel, throughput_of
from .evolutionary import EvolutionaryOptions, EvolutionarySearch
from .gradient import GradientOptions, GradientSearch
from .measure import MeasureInput, Measurer, MeasureResult
from .records import CONFIRMED, Database, Record
from .space import Candidate, TaskSpace
from .task import Task, extract_tasks
from .task_scheduler import TaskScheduler

POLICIES = ("gradient", "evolutionary")


@dataclasses.dataclass
class TaskResult:
    task: Task
    default_s: float
    best_s: float
    trials: int

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
    """Re-timings of challengers and incumbents during the search (`_challenge`), beside the `trials`."""
    history: list[tuple[float, int, float]] = dataclasses.field(default_factory=list)
    """After each round: seconds since the start, candidates measured, estimated end-to-end latency."""
    incumbents: list[tuple[float, int, str, str]] = dataclasses.field(default_factory=list)
    """Whenever a task's best candidate changes (from the start on): seconds since the start, candidates measured,
    the task's key and the new best's trace as JSON. Lets a benchmark re-time what the search believed best."""

    def estimated_latency(self, tuned: bool = True) -> float:
        """Sum of weight x latency over the kernels of the default graph (not the other algorithms' tasks)."""
        return sum(r.task.weight * (r.best_s if tuned else r.default_s) for r in self.tasks if not r.task.algorithm)

    def table(self) -> str:
        lines = [f"{'task':<44} {'weight':>6} {'trials':>6} {'default ms':>11} {'tuned ms':>9} {'speedup':>8}"]
        for r in self.tasks:
            name = r.task.name if not r.task.algorithm else f"({r.task.algorithm}) {r.task.name}"
            lines.append(f"{name[:44]:<44} {r.task.weight:>6} {r.trials:>6} {r.default_s * 1e3:>11.3f} "
                         f"{r.best_s * 1e3:>9.3f} {r.speedup:>7.2f}x")
        before, after = self.estimated_latency(False), self.estimated_latency(True)
        lines.append(f"estimated end-to-end (sum of weight x latency, default algorithms): {before * 1e3:.2f} ms -> "
                     f"{after * 1e3:.2f} ms ({before / after:.2f}x), {self.trials} trials and {self.rechecks} "
                     f"re-timings of new bests in {self.seconds:.0f} s")
        return "\n".join(lines)


class _TaskState:
    """What the tuner keeps per task: its space, search, measured candidates, features and latencies, and the
    re-timings of the candidates that contended for its best (`_challenge`)."""

    def __init__(self, task: Task, policy, seed: int):
        self.task = task
        self.space = TaskSpace(task)
        self.search = policy(self.space, seed)
        self.measured: dict[Candidate, float] = {}
        self.retimed: dict[Candidate, list[float]] = {}
        self.x: list[np.ndarray] = []
        self.latency: list[float] = []
        self.trained = 0  # rows of x the cost model has seen
        self.reported: Candidate | None = None  # the incumbent last reported in `TuneResult.incumbents`
        self.default_s = math.inf
        self.default_timed = False  # whether the database holds a timing of the default schedule
        self.trials = 0

    @property
    def best_s(self) -> float:
        """The incumbent's median re-timing, or its measurement while nothing has been re-timed."""
        return self._standing()[0]

    def incumbent(self) -> Candidate | None:
        """The candidate a challenger must beat; None while nothing works."""
        return self._standing()[1]

    def _standing(self) -> tuple[float, Candidate | None]:
        """(latency, candidate) of the re-timed candidate with the lowest median if any was re-timed (and did not
        fail), else of the fastest measured one. The lower median: interference only ever slows a timing, so of
        two timings the faster is kept, not their mean."""
        scored = [(statistics.median_low(v), c) for c, v in self.retimed.items()]
        scored = [sc for sc in scored if math.isfinite(sc[0])] or [
            (s, c) for c, s in self.measured.items() if math.isfinite(s)]
        return min(scored, key=lambda sc: sc[0]) if scored else (math.inf, None)

    def best(self, k: int) -> list[Candidate]:
        ok = [(s, c) for c, s in self.measured.items() if math.isfinite(s)]
        return [c for _, c in sorted(ok)[:k]]

    def observe(self, cands: list[Candidate], latencies: list[float]) -> None:
        if not cands:
            return
        feats = self.space.features(cands)
        for c, f, s in zip(cands, feats, latencies):
            self.measured[c] = s
            self.x.append(f)
            self.latency.append(s)


def tune_tasks(tasks: Sequence[Task], db: str | Path, *, policy: str = "gradient", trials: int | None = None,
               budget: float | None = None, measure_per_round: int | None = None,
               options: EvolutionaryOptions | GradientOptions | None = None, scheduler: str = "gradient",
               measurer: Measurer | None = None, cost_model=None, seed: int = 0, progress: bool = True,
               from_defaults: bool = True, confirm: int = 3, recheck: int = 3,
               clock: Callable[[], float] = time.monotonic) -> TuneResult:
    """Tune `tasks` until `trials` new candidates are measured or `budget` seconds pass (at least one is
    given). `policy` is "gradient" (Felix, with the pretrained MLP cost model) or "evolutionary" (Ansor, with
    gradient-boosted trees); `options` and `cost_model` override the policy's defaults. With `from_defaults`
    false the default schedules neither seed the search nor count in `history` (a task's best is what the search
    measured), so that two policies can be compared from nothing. A round's fastest candidate that beats its
    task's best is timed `recheck` more times beside that best before it replaces it (`_challenge`; 0 trusts
    single timings). After the last round, each task's `confirm` fastest candidates are timed again beside its
    default and the winner becomes the record `compile` uses (`confirm.py`; 0 skips it). `clock` gives the seconds
    that `budget` and `history` count: a benchmark running two tunings by turns passes one that stands still while
    the other runs."""
    if policy not in POLICIES:
        raise TilegradError(f"unknown search policy {policy!r}; available: {', '.join(POLICIES)}")
    if trials is None and budget is None:
        raise TilegradError("give trials= (candidates to measure) or budget= (seconds), or both")
    options_type = GradientOptions if policy == "gradient" else EvolutionaryOptions
    options = options or options_type()
    if not isinstance(options, options_type):
        raise TilegradError(f"policy {policy!r} takes {options_type.__name__}, not {type(options).__name__}")
    if measure_per_round is not None:
        options = dataclasses.replace(options, measure_per_round=measure_per_round)
    model = cost_model or _default_model(policy)
    search = GradientSearch if policy == "gradient" else EvolutionarySearch
    start = clock()
    own_measurer = measurer is None
    measurer = measurer or Measurer()
    states = [_TaskState(t, lambda space, s: search(space, model, options, seed=s), seed + i)
              for i, t in enumerate(tasks)]
    bar = _progress(trials, budget, progress)
    done = rechecks = 0
    history: list[tuple[float, int, float]] = []
    incumbents: list[tuple[float, int, str, str]] = []

    def report(st: _TaskState) -> None:
        c = st.incumbent()
        if c is not None and c != st.reported:
            st.reported = c
            incumbents.append((clock() - start, done, st.task.key, st.space.trace(c).to_json()))
    confirmed: dict[str, tuple[float, float]] = {}
    try:
        with Database(db) as database:
            _resume(states, database, from_defaults)
            _measure_defaults(states, database, measurer, from_defaults)
            for st in states:
                measurer.limit_by_default(st.task, st.default_s)
                report(st)
            _retrain(model, states)
            sched = TaskScheduler.for_tasks(list(tasks), strategy=scheduler,
                                            initial_latencies=[s.best_s for s in states])
            while not _finished(done, trials, clock() - start, budget):
                i = sched.next_task()
                if i is None:
                    break
                st = states[i]
                room = options.measure_per_round if trials is None else min(options.measure_per_round, trials - done)
                batch = [c for c in st.search.propose(set(st.measured), st.best(64)) if c not in st.measured][:room]
                if not batch:
                    sched.mark_exhausted(i)
                    continue
                results = measurer.measure([MeasureInput(st.task, st.space.trace(c)) for c in batch])
                for c, r in zip(batch, results):
                    database.add(Record.from_measurement(MeasureInput(st.task, st.space.trace(c)), r,
                                                         origin=st.space.origin(c, policy)))
                if recheck > 0:
                    rechecks += _challenge(st, batch, results, measurer, database, policy, recheck)
                st.observe(batch, [r.latency for r in results])
                st.trials += len(batch)
                done += len(batch)
                report(st)
                _retrain(model, states)
                sched.update(i, st.best_s)
                estimate = _estimate(states, from_defaults)
                history.append((clock() - start, done, estimate))
                bar.update(len(batch))
                bar.set_postfix_str(f"{st.task.name[:28]} best {st.best_s * 1e3:.3f} ms, model {estimate * 1e3:.2f} ms")
        if confirm > 0 and done > 0:
            bar.set_postfix_str(f"confirming the best {confirm} candidates of each task")
            confirmed = confirm_best([s.task for s in states if s.trials], db, measurer, top=confirm)
    finally:
        bar.close()
        if own_measurer:
            measurer.close()
    results = [TaskResult(s.task, *confirmed.get(s.task.key, (s.default_s, min(s.best_s, s.default_s))), s.trials)
               for s in states]
    return TuneResult(results, Path(db), done, clock() - start, rechecks, history, incumbents)


def _challenge(st: _TaskState, batch: list[Candidate], results: list[MeasureResult], measurer: Measurer,
               database: Database, policy: str, passes: int) -> int:
    """If the batch's fastest candidate beats the task's best, time the two `passes` more times side by side
    (`confirm.retime`). The re-timings join each one's tally (a contender that fails one is out); each tally is
    recorded as a confirmed record (costs: the whole tally, so a rerun takes it up), the winner's, the lowest
    median, last. A task's first working candidate has nothing to be compared with: it is timed once more, which
    frees its figure from the luck of being the fastest of its batch, and its tally grows when it is challenged.
    An incumbent that no batch challenges is timed once more after each round of its task until its tally holds
    `passes` timings: else one unlucky timing could pin the task's best for the whole run. Returns how many
    re-timings it took."""
    latency, challenger = min(zip((r.latency for r in results), batch), key=lambda lc: lc[0])
    incumbent = st.incumbent()
    if latency < st.best_s:
        contenders = [challenger] + ([incumbent] if incumbent is not None and incumbent != challenger else [])
        passes = passes if len(contenders) > 1 else 1
    elif incumbent is not None and len(st.retimed.get(incumbent, ())) < passes:
        contenders, passes = [incumbent], 1
    else:
        return 0
    inputs = [MeasureInput(st.task, st.space.trace(c)) for c in contenders]
    timings = retime(measurer, inputs, passes)
    for c, rs in zip(contenders, timings):
        ok = math.isfinite(median_latency(rs))
        st.retimed[c] = [*st.retimed.get(c, []), *(r.latency for r in rs)] if ok else [math.inf]
    winner = st.incumbent()
    for c, inp in sorted(zip(contenders, inputs), key=lambda ci: ci[0] == winner):  # the winner's last: newest
        if math.isfinite(st.retimed[c][0]):
            database.add(Record.from_measurement(inp, MeasureResult(tuple(st.retimed[c])),
                                                 origin=confirmed_origin(st.space.origin(c, policy))))
    return len(contenders) * passes


def _default_model(policy: str):
    if policy == "gradient":
        from .mlp_model import MLPCostModel

        return MLPCostModel.pretrained()
    return TreeCostModel()


def _estimate(states: list[_TaskState], from_defaults: bool) -> float:
    """Sum over the default graph's tasks of weight x best latency so far (the default where nothing beat it, if it
    counts; inf while a task has nothing that works)."""
    return sum(s.task.weight * (min(s.best_s, s.default_s) if from_defaults else s.best_s)
               for s in states if not s.task.algorithm)


def _finished(done: int, trials: int | None, elapsed: float, budget: float | None) -> bool:
    return (trials is not None and done >= trials) or (budget is not None and elapsed >= budget)


def _progress(trials: int | None, budget: float | None, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=trials, unit="trial", disable=not enabled, dynamic_ncols=True,
                desc="tuning" if budget is None else f"tuning ({budget:.0f} s budget)")


def _resume(states: list[_TaskState], database: Database, from_defaults: bool) -> None:
    """Earlier records of these tasks: measured candidates, re-timings, and the default schedule's latency."""
    for st in states:
        cands, lats = [], []
        for rec in database.records(st.task.key):
            c = st.space.from_origin(rec.origin)
            if c is None:
                continue
            policy = json.loads(rec.origin)["policy"]
            if policy == CONFIRMED:  # re-timings, not a new measurement: the newest tally of the candidate
                st.retimed[c] = list(rec.costs)
                continue
            if c == st.space.default():
                st.default_s = min(st.default_s, rec.latency)
                st.default_timed = True
                if not from_defaults and policy == "default":
                    continue
            cands.append(c)
            lats.append(rec.latency)
        st.observe(cands, lats)


def _measure_defaults(states: list[_TaskState], database: Database, measurer: Measurer,
                      from_defaults: bool) -> None:
    """Time each task's default schedule once: the untuned latency, the measurer's timeout scale, and (if
    `from_defaults`) the first candidate of the search."""
    todo = [st for st in states if not st.default_timed]
    inputs = [MeasureInput(st.task, st.space.trace(st.space.default())) for st in todo]
    for st, inp, r in zip(todo, inputs, measurer.measure(inputs) if inputs else []):
        database.add(Record.from_measurement(inp, r, origin=st.space.origin(st.space.default(), "default")))
        if from_defaults:
            st.observe([st.space.default()], [r.latency])
        st.default_s = r.latency
        st.default_timed = True


def _retrain(model, states: list[_TaskState]) -> None:
    """Hand the cost model the rows measured since its last update."""
    xs, tps, groups = [], [], []
    for st in states:
        if st.trained == len(st.x):
            continue
        xs.append(np.stack(st.x[st.trained:]))
        tps.append(throughput_of(np.array(st.latency[st.trained:]), max(st.task.flops, 1)))
        groups += [st.task.key] * (len(st.x) - st.trained)
        st.trained = len(st.x)
    if xs and len({x.shape[1] for x in xs}) == 1:
        model.update(np.concatenate(xs), np.concatenate(tps), groups)


def tune(model, *, db: str | Path, input_shapes: Mapping[str, Sequence[int]] | None = None,
         example_inputs=None, opt_level: int = 2, policy: str = "gradient", trials: int | None = None,
         budget: float | None = None, algorithms: bool = True, **options) -> TuneResult:
    """Tune every kernel of `model` (an ONNX model, or a torch.nn.Module with `example_inputs`) and append the
    measurements to the records database `db`; `tilegrad.compile(model, db=db)` then uses the best of them.
    With `algorithms`, the kernels of each convolution's other algorithms are tuned too, and compile picks the
    algorithms by the records (algorithms.py)."""
    tasks = model_tasks(model, input_shapes=input_shapes, example_inputs=example_inputs, opt_level=opt_level,
                        algorithms=algorithms)
    return tune_tasks(tasks, db, policy=policy, trials=trials, budget=budget, **options)


def model_tasks(model, *, input_shapes=None, example_inputs=None, opt_level: int = 2,
                algorithms: bool = True) -> list[Task]:
    """The tasks of the graph `tilegrad.compile` builds, then (with `algorithms`) those of the variant graphs in
    which convolutions use their other algorithms."""
    if not algorithms:
        return extract_tasks(model_graph(model, input_shapes=input_shapes, example_inputs=example_inputs,
                                         opt_level=opt_level))
    from ..api import import_model

    return algorithm_tasks(variants(import_model(model, example_inputs, input_shapes), opt_level=opt_level))


def model_graph(model, *, input_shapes=None, example_inputs=None, opt_level: int = 2):
    """The optimised graph `tilegrad.compile` builds kernels from."""
    from ..api import import_model

    graph, _ = optimize(import_model(model, example_inputs, input_shapes), opt_level)
    return graph
