"""What runs on the Ray cluster: a device that times candidates, and a build worker that compiles them.

Both wrap the local machinery, so a candidate is measured the same way wherever it runs: a `Device` holds a
`LocalRunner` (its isolated timing worker survives crashing and hanging kernels and reports them as results),
a `BuildWorker` a one-process `LocalBuilder`. A device is pinned to its cores with `os.sched_setaffinity`, which
its timing worker inherits, and times with as many threads as it has cores. It times at niceness 0 where it may
(`_ordinary_niceness`): Ray starts its workers at 15 (its `worker_niceness`), and a kernel timed there loses its
cores to every process that wakes, Ray's own daemons included.

A device takes its candidates in batches (`Device.run_batch`, one call, a result streamed back per candidate).
Tasks travel once per actor: the caller puts a task in the object store and passes `[reference]` (a list, so
Ray hands over the reference and the actor fetches the task only the first time it sees the task's key).
Libraries travel as bytes inside the call (a device may be on another machine than the builder), named by their
digest, and a device writes each to its disk once. Each library is new to the device that times it, and a
fetch from the object store costs more than the bytes of a small library in the call (docs/tuning.md).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import ray

from ...config import Config
from ...schedule import Trace
from ...target import host
from ..records import machine_fingerprint
from ..task import Task
from .builder import LocalBuilder
from .result import Built, MeasureInput, MeasureResult
from .runner import LocalRunner

TaskBox = list  # [ray.ObjectRef of a Task]


@dataclasses.dataclass(frozen=True)
class DeviceJob:
    """One candidate for a device: its task (by key, boxed), trace, library (its digest and bytes), the library's
    parameters and build seconds, and whether to check its outputs."""

    task_key: str
    task: TaskBox
    trace: Trace
    digest: str
    library: bytes
    params: list
    build_s: float
    check: bool


class TaskRefs:
    """The caller's side: each task put in the object store once, handed over as a `TaskBox`."""

    def __init__(self):
        self._boxes: dict[str, TaskBox] = {}

    def box(self, task: Task) -> TaskBox:
        box = self._boxes.get(task.key)
        if box is None:
            box = self._boxes[task.key] = [ray.put(task)]
        return box


def read_library(path: str) -> tuple[str, bytes]:
    """A library file's digest (which names it on a device's disk) and bytes."""
    library = Path(path).read_bytes()
    return hashlib.sha256(library).hexdigest()[:32], library


class _Tasks:
    """The actor's side: tasks by key, each fetched from the object store once."""

    def __init__(self):
        self._tasks: dict[str, Task] = {}

    def get(self, key: str, box: TaskBox) -> Task:
        task = self._tasks.get(key)
        if task is None:
            task = self._tasks[key] = ray.get(box[0])
        return task


def _ordinary_niceness() -> None:
    """Time at niceness 0 rather than Ray's 15, where allowed (lowering it needs root or a raised RLIMIT_NICE;
    `describe` says which a device got). On Linux this sets the calling thread's, which the timing worker it
    starts inherits."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, 0)


@ray.remote
class Device:
    """Times candidates on `cores` of its machine (all of them when None); `configure` before the first batch."""

    def __init__(self, cores: list[int] | None):
        if cores:
            os.sched_setaffinity(0, cores)
        _ordinary_niceness()
        self.cores = sorted(os.sched_getaffinity(0))
        self._runner: LocalRunner | None = None
        self._cfg: Config | None = None
        self._tasks = _Tasks()
        self._dir = tempfile.TemporaryDirectory(prefix="tilegrad-device-")

    def describe(self) -> dict:
        """Where it is and what it is: host, Ray node, cores, the niceness it times at and the machine's
        identity."""
        return {"host": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(),
                "cores": self.cores, "niceness": os.getpriority(os.PRIO_PROCESS, 0), "identity": host().identity()}

    def configure(self, cfg: Config, timing: dict) -> None:
        """Time with `LocalRunner(cfg, **timing)` from now on (with a thread per core unless `timing` says how many),
        forgetting the limits of an earlier tuning run."""
        if self._runner is not None:
            self._runner.close()
        self._runner = LocalRunner(cfg, **{"num_threads": len(self.cores), **timing})
        self._cfg = cfg

    def fingerprint(self) -> str:
        """What its timings depend on besides the kernel (`records.machine_fingerprint`): this machine, the
        configured compiler and flags, and the threads it times with."""
        return machine_fingerprint(dataclasses.replace(self._cfg, num_threads=self._runner.num_threads))

    def prepare(self, key: str, box: TaskBox) -> None:
        self._runner.prepare(self._tasks.get(key, box))

    def limit_by_default(self, key: str, box: TaskBox, default_latency: float) -> None:
        self._runner.limit_by_default(self._tasks.get(key, box), default_latency)

    @ray.method(num_returns="streaming")
    def run_batch(self, *jobs: DeviceJob) -> Iterator[MeasureResult]:
        """Each job's result as soon as it is timed, in order. The jobs are arguments of their own, so that Ray
        keeps each inside the call (it moves an argument over 100 KB to the object store)."""
        for job in jobs:
            built = Built(self._library(job.digest, job.library), job.params, job.build_s)
            yield self._runner.run(MeasureInput(self._tasks.get(job.task_key, job.task), job.trace), built,
                                   job.check)

    def _library(self, digest: str, library: bytes) -> str:
        """The library's file on this device's disk, written the first time its digest is seen."""
        path = Path(self._dir.name) / f"{digest}.so"
        if not path.exists():
            path.write_bytes(library)
        return str(path)


@ray.remote
class BuildWorker:
    """Compiles candidates with `cfg` in one build process; returns each library's bytes."""

    def __init__(self, cfg: Config, timeout_s: float):
        self._builder = LocalBuilder(cfg, workers=1, timeout_s=timeout_s)
        self._tasks = _Tasks()

    def ready(self) -> bool:
        return True

    def build(self, key: str, box: TaskBox, trace: Trace,
              source_override: str | None) -> tuple[Built | MeasureResult, bytes | None]:
        (built,) = self._builder.build([MeasureInput(self._tasks.get(key, box), trace, source_override)])
        if isinstance(built, MeasureResult):
            return built, None
        return built, Path(built.library).read_bytes()
