"""Tuning a module with dynamic dimensions for a distribution of their values.

A kernel of the dynamic module runs at every value within the bounds, so its schedule should be the best on the
values it will see, not on one. The module's graph is built with the dimensions symbolic (as `compile(dynamic=)`
builds it); each kernel over them becomes one task per sample point (the node specialised there, `ir/specialize`),
and the tuner searches all of them, its task scheduler weighing each point's kernels as parts of one sum: the
total latency over the points. Then, per kernel, the best schedule of each point is timed at every other point
(what the search did not measure), as is the default rules' trace, and the schedule with the least mean latency
over the points is recorded under the symbolic kernel's own workload key, which `compile(dynamic=, db=)` replays
on the symbolic kernel (`kernel.lower_kernel`), as it replays the default rules' trace made at the representative
value.

The points are the values a user names for each dimension (`samples`), or by default SAMPLES values spaced
evenly in log scale between the bounds (the middles of equal log ranges); several dimensions take their k-th
values together.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import TilegradError
from ..kernel import representative_trace
from ..ir.compute import kernel_label, node_compute
from ..ir.graph import Graph
from ..ir.specialize import specialize_node
from ..te.dims import name_of, representative, variables
from ..te.flops import compute_flops
from ..te.tensor import topo_order
from .confirm import records_fingerprint
from .measure import Measurer
from .measure.result import MeasureInput
from .range_task import RangeTask
from .records import Database, Record
from .task import Task, extract_tasks, workload_key

SAMPLES = 3  # default points of a dynamic dimension
_log = logging.getLogger(__name__)


def sample_values(lo: int, hi: int, count: int = SAMPLES) -> list[int]:
    """`count` values between `lo` and `hi`, the middles of equal ranges in log scale, distinct."""
    lo = max(1, lo)
    return sorted({min(hi, max(lo, round(lo * (hi / lo) ** ((k + 0.5) / count)))) for k in range(count)})


def sample_points(graph: Graph, samples: Mapping[str, Sequence[int]] | None = None) -> list[dict[str, int]]:
    """The points (variable name -> value) the graph's dynamic dimensions are tuned at: each dimension's named
    `samples` (by the model's name for it) or `sample_values` of its bounds, the k-th of every dimension together."""
    dims = variables(v.shape for n in graph.nodes for v in (*n.inputs, *n.outputs))
    if not dims:
        raise TilegradError("tuning for a distribution of shapes needs dynamic dimensions; the graph has none")
    samples = dict(samples or {})
    unknown = set(samples) - {name_of(v) for v in dims}
    if unknown:
        raise TilegradError(f"samples names {sorted(unknown)}, which are not dynamic dimensions of the model; they "
                            f"are {sorted(name_of(v) for v in dims)}")
    values = {}
    for v in dims:
        given = samples.get(name_of(v))
        if given is not None and (not given or any(not int(v.lo) <= x <= int(v.hi) for x in given)):
            raise TilegradError(f"samples for {name_of(v)!r} must be values within its bounds {int(v.lo)} to "
                                f"{int(v.hi)}, got {list(given)}")
        values[v.name] = sorted(set(given)) if given is not None else sample_values(int(v.lo), int(v.hi))
    count = max(len(vs) for vs in values.values())
    return [{name: vs[min(k, len(vs) - 1)] for name, vs in values.items()} for k in range(count)]


class Kernel:
    """A kernel of the dynamic graph: its task (symbolic workload key) and its tasks at the sample points (the
    task itself, once, where no dimension reaches it)."""

    def __init__(self, task: Task, points: Sequence[dict[str, int]]):
        self.task = task
        self.outputs = node_compute(task.node)[1]
        self.dims = variables(t.shape for t in topo_order(self.outputs))
        self.dynamic = bool(self.dims)
        self.points = list(points)
        self.at_points = [_specialized(task, p) for p in points] if self.dynamic else [task]

    def as_range_task(self) -> RangeTask:
        """The kernel as one task over all the points (`range_task.py`), its sketches made at the dimensions'
        representative values."""
        middle = {v.name: representative(v) for v in self.dims}
        return RangeTask.of(self.task, self.points, self.at_points, _specialized(self.task, middle))

    def default_trace(self):
        """The trace compile replays on the symbolic kernel without records (the default rules at the
        representative value)."""
        return representative_trace(self.outputs, self.dims, self.task.target)


def _specialized(task: Task, point: dict[str, int]) -> Task:
    nodes = [specialize_node(n, point) for n in task.nodes]
    outputs = node_compute(nodes[0])[1]
    return Task(workload_key(outputs), kernel_label(nodes[0], outputs), nodes, compute_flops(outputs),
                target=task.target)


def kernels_of(graph: Graph, points: Sequence[dict[str, int]]) -> list[Kernel]:
    """The graph's kernels at the points, less those whose inputs the measurements cannot draw at random (a fused
    gather whose indices the module computes at run time from the dimensions: a random index falls outside the
    data), which keep the default rules."""
    kernels = [Kernel(t, points) for t in extract_tasks(graph)]
    return [k for k in kernels if all(_drawable(t) for t in k.at_points)]


def _drawable(task: Task) -> bool:
    try:
        task.reference(task.random_inputs())
    except (IndexError, ValueError) as exc:
        _log.info("%s is left to the default rules: its inputs cannot be drawn at random (%s)", task.name, exc)
        return False
    return True


def point_tasks(kernels: Sequence[Kernel]) -> list[Task]:
    """Every kernel's tasks at the points, one per workload (two kernels may meet at a point)."""
    tasks: dict[str, Task] = {}
    for k in kernels:
        for t in k.at_points:
            tasks.setdefault(t.key, t)
    return list(tasks.values())


def choose_for_distribution(kernels: Sequence[Kernel], db: str | Path, measurer: Measurer) -> dict[str, float]:
    """Per dynamic kernel, the schedule with the least mean latency over the points among the best of each point,
    timing each at the points where it was not measured; recorded under the kernel's symbolic key. Returns
    kernel key -> that mean latency in seconds (kernels no point has a valid record of are left out)."""
    chosen = {}
    tasks = [t for k in kernels for t in k.at_points]
    with Database(db, fingerprint=records_fingerprint(measurer, tasks)) as database:
        for k in kernels:
            if not k.dynamic:
                continue
            default = k.default_trace()
            candidates = {default.to_json(): default}  # what compile builds without the records: never worse
            for t in k.at_points:
                best = database.best(t.key)
                if best is not None and best.valid:
                    candidates.setdefault(best.trace_json, best.trace)
            latency = {(t.key, trace): math.inf for t in k.at_points for trace in candidates}
            for t in k.at_points:
                for r in database.records(t.key):
                    if (t.key, r.trace_json) in latency:
                        latency[t.key, r.trace_json] = min(latency[t.key, r.trace_json], r.latency)
            missing = [MeasureInput(t, candidates[trace]) for t in k.at_points for trace in candidates
                       if math.isinf(latency[t.key, trace])]
            for inp, result in zip(missing, measurer.measure(missing) if missing else []):
                database.add(Record.from_measurement(inp, result, origin="distribution"))
                latency[inp.task.key, inp.trace.to_json()] = result.latency if result.valid else math.inf
            mean = {trace: statistics.fmean(latency[t.key, trace] for t in k.at_points) for trace in candidates}
            trace = min(mean, key=mean.get)
            if math.isfinite(mean[trace]):
                database.add(Record(k.task.key, k.task.name, trace, (mean[trace],), origin="distribution"))
                chosen[k.task.key] = mean[trace]
    return chosen
