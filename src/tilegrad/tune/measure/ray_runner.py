"""`RayRunner`: the `Runner` that times candidates on Ray devices (`ray_actors.Device`), several at a time.

Each device times one candidate at a time, exactly as `LocalRunner` does on this machine (it holds one), so the
results are the same values: a kernel that hangs comes back as "timeout after N s", one that crashes as "crash".
A device takes its candidates in batches, one call each, and streams each result back as it is timed
(`ray_pool.ActorPool.map_batches`), since a streamed result costs a fraction of a call. Each library is read
once per `run_all` and written to a device's disk once. Over that sits the pool's fault handling: a device that
dies mid-batch hands the candidate it was timing, and those it had not reached, to another device, and keeps
the results it sent; a device that stops answering (its machine, not its kernel, hangs) is killed once a
candidate takes the run's `timeout_s` plus `DEVICE_GRACE_S`, and that candidate is a timeout. Each candidate
gets exactly one result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ray

from ...config import Config
from ...errors import MeasureError
from ..task import Task
from .ray_actors import DeviceJob, TaskRefs, read_library
from .ray_pool import ActorPool
from .result import Built, MeasureInput, MeasureResult

# Beyond a run's own limit, what a device may take before it counts as hung: starting its timing worker (an
# interpreter importing tilegrad) and computing a checked candidate's reference do not count against the run.
DEVICE_GRACE_S = 150.0
_CALL_TIMEOUT_S = 60.0  # configuring a device


class RayRunner:
    """Times candidates on `devices` (`ray_actors.Device` handles), each configured with `LocalRunner(cfg,
    **timing)`; `run_all` keeps every device busy. The devices are not stopped by `close`: they belong to
    whoever registered them (`ray_cluster.register_device`)."""

    def __init__(self, devices: Sequence, cfg: Config, *, timeout_s: float = 10.0, **timing):
        self.timeout_s = timeout_s
        self._pool = ActorPool(list(devices))
        ray.get([d.configure.remote(cfg, {**timing, "timeout_s": timeout_s}) for d in devices],
                timeout=_CALL_TIMEOUT_S)
        fingerprints = ray.get([d.fingerprint.remote() for d in devices], timeout=_CALL_TIMEOUT_S)
        if len(set(fingerprints)) > 1:
            kinds = "; ".join(sorted(set(fingerprints)))
            raise MeasureError(f"the devices time on different machines or settings ({kinds}): register each kind "
                               f"of machine under a key of its own")
        self.fingerprint = fingerprints[0] if fingerprints else None  # the records of their timings carry it
        self._tasks = TaskRefs()

    @property
    def devices(self) -> list:
        """The devices still alive, as far as this runner has seen."""
        return list(self._pool.actors)

    def prepare(self, task: Task) -> None:
        for d in self._pool.actors:  # not awaited: a device runs its calls in order, so its next run waits for it
            d.prepare.remote(task.key, self._tasks.box(task))

    def run(self, inp: MeasureInput, built: Built, check: bool) -> MeasureResult:
        return self.run_all([(inp, built, check)])[0]

    def run_all(self, jobs: Sequence[tuple[MeasureInput, Built, bool]],
                on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        """One result per (input, built, check), in order; the jobs spread over the devices in batches (given to
        `on_result` once all are back)."""
        libraries = {path: read_library(path) for path in {built.library for _, built, _ in jobs}}
        device_jobs = [DeviceJob(inp.task.key, self._tasks.box(inp.task), inp.trace, *libraries[built.library],
                                 built.params, built.build_s, check) for inp, built, check in jobs]

        def failed(i: int, kind: str, detail: str) -> MeasureResult:
            build_s = jobs[i][1].build_s
            if kind == "timeout":
                return MeasureResult((), "timeout", f"the device stopped answering: {detail}", build_s)
            return MeasureResult((), "run", f"the device could not run it: {detail}", build_s)

        results = self._pool.map_batches(len(jobs), lambda device, batch: device.run_batch.remote(
            *[device_jobs[i] for i in batch]), lambda i: self.timeout_s + DEVICE_GRACE_S, failed)
        for i, r in enumerate(results if on_result is not None else ()):
            on_result(i, r)
        return results

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """As `LocalRunner.limit_by_default`, on every device (whose limits stay below `timeout_s`)."""
        for d in self._pool.actors:
            d.limit_by_default.remote(task.key, self._tasks.box(task), default_latency)

    def close(self) -> None:
        self._tasks = TaskRefs()
