"""Confirming the best records: a candidate counts as a task's best only after it is timed again beside the
one it would replace.

A task's fastest record is the minimum over hundreds of single timings, each with the machine's noise, so it is
partly a lucky timing (the winner's curse): the tuner's estimate then promises more than the compiled model
delivers, the more so for a search that measures many near-identical candidates, since it collects the
luckiest timing of them. Here the
contenders are timed `passes` times, each pass one batch over all of them (so a slow spell of the machine is
spread over all), and the contender with the lowest median wins. The winner is appended as a record whose origin
names the policy "confirm"; the database prefers the newest such record of a task over its fastest one.

Two stages use this. During a search, a round's fastest new candidate that beats the task's best is re-timed
beside that best (`tuner._challenge`), so the best-so-far curve is made of confirmed figures, not of lucky minima. After
the search, `confirm_best` re-times each task's few fastest records, the search's confirmed best and the default
schedule, and keeps the winner for `tilegrad.compile(..., db=...)`.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..schedule.trace import Trace
from .measure import MeasureInput, Measurer, MeasureResult
from .records import CONFIRMED, Database, Record, target_fingerprint
from .task import Task

PASSES = 3  # re-timings of each contender in the final confirmation


def records_fingerprint(measurer: Measurer, tasks: Sequence[Task]) -> str:
    """The fingerprint that `measurer`'s timings of `tasks` carry in the records: the measuring machines' where
    they are elsewhere (a Ray cluster's devices), else the target's (this CPU, or this machine's GPU)."""
    return measurer.fingerprint or target_fingerprint(tasks[0].target if tasks else None)


def confirm_best(tasks: Sequence[Task], db: str | Path, measurer: Measurer, *, top: int = 3,
                 passes: int = PASSES, deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> dict[str, tuple[float, float]]:
    """Time each task's `top` fastest records, its standing confirmed record and its default schedule `passes`
    times; append the winner of each task as a confirmed record. The tasks go heaviest first (weight x best
    latency), and none is begun once `clock()` reaches `deadline`: those keep the search's confirmed best.
    Returns task key -> (default's median, winner's median) in seconds."""
    out: dict[str, tuple[float, float]] = {}
    with Database(db, fingerprint=records_fingerprint(measurer, tasks)) as database:
        def heaviness(task: Task) -> float:
            rec = database.best(task.key)
            return task.weight * rec.latency if rec is not None else 0.0

        for task in sorted(tasks, key=heaviness, reverse=True):
            if deadline is not None and clock() >= deadline:
                break
            default = task.default_trace().to_json()
            origin = next((r.origin for r in database.records(task.key) if r.trace_json == default), "")
            traces = {default: origin}
            fastest: dict[str, Record] = {}  # distinct traces, fastest first
            for rec in database.top(task.key, 4 * top):
                if rec.trace_json != default:
                    fastest.setdefault(rec.trace_json, rec)
            standing = database.best(task.key)  # the search's confirmed best, if it confirmed one
            for rec in [*list(fastest.values())[:top], *([standing] if standing is not None else [])]:
                traces.setdefault(rec.trace_json, rec.origin)
            if len(traces) == 1:
                continue
            inputs = [MeasureInput(task, Trace.from_json(trace)) for trace in traces]
            timings = retime(measurer, inputs, passes)
            medians = [median_latency(rs) for rs in timings]
            median, i = min(zip(medians, range(len(inputs))))  # the default comes first
            if math.isinf(median):
                continue
            database.add(Record.from_measurement(inputs[i], MeasureResult(tuple(r.latency for r in timings[i])),
                                                 origin=confirmed_origin(list(traces.values())[i])))
            out[task.key] = (medians[0], median)
    return out


def retime(measurer: Measurer, inputs: Sequence[MeasureInput], passes: int, seed: int = 0) -> list[list[MeasureResult]]:
    """Each input timed `passes` times, each pass one batch over all inputs in a shuffled order (so neither a slow
    spell of the machine nor a place in the batch favours one input); per input, its results in pass order."""
    rng = random.Random(seed)
    timings: list[list[MeasureResult]] = [[] for _ in inputs]
    for _ in range(passes):
        order = rng.sample(range(len(inputs)), len(inputs))
        for i, r in zip(order, measurer.measure([inputs[i] for i in order])):
            timings[i].append(r)
    return timings


def median_latency(results: Sequence[MeasureResult]) -> float:
    """The median over re-timings; inf unless every one of them worked."""
    if not results or not all(r.valid for r in results):
        return math.inf
    return statistics.median(r.latency for r in results)


def confirmed_origin(origin: str) -> str:
    """The origin of a confirmed record: the candidate's own (sketch and parameters, so a rerun recovers it),
    its policy replaced."""
    try:
        obj = json.loads(origin)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        obj = {}
    return json.dumps({"policy": CONFIRMED, **{k: v for k, v in obj.items() if k != "policy"}})
