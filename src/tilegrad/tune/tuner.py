"""The tuning loop: tasks, the task scheduler, a search policy, the measurer and the cost model, round by round.

Each task's default schedule is measured first (the untuned latency, and the record every later candidate must
beat; with `from_defaults=False`, the setting of the Ansor and Felix papers, it only bounds the measurer's timeout
and the search starts from nothing). Then, round by round, the task scheduler picks a task, the policy proposes a
batch, the measurer times it, and the callbacks see every record and the end of every round (by default they
append the records to the database and retrain the cost model: `callbacks.py`). When the batch's fastest
candidate beats the task's best, both are timed again side by side and the lower median becomes the best
(`_challenge`): a task's best, which steers the task scheduler and makes the estimate, is a confirmed figure, not
the luckiest of many noisy timings. Last, each task's fastest candidates are confirmed once more, beside the
default (`confirm.py`). A rerun on the same database resumes: earlier records seed the populations, are never
measured again, and train the model.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import TilegradError
from . import autotvm as _autotvm  # noqa: F401  (registers the "autotvm" policy)
from .callbacks import Callback, default_callbacks
from .confirm import confirm_best, confirmed_origin, median_latency, records_fingerprint, retime
from .cost_model import CostModel, make_cost_model
from .measure import MeasureInput, Measurer, MeasureResult
from .records import CONFIRMED, Database, Record, RecordsFromAnotherMachine
from .results import TuneResult
from .search import SearchPolicy, make_policy
from .search.policy import task_space
from .search.space import Candidate
from .state import TaskState
from .task import Task
from .task_scheduler import TaskScheduler
from .tuning_run import TuneOptions, TuningRun


def tune_tasks(tasks: Sequence[Task], db: str | Path, policy: str | SearchPolicy = "gradient",
               options: TuneOptions | None = None, *, cost_model: str | CostModel | None = None,
               measurer: Measurer | None = None, callbacks: Sequence[Callback] | None = None,
               clock: Callable[[], float] = time.monotonic,
               outside_s: float | Callable[[TuningRun], float] = 0.0) -> TuneResult:
    """Tune `tasks` into the records database `db` with `policy` (a registered name, "gradient" for Felix or
    "evolutionary" for Ansor, or an instance with its own settings) and the cost model it names unless
    `cost_model` is given. `callbacks` default to `default_callbacks()`. `clock` gives the seconds that the budget
    and the history count: a benchmark running two tunings by turns passes one that stands still while the other
    runs. The budget covers the final confirmation and `outside_s`, seconds the caller spends on the tuning
    outside this call (or a function of the run that foretells them): the search stops early enough for both
    (`TuningRun.confirmation_s`, `TuningRun.deadline`)."""
    options = options or TuneOptions()
    if options.trials is None and options.budget is None:
        raise TilegradError("give trials= (candidates to measure) or budget= (seconds), or both")
    policy = make_policy(policy)
    model = make_cost_model(cost_model or policy.cost_model)
    callbacks = default_callbacks() if callbacks is None else callbacks
    per_round = options.measure_per_round or policy.measure_per_round
    start = clock()
    own_measurer = measurer is None
    measurer = measurer or Measurer()
    states = [TaskState(t, lambda space, s=options.seed + i: policy.for_task(space, model, s),
                        task_space(policy, t)) for i, t in enumerate(tasks)]
    run: TuningRun | None = None
    try:
        with Database(db, fingerprint=records_fingerprint(measurer, tasks)) as database:  # the measuring machine's
            outside = outside_s if callable(outside_s) else (lambda run, spent=outside_s: spent)
            run = TuningRun(options, policy, model, database, states, callbacks, clock, start, outside)
            _resume(states, database, options.from_defaults)
            _transfer(states, database)
            _measure_defaults(states, measurer, run.commit, options.from_defaults)
            for st in states:
                measurer.limit_by_default(st.task, st.default_s)
                run.report(st)
            for cb in callbacks:
                cb.started(run)
            sched = TaskScheduler.for_tasks(list(tasks), strategy=options.scheduler,
                                            initial_latencies=[s.best_s for s in states])
            run.search_start = run.elapsed()
            while not _finished(run):
                i = sched.next_task()
                if i is None:
                    break
                st = states[i]
                room = per_round if options.trials is None else min(per_round, options.trials - run.done)
                proposed = st.search.propose(set(st.measured), st.best(64), per_round)
                batch = [c for c in proposed if c not in st.measured][:room]
                if not batch:
                    sched.mark_exhausted(i)
                    continue
                inputs = [MeasureInput(st.task, st.space.trace(c)) for c in batch]
                results = measurer.measure(inputs, lambda k, r, st=st, inputs=inputs, batch=batch: run.commit(
                    Record.from_measurement(inputs[k], r, origin=st.space.origin(batch[k], policy.name))))
                if options.recheck > 0:
                    run.rechecks += _challenge(st, batch, results, measurer, run.commit, policy.name,
                                               options.recheck)
                for r in results:
                    run.note_build(r.build_s)
                    if r.valid and not r.abandoned:
                        st.note_timing(r.run_s)
                st.observe(batch, [r.latency for r in results])
                if hasattr(st.search, "observe"):  # a search that learns from what its batches measured
                    st.search.observe(batch, [r.latency for r in results])
                st.trials += len(batch)
                run.done += len(batch)
                run.report(st)
                sched.update(i, st.best_s)
                for cb in callbacks:
                    cb.measured(run, st, batch, results)
                run.history.append((run.elapsed(), run.done, run.estimate()))
        if options.confirm > 0 and run.done > 0:
            for cb in callbacks:
                cb.confirming(run)
            run.confirmed = confirm_best([s.task for s in states if s.trials], db, measurer, top=options.confirm,
                                         deadline=run.deadline(), clock=clock)
    finally:
        if run is not None:
            for cb in callbacks:
                cb.finished(run)
        if own_measurer:
            measurer.close()
    return TuneResult(run.task_results(), Path(db), run.done, clock() - start, run.rechecks, run.history,
                      run.incumbents)


def _challenge(st: TaskState, batch: list[Candidate], results: list[MeasureResult], measurer: Measurer,
               commit: Callable[[Record], None], policy: str, passes: int) -> int:
    """If the batch's fastest candidate beats the task's best, time the two `passes` more times side by side
    (`confirm.retime`). The re-timings join each one's tally (a contender that fails one is out); each tally is
    committed as a confirmed record (costs: the whole tally, so a rerun takes it up), the winner's, the lowest
    median, last. A task's first working candidate has nothing to be compared with: it is timed once more, which
    frees its figure from the luck of being the fastest of its batch, and its tally grows when it is challenged.
    An incumbent that no batch challenges is timed once more after each round of its task until its tally holds
    `passes` timings: else one unlucky timing pins the task's best for the rest of the run. Returns how many
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
            commit(Record.from_measurement(inp, MeasureResult(tuple(st.retimed[c])),
                                           origin=confirmed_origin(st.space.origin(c, policy))))
    return len(contenders) * passes


