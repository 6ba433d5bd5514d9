"""Confirming the best records: each task's few fastest records are timed again beside its default schedule
before one of them becomes the schedule `tilegrad.compile(..., db=...)` uses.

A task's fastest record is the minimum over hundreds of single timings, each with the machine's noise, so it is
partly a lucky timing (the winner's curse): on ResNet-50 the tuner's estimate promised 6-24% less latency and
the compiled model ran no faster. Here the candidates of every task are timed `passes` times, each pass one
batch over all tasks (so a slow spell of the machine is spread over all candidates), and the candidate with the
lowest median wins. The winner is appended as a record whose origin names the policy "confirm"; the database
prefers the newest such record of a task over its fastest one.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from ..schedule.trace import Trace
from .measure import MeasureInput, Measurer, MeasureResult
from .records import CONFIRMED, Database, Record
from .task import Task


def confirm_best(tasks: Sequence[Task], db: str | Path, measurer: Measurer, *, top: int = 3,
                 passes: int = 3) -> dict[str, tuple[float, float]]:
    """Time each task's `top` fastest records and its default schedule `passes` times; append the winner of
    each task as a confirmed record. Returns task key -> (default's median, winner's median) in seconds."""
    out: dict[str, tuple[float, float]] = {}
    with Database(db) as database:
        entries: list[tuple[Task, str, str]] = []  # (task, trace JSON, origin)
        for task in tasks:
            default = task.default_trace().to_json()
            origin = next((r.origin for r in database.records(task.key) if r.trace_json == default), "")
            traces = {default: origin}
            for rec in database.top(task.key, 4 * top):
                if len(traces) > top:
                    break
                traces.setdefault(rec.trace_json, rec.origin)
            if len(traces) > 1:
                entries += [(task, trace, origin) for trace, origin in traces.items()]
        if not entries:
            return out
        inputs = [MeasureInput(task, Trace.from_json(trace)) for task, trace, _ in entries]
        timings: list[list[MeasureResult]] = [[] for _ in entries]
        for _ in range(passes):
            for i, r in enumerate(measurer.measure(inputs)):
                timings[i].append(r)
        by_task: dict[str, list[tuple[float, int]]] = {}
        for i, (task, _, _) in enumerate(entries):
            ok = [r.latency for r in timings[i] if r.valid]
            median = statistics.median(ok) if len(ok) == passes else float("inf")
            by_task.setdefault(task.key, []).append((median, i))
        for key, scored in by_task.items():
            default_median = scored[0][0]  # the default schedule comes first in each task's entries
            median, i = min(scored)
            if median == float("inf"):
                continue
            task, _, origin = entries[i]
            costs = tuple(r.latency for r in timings[i])
            database.add(Record.from_measurement(inputs[i], MeasureResult(costs), origin=_confirmed(origin)))
            out[key] = (default_median, median)
    return out


def _confirmed(origin: str) -> str:
    """The origin of a confirmed record: the candidate's own (sketch and parameters, so a rerun recovers it),
    its policy replaced."""
    try:
        obj = json.loads(origin)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        obj = {}
    return json.dumps({"policy": CONFIRMED, **{k: v for k, v in obj.items() if k != "policy"}})
