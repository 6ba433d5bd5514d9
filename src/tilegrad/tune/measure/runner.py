"""Timing built candidates: the `Runner` protocol, and `LocalRunner`, which times them on this machine.

`LocalRunner` keeps one persistent timing worker (`runtime/_runner.py`) that times the built kernels one after
another on the task's random inputs (`Task.random_inputs(seed)`, the same for every candidate of the task):
warm-up, a calibration that makes a repeat last `min_repeat_s`, then `repeats` repeats, cycling over `placements`
copies of the buffers at fixed page offsets (where buffers sit relative to each other moves some kernels' times
by a factor of two; the median over placements is what a model's own buffer layout can expect). Before each timed
call the kernel's weights are evicted from every cache (`cold`, TVM's `enable_cpu_cache_flush` does the same): in
a model call they were pushed out by the other kernels' weights since the last call, while the activations sit
where their producer just wrote them. Timed warm, a candidate that keeps its weights in L2 across calls looks
faster than it runs in the model, and the tuner picks it (docs/tuning.md has the figures). A checked
candidate first runs once on poisoned outputs, which are compared with the task's NumPy reference. A candidate
whose first warm call is `abandon_slower_than` times slower than the fastest this runner has timed for its task
(the task's default, once `limit_by_default` has named it) is timed no further: that call is its one cost (or the
warm-up's, when it is twice past that bar). It cannot win, and on a task whose default is a hand-written kernel
most random schedules are tens of times slower, so their repeats would fill the rounds. A repeat during which
another process held the kernel's cores is taken again (`runtime/interference.py`). The worker's threads are pinned
one to a CPU each (`pinned_team`).

Another runner (devices on a Ray cluster: `ray_runner.py`) implements the same five methods.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from ...config import Config
from ...dtype import is_float
from ...runtime.timing import MAX_SPREAD, harness_library, spread
from ...runtime.worker import Worker
from ..task import Task
from .result import KERNEL_NAME, Built, MeasureInput, MeasureResult

# (rtol, atol): atol is scaled by the largest reference magnitude, since reductions round differently per order
# and Winograd F(4x4, 3x3) transforms lose about 1e-3 of it by design.
_TOLERANCES = {"float32": (1e-3, 1e-3), "float16": (1e-2, 1e-2), "bfloat16": (2**-6, 2**-6)}
_RUNNER_REQUESTS = 256  # a fresh timing worker after this many kernels, so loaded libraries do not pile up
# Once a task's default latency is known, a candidate whose timing runs past this many times what the default's
# would take is stopped as a timeout: it cannot win, and a random 1024^3 tiling can take seconds per call.
SLOWER_THAN_DEFAULT_LIMIT = 30.0
MIN_RUN_TIMEOUT_S = 1.0
# Calls shorter than this are never abandoned: a single call of a microsecond kernel is mostly thread wake-up.
ABANDON_FLOOR_S = 1e-3
COLD = ("weights", "all", "none")  # which buffers a timed call finds out of cache: the constants', every one, none


def pinned_team() -> dict[str, str]:
    """The OpenMP settings that give each of the timing worker's threads a CPU of its own (unless the environment
    binds them its own way). Unbound, a team thread woken after an idle spell may be placed on the CPU of the
    thread that woke it (seen on a 2-vCPU KVM guest, the other CPU idle) and stay there for tens of milliseconds,
    until the load balancer moves it: the two threads then take turns at every barrier, and a fast kernel times
    many times slower than it runs and is abandoned (docs/tuning.md has the figures)."""
    if "OMP_PROC_BIND" in os.environ or "OMP_PLACES" in os.environ:
        return {}
    return {"OMP_PROC_BIND": "spread", "OMP_PLACES": "threads"}


class Runner(Protocol):
    """Times built candidates in the order given: one at a time (`LocalRunner`), or several at once on as many
    devices (`ray_runner.RayRunner`)."""

    def prepare(self, task: Task) -> None:
        """A candidate of `task` will be checked: called before its batch is built, so that a runner computes
        what it compares with while nothing is being timed."""
        ...

    def run(self, inp: MeasureInput, built: Built, check: bool) -> MeasureResult:
        """Time `built`, the library of `inp`; with `check`, compare its outputs with the task's reference."""
        ...

    def run_all(self, jobs: Sequence[tuple[MeasureInput, Built, bool]],
                on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        """`run` of each (input, built, check), results in order (the measurer's run phase); each result is
        also given to `on_result` (with its job's index) as soon as it is known, so that a caller can keep it
        before the batch ends."""
        ...

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """The task's default schedule takes `default_latency` seconds: a bound for its candidates' timeouts."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class _Inputs:
    path: Path  # the task's random inputs as .npz, for the timing worker
    arrays: list[np.ndarray]


def run_each(runner: Runner, jobs: Sequence[tuple[MeasureInput, Built, bool]],
             on_result: Callable[[int, MeasureResult], None] | None) -> list[MeasureResult]:
    """`run_all` for a runner that times one candidate at a time: `runner.run` of each job, in order."""
    results = []
    for i, job in enumerate(jobs):
        results.append(runner.run(*job))
        if on_result is not None:
            on_result(i, results[-1])
    return results


class LocalRunner:
    """Times candidates in an isolated worker process on this machine; see the module doc."""

    def __init__(
        self,
        cfg: Config,
        *,
        repeats: int = 3,
        warmup: int = 1,
        min_repeat_s: float = 0.02,
        placements: int = 3,
        timeout_s: float = 10.0,
        abandon_slower_than: float | None = 4.0,
        cold: str = "weights",
        num_threads: int | None = None,
        seed: int = 0,
    ):
        if repeats < 1 or warmup < 0 or not min_repeat_s >= 0 or placements < 1:
            raise ValueError(f"need repeats >= 1, warmup >= 0, min_repeat_s >= 0 and placements >= 1; got "
                             f"{repeats}, {warmup}, {min_repeat_s}, {placements}")
        if abandon_slower_than is not None and not abandon_slower_than > 1:
            raise ValueError(f"abandon_slower_than must be above 1 (or None, never); got {abandon_slower_than}")
        self.repeats, self.warmup, self.min_repeat_s, self.placements = repeats, warmup, min_repeat_s, placements
        self.timeout_s = timeout_s
        self.abandon_slower_than = abandon_slower_than
        if cold not in COLD:
            raise ValueError(f"cold must be one of {', '.join(COLD)}; got {cold!r}")
        self.cold = cold
        self.num_threads = num_threads or cfg.num_threads
        self.seed = seed
        self._dir = tempfile.TemporaryDirectory(prefix="tilegrad-run-")
        self._harness = str(harness_library(cfg))
        self._worker = Worker("tilegrad.runtime._runner", env=pinned_team())
        self._inputs: dict[str, _Inputs] = {}
        self._references: dict[str, list[np.ndarray]] = {}
        self._run_limits: dict[str, float] = {}
        self._fastest: dict[str, float] = {}  # per task key, the lowest latency timed in full

    def prepare(self, task: Task) -> None:
        self._reference(task)

    def run(self, inp: MeasureInput, built: Built, check: bool) -> MeasureResult:
        prep = self._task_inputs(inp.task)
        outputs = Path(self._dir.name) / "outputs.npz"
        request = {"library": built.library, "name": KERNEL_NAME, "params": built.params,
                   "inputs": str(prep.path), "outputs": str(outputs) if check else None,
                   "harness": self._harness, "num_threads": self.num_threads, "warmup": self.warmup,
                   "repeats": self.repeats, "min_repeat_s": self.min_repeat_s, "placements": self.placements,
                   "cold": cold_parameters(inp.task, self.cold)}
        fastest = self._fastest.get(inp.task.key)
        if self.abandon_slower_than is not None and fastest is not None and self.repeats > 1:  # one cost: abandoned
            request["abandon_above_s"] = max(ABANDON_FLOOR_S, self.abandon_slower_than * fastest)
        if self._worker.requests_served >= _RUNNER_REQUESTS:
            self._worker.close()
        reply = self._worker.call(request, self._run_limits.get(inp.task.key, self.timeout_s))
        build_s = built.build_s
        if reply.failure:
            return MeasureResult((), reply.failure, reply.detail, build_s, reply.wall_s)
        if "error" in reply.value:
            return MeasureResult((), "run", reply.value["error"], build_s, reply.wall_s)
        costs = tuple(float(c) for c in reply.value["costs"])
        if check:
            with np.load(outputs) as f:
                got = [f[f"arr_{k}"] for k in range(len(f.files))]
            problem = mismatch(got, self._reference(inp.task))
            if problem:
                self._worker.close()  # a kernel that computed garbage may have written over the worker's memory
                return MeasureResult((), "wrong", problem, build_s, reply.wall_s, checked=True)
        abandoned = len(costs) < self.repeats
        if not abandoned:
            self._note_fastest(inp.task, statistics.median(costs))
        return MeasureResult(costs, None, None, build_s, reply.wall_s, checked=check, abandoned=abandoned,
                             noisy=spread(costs) > MAX_SPREAD)

    def run_all(self, jobs: Sequence[tuple[MeasureInput, Built, bool]],
                on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        return run_each(self, jobs, on_result)

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """Time out this task's candidates once they run SLOWER_THAN_DEFAULT_LIMIT times longer than its default
        schedule would (warm-up, calibration and repeats included), never sooner than MIN_RUN_TIMEOUT_S; and
        abandon those `abandon_slower_than` times slower than the default, or than the fastest timed after this
        call (what earlier calls timed is forgotten, so tuning runs sharing a runner do not help each other)."""
        if math.isfinite(default_latency) and default_latency > 0:
            runs = self.warmup + self.repeats + 2  # the calibration runs once at least; one more for the check
            expected = runs * max(default_latency, self.min_repeat_s)
            self._run_limits[task.key] = min(self.timeout_s,
                                             max(MIN_RUN_TIMEOUT_S, SLOWER_THAN_DEFAULT_LIMIT * expected))
            self._fastest[task.key] = default_latency  # a fresh start: tuning sessions sharing a runner stay apart

    def close(self) -> None:
        self._worker.close()
        self._dir.cleanup()

    def _task_inputs(self, task: Task) -> _Inputs:
        prep = self._inputs.get(task.key)
        if prep is None:
            path = Path(self._dir.name) / f"{task.key}.inputs.npz"
            arrays = task.random_inputs(self.seed)
            np.savez(path, *arrays)
            prep = self._inputs[task.key] = _Inputs(path, arrays)
        return prep

    def _note_fastest(self, task: Task, latency: float) -> None:
        if latency < self._fastest.get(task.key, math.inf):
            self._fastest[task.key] = latency

    def _reference(self, task: Task) -> list[np.ndarray]:
        """The task's outputs by NumPy. Computed before a batch's builds (`prepare`): after a large matmul NumPy's
        BLAS threads spin for a while, and a kernel timed then loses a core to them."""
        ref = self._references.get(task.key)
        if ref is None:
            ref = self._references[task.key] = task.reference(self._task_inputs(task).arrays)
        return ref


def cold_parameters(task: Task, cold: str) -> list[int]:
    """The parameters of `task`'s kernel that a timed call finds out of cache (COLD)."""
    inputs = task.node.inputs
    if cold == "all":
        return list(range(len(inputs) + len(task.node.outputs)))
    if cold == "weights":
        return [i for i, v in enumerate(inputs) if v.is_constant]
    return []


def mismatch(got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    """What differs between the kernel's outputs and the reference's, or None when they agree."""
    if len(got) != len(want):
        return f"the kernel wrote {len(got)} outputs, the reference computes {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, the reference's is {w.shape}"
        if is_float(str(g.dtype)):  # bfloat16 too, whose NumPy kind is "V"
            rtol, atol = _TOLERANCES.get(str(g.dtype), _TOLERANCES["float32"])
            w64 = w.astype(np.float64)
            scale = max(1.0, float(np.max(np.abs(w64[np.isfinite(w64)]), initial=0.0)))
            bad = ~np.isclose(g.astype(np.float64), w64, rtol=rtol, atol=atol * scale, equal_nan=True)
        else:
            bad = g != w.astype(g.dtype)
        if bad.any():
            at = tuple(int(i) for i in np.unravel_index(np.argmax(bad), bad.shape))
            return (f"output {k}: {int(bad.sum())} of {bad.size} elements differ from the reference; "
                    f"first at {at}: got {g[at]!r}, want {w[at]!r}")
    return None