def _finished(run: TuningRun) -> bool:
    """Whether the trials are spent, or the budget is: the next round, at half its mean length, would end past
    the time the final confirmation needs (so the rounds end about the deadline, early or late by half a round,
    rather than late by a whole one)."""
    trials = run.options.trials
    deadline = run.deadline()
    return (trials is not None and run.done >= trials) or (
        deadline is not None and run.clock() + run.round_s() / 2 + run.confirmation_s() >= deadline)


def _resume(states: list[TaskState], database: Database, from_defaults: bool) -> None:
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
                if rec.valid:
                    st.note_timing(rec.run_s)
                st.default_timed = True
                if not from_defaults and policy == "default":
                    continue
            cands.append(c)
            lats.append(rec.latency)
        st.observe(cands, lats)


def _transfer(states: list[TaskState], database: Database) -> None:
    """Where the database holds no records of this machine but some of another of its class (`Database.kin`):
    the cost model trains on those first, and their fastest seed the searches; every candidate is timed here."""
    kin = database.kin()
    if kin is None:
        return
    warnings.warn(RecordsFromAnotherMachine(
        f"{database.path} holds no records of this machine ({database.fingerprint}); tuning starts from those of "
        f"{kin}, which has the same instruction set and compiler flags: the cost model trains on them and their "
        "fastest seed the search, and every candidate is timed again here"), stacklevel=3)
    for st in states:
        cands, lats = [], []
        for rec in database.records(st.task.key, fingerprint=kin):
            c = st.space.from_origin(rec.origin)
            if c is not None and json.loads(rec.origin)["policy"] != CONFIRMED:
                cands.append(c)
                lats.append(rec.latency)
        st.learn(cands, lats)


def _measure_defaults(states: list[TaskState], measurer: Measurer, commit: Callable[[Record], None],
                      from_defaults: bool) -> None:
    """Time each task's default schedule once: the untuned latency, the measurer's timeout scale, and (if
    `from_defaults`) the first candidate of the search."""
    todo = [st for st in states if not st.default_timed]
    inputs = [MeasureInput(st.task, st.space.trace(st.space.default())) for st in todo]

    def keep(k: int, r: MeasureResult) -> None:
        commit(Record.from_measurement(inputs[k], r, origin=todo[k].space.origin(todo[k].space.default(), "default")))

    for st, r in zip(todo, measurer.measure(inputs, keep) if inputs else []):
        if r.valid:
            st.note_timing(r.run_s)
        if from_defaults:
            st.observe([st.space.default()], [r.latency])
        st.default_s = r.latency
        st.default_timed = True
