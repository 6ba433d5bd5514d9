"""`RayBuilder`: the builder whose workers are Ray actors (`ray_actors.BuildWorker`), one CPU each.

Builds are CPU-bound and independent, so they spread over whichever workers are idle; each library comes back
as bytes and is written here, where the runner reads it. The workers are placed near the devices when told
(`nodes`, a soft preference): code built with `-march=native` is built for the machine it is built on. A worker
that dies is replaced and its build runs again elsewhere; one that hangs is killed after the build's limit plus
`WORKER_GRACE_S` and its candidate is a build timeout. Like `LocalBuilder`, a trace built before is not sent
again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import tempfile
from collections.abc import Sequence
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ...config import Config
from .builder import build_key
from .ray_actors import BuildWorker, TaskRefs
from .ray_pool import ActorPool
from .result import Built, MeasureInput, MeasureResult

# Beyond a build's own limit: a new worker's start (an interpreter importing tilegrad, then its build process).
WORKER_GRACE_S = 120.0


class RayBuilder:
    """`workers` Ray build workers (default: one per CPU of the cluster), each compiling with `cfg`, placed on
    `nodes` (Ray node ids) in turn where given."""

    def __init__(self, cfg: Config, *, workers: int | None = None, timeout_s: float = 60.0,
                 nodes: Sequence[str] = ()):
        self.cfg, self.timeout_s = cfg, timeout_s
        self._nodes = itertools.cycle(nodes) if nodes else None
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._pool = ActorPool([self._start() for _ in range(n)], replace=self._start)
        ray.get([w.ready.remote() for w in self._pool.actors], timeout=WORKER_GRACE_S)
        self._dir = tempfile.TemporaryDirectory(prefix="tilegrad-raybuild-")
        self._tasks = TaskRefs()
        self._built: dict[tuple, Built] = {}

    @property
    def workers(self) -> list:
        """The build workers now in the pool."""
        return list(self._pool.actors)

    def build(self, inputs: Sequence[MeasureInput]) -> list[Built | MeasureResult]:
        """Per input, its library (a file here), or the failed result it stands for."""
        keys = [build_key(inp) for inp in inputs]
        out: list[Built | MeasureResult | None] = [
            dataclasses.replace(self._built[k], build_s=0.0) if k in self._built else None for k in keys]
        misses = [i for i, b in enumerate(out) if b is None]

        def submit(worker, j: int):
            inp = inputs[misses[j]]
            return worker.build.remote(inp.task.key, self._tasks.box(inp.task), inp.trace, inp.source_override)

        def failed(j: int, kind: str, detail: str) -> tuple[MeasureResult, None]:
            return MeasureResult((), "timeout" if kind == "timeout" else "build", f"build {detail}"), None

        replies = self._pool.map(len(misses), submit, lambda j: self.timeout_s + WORKER_GRACE_S, failed)
        for i, (built, library) in zip(misses, replies):
            out[i] = built if library is None else self._keep(keys[i], built, library)
        return out

    def close(self) -> None:
        for w in self._pool.actors:
            ray.kill(w)
        self._dir.cleanup()

    def _keep(self, key: tuple, built: Built, library: bytes) -> Built:
        path = Path(self._dir.name) / f"{hashlib.sha256(library).hexdigest()[:32]}.so"
        path.write_bytes(library)
        self._built[key] = dataclasses.replace(built, library=str(path))
        return self._built[key]

    def _start(self):
        strategy = (NodeAffinitySchedulingStrategy(next(self._nodes), soft=True) if self._nodes is not None
                    else "DEFAULT")
        return BuildWorker.options(num_cpus=1, scheduling_strategy=strategy).remote(self.cfg, self.timeout_s)
