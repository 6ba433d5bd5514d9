"""The measurer: candidate schedules in, costs (or the reason there are none) out.

A batch is measured in two phases, so that no compiler competes with a timing for the cores:

1. **Build.** A pool of persistent build workers (`_builder.py`, one per core by default) replays each trace on
   its task's computation, lowers it, renders C and compiles it. The workers get a task as a pickled node whose
   weights are stripped (a tuning task needs shapes, not a model's parameters). A trace this measurer has built
   before is not sent again: re-timings measure the same few traces pass after pass.
2. **Run.** One persistent timing worker (`runtime/_runner.py`) times the built kernels one after another on the
   task's random inputs (`Task.random_inputs(seed)`, the same for every candidate of the task): warm-up, a
   calibration that makes a repeat last `min_repeat_s`, then `repeats` repeats, cycling over `placements` copies
   of the buffers at fixed page offsets (where buffers sit relative to each other moved one Winograd conv between
   0.54 and 1.10 ms; the median over placements is what a model's own buffer layout can expect). A sample of
   candidates (`check_fraction`, spread evenly, the first always) first runs once on poisoned outputs, which are
   compared with the task's NumPy reference. A candidate whose first warm call is `abandon_slower_than` times
   slower than the fastest this measurer has timed for its task (the task's default, once `limit_by_default` has
   named it) is timed no further: that call is its one cost (or the warm-up's, when it is twice past that bar). It
   cannot win, and on a task whose default is a hand-written kernel most random schedules are tens of times
   slower, so their repeats would fill the rounds.
   A repeat during which another process held the kernel's cores is taken again (`runtime/interference.py`).

Failures are values, never exceptions: `MeasureResult.error_kind` says at which stage a candidate failed.

    "lower"    the trace does not replay, lower or render (ScheduleError, LoweringError, ...)
    "build"    the C compiler rejected the source, or the build worker died
    "timeout"  the build or the run took longer than its limit; the worker is killed and restarted
    "crash"    the kernel killed the timing worker (SIGSEGV, abort); the next candidate gets a fresh worker
    "run"      the timing worker could not run it (a missing symbol, parameters that do not fit)
    "wrong"    the checked outputs differ from the reference
"""

from __future__ import annotations

import math
import os
import pickle
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import config
from ...config import Config
from ...ir.graph import Value
from ...runtime.timing import harness_library
from ...runtime.worker import Reply, Worker, call_all
from ...schedule import Trace
from ..task import Task

ERROR_KINDS = ("lower", "build", "timeout", "crash", "run", "wrong")
KERNEL_NAME = "candidate"  # the function every candidate's library defines (and a `source_override` must)

# (rtol, atol): atol is scaled by the largest reference magnitude, since reductions round differently per order
# and Winograd F(4x4, 3x3) transforms lose about 1e-3 of it by design.
_TOLERANCES = {"float32": (1e-3, 1e-3), "float16": (1e-2, 1e-2)}
_RUNNER_REQUESTS = 256  # a fresh timing worker after this many kernels, so loaded libraries do not pile up
# Once a task's default latency is known, a candidate whose timing runs past this many times what the default's
# would take is stopped as a timeout: it cannot win, and a random 1024^3 tiling can take seconds per call.
SLOWER_THAN_DEFAULT_LIMIT = 30.0
MIN_RUN_TIMEOUT_S = 1.0
# Calls shorter than this are never abandoned: a single call of a microsecond kernel is mostly thread wake-up.
ABANDON_FLOOR_S = 1e-3


@dataclass(frozen=True)
class MeasureInput:
    """A candidate: a concrete `trace` of `task`.

    `source_override` is a test hook: C source to compile instead of the trace's kernel (it must define
    `void candidate(void **args)` over the trace's parameters), so tests can measure kernels that crash or hang.
    """

    task: Task
    trace: Trace
    source_override: str | None = None


@dataclass(frozen=True)
class MeasureResult:
    """Seconds per call, one per repeat; or no costs and an `error_kind` from ERROR_KINDS with its `error`."""

    costs: tuple[float, ...]
    error_kind: str | None = None
    error: str | None = None
    build_s: float = 0.0
    run_s: float = 0.0
    checked: bool = False  # the outputs were compared with the reference
    abandoned: bool = False  # timed once only, being far slower than the task's fastest (one cost)

    @property
    def valid(self) -> bool:
        return self.error_kind is None

    @property
    def latency(self) -> float:
        """Median cost; infinite for a failed candidate, so failures sort last."""
        return statistics.median(self.costs) if self.valid and self.costs else math.inf


@dataclass(frozen=True)
class _Prepared:
    node: Path  # the task's node, weights stripped, pickled for the build workers
    inputs: Path  # its random inputs as .npz, for the timing worker
    arrays: list[np.ndarray]


class Measurer:
    """Builds candidates in parallel, then times them one by one in an isolated worker; see the module doc."""

    def __init__(
        self,
        *,
        builders: int | None = None,
        repeats: int = 3,
        warmup: int = 1,
        min_repeat_s: float = 0.02,
        placements: int = 3,
        timeout_s: float = 10.0,
        build_timeout_s: float = 60.0,
        check_fraction: float = 0.25,
        abandon_slower_than: float | None = 4.0,
        num_threads: int | None = None,
        seed: int = 0,
        cfg: Config | None = None,
    ):
        if repeats < 1 or warmup < 0 or not min_repeat_s >= 0 or not 0 <= check_fraction <= 1 or placements < 1:
            raise ValueError(f"need repeats >= 1, warmup >= 0, min_repeat_s >= 0, 0 <= check_fraction <= 1 and "
                             f"placements >= 1; got {repeats}, {warmup}, {min_repeat_s}, {check_fraction}, {placements}")
        if abandon_slower_than is not None and not abandon_slower_than > 1:
            raise ValueError(f"abandon_slower_than must be above 1 (or None, never); got {abandon_slower_than}")
        self.cfg = cfg or config.get()
        self.repeats, self.warmup, self.min_repeat_s, self.placements = repeats, warmup, min_repeat_s, placements
        self.timeout_s, self.build_timeout_s = timeout_s, build_timeout_s
        self.check_fraction = check_fraction
        self.abandon_slower_than = abandon_slower_than
        self.num_threads = num_threads or self.cfg.num_threads
        self.seed = seed
        self._dir = tempfile.TemporaryDirectory(prefix="tilegrad-measure-")
        cfg_path = Path(self._dir.name) / "config.pkl"
        cfg_path.write_bytes(pickle.dumps(self.cfg))
        self._harness = str(harness_library(self.cfg))
        self._builders = [Worker("tilegrad.tune.measure._builder", [cfg_path]) for _ in range(builders or os.cpu_count() or 1)]
        self._runner = Worker("tilegrad.runtime._runner")
        self._tasks: dict[str, _Prepared] = {}
        self._references: dict[str, list[np.ndarray]] = {}
        self._run_limits: dict[str, float] = {}
        self._fastest: dict[str, float] = {}  # per task key, the lowest latency timed in full
        self._measured = 0
        # What each trace built to: re-timings (`confirm.py`) measure the same traces again and again, and the
        # builder would lower each one anew (its compiler cache only skips the compiling).
        self._libraries: dict[tuple, dict] = {}

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """One result per input, in order. Builds the whole batch first, then times it."""
        checks = [self._sample_check() for _ in inputs]
        results: list[MeasureResult | None] = [None] * len(inputs)
        to_build = []
        for i, inp in enumerate(inputs):
            unbound = inp.trace.variables()
            if unbound:
                names = ", ".join(v.name for v in unbound)
                results[i] = MeasureResult((), "lower", f"the trace has unbound variables: {names}")
            else:
                to_build.append(i)
        for i in to_build:  # now, while the builds still separate it from any timing (see _reference)
            if checks[i]:
                self._reference(inputs[i].task, self._prepared(inputs[i].task))
        keys = {i: _build_key(inputs[i]) for i in to_build}
        built = {i: {**self._libraries[keys[i]], "build_s": 0.0} for i in to_build if keys[i] in self._libraries}
        misses = [i for i in to_build if i not in built]
        requests = [self._build_request(inputs[i]) for i in misses]
        for i, reply in zip(misses, call_all(self._builders, requests, self.build_timeout_s)):
            results[i] = _build_failure(reply)
            if results[i] is None:
                built[i] = self._libraries[keys[i]] = reply.value
        for i in to_build:  # timed in the order given (a re-timing pass shuffles it)
            if results[i] is None:
                results[i] = self._run(inputs[i], built[i], checks[i])
        return results

    def measure_one(self, task: Task, trace: Trace) -> MeasureResult:
        """Measure a single trace (benchmarks, the chosen schedule of a tuned task)."""
        return self.measure([MeasureInput(task, trace)])[0]

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """Time out this task's candidates once they run SLOWER_THAN_DEFAULT_LIMIT times longer than its default
        schedule would (warm-up, calibration and repeats included), never sooner than MIN_RUN_TIMEOUT_S; and
        abandon those `abandon_slower_than` times slower than the default, or than the fastest timed after this
        call (what earlier calls timed is forgotten, so tuning runs sharing a measurer do not help each other)."""
        if math.isfinite(default_latency) and default_latency > 0:
            runs = self.warmup + self.repeats + 2  # the calibration runs once at least; one more for the check
            expected = runs * max(default_latency, self.min_repeat_s)
            self._run_limits[task.key] = min(self.timeout_s,
                                             max(MIN_RUN_TIMEOUT_S, SLOWER_THAN_DEFAULT_LIMIT * expected))
            self._fastest[task.key] = default_latency  # a fresh start: tuning sessions sharing a measurer stay apart

    def close(self) -> None:
        """Stop the workers and remove the measurer's temporary files."""
        for w in [*self._builders, self._runner]:
            w.close()
        self._dir.cleanup()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals --
    def _sample_check(self) -> bool:
        n, f = self._measured, self.check_fraction
        self._measured += 1
        return math.ceil((n + 1) * f) > math.ceil(n * f)

    def _prepared(self, task: Task) -> _Prepared:
        prep = self._tasks.get(task.key)
        if prep is None:
            base = Path(self._dir.name) / task.key
            node_path, inputs_path = base.with_suffix(".node.pkl"), base.with_suffix(".inputs.npz")
            with open(node_path, "wb") as f:
                _WithoutWeights(f, protocol=pickle.HIGHEST_PROTOCOL).dump(task.node)
            arrays = task.random_inputs(self.seed)
            np.savez(inputs_path, *arrays)
            prep = self._tasks[task.key] = _Prepared(node_path, inputs_path, arrays)
        return prep

    def _build_request(self, inp: MeasureInput) -> dict:
        return {"task": str(self._prepared(inp.task).node), "trace": inp.trace.to_json(), "name": KERNEL_NAME,
                "source": inp.source_override}

    def _run(self, inp: MeasureInput, built: dict, check: bool) -> MeasureResult:
        prep = self._prepared(inp.task)
        outputs = Path(self._dir.name) / "outputs.npz"
        request = {"library": built["library"], "name": KERNEL_NAME, "params": built["params"],
                   "inputs": str(prep.inputs), "outputs": str(outputs) if check else None,
                   "harness": self._harness, "num_threads": self.num_threads, "warmup": self.warmup,
                   "repeats": self.repeats, "min_repeat_s": self.min_repeat_s, "placements": self.placements}
        fastest = self._fastest.get(inp.task.key)
        if self.abandon_slower_than is not None and fastest is not None and self.repeats > 1:  # one cost: abandoned
            request["abandon_above_s"] = max(ABANDON_FLOOR_S, self.abandon_slower_than * fastest)
        if self._runner.requests_served >= _RUNNER_REQUESTS:
            self._runner.close()
        reply = self._runner.call(request, self._run_limits.get(inp.task.key, self.timeout_s))
        build_s = built["build_s"]
        if reply.failure:
            return MeasureResult((), reply.failure, reply.detail, build_s, reply.wall_s)
        if "error" in reply.value:
            return MeasureResult((), "run", reply.value["error"], build_s, reply.wall_s)
        costs = tuple(float(c) for c in reply.value["costs"])
        if check:
            with np.load(outputs) as f:
                got = [f[f"arr_{k}"] for k in range(len(f.files))]
            problem = _mismatch(got, self._reference(inp.task, prep))
            if problem:
                self._runner.close()  # a kernel that computed garbage may have written over the worker's memory
                return MeasureResult((), "wrong", problem, build_s, reply.wall_s, checked=True)
        abandoned = len(costs) < self.repeats
        if not abandoned:
            self._note_fastest(inp.task, statistics.median(costs))
        return MeasureResult(costs, None, None, build_s, reply.wall_s, checked=check, abandoned=abandoned)

    def _note_fastest(self, task: Task, latency: float) -> None:
        if latency < self._fastest.get(task.key, math.inf):
            self._fastest[task.key] = latency

    def _reference(self, task: Task, prep: _Prepared) -> list[np.ndarray]:
        """The task's outputs by NumPy. Computed before a batch's builds: after a large matmul NumPy's BLAS threads
        spin for ~0.1 s, and a kernel timed then loses a core to them."""
        ref = self._references.get(task.key)
        if ref is None:
            ref = self._references[task.key] = task.reference(prep.arrays)
        return ref


class _WithoutWeights(pickle.Pickler):
    """Pickles a node with its constants' data left out: the build workers need only shapes and dtypes."""

    def reducer_override(self, obj):
        if type(obj) is Value and obj.data is not None:
            return Value, (obj.name, obj.type)  # memoised like any object, so identities within a body hold
        return NotImplemented


def _build_key(inp: MeasureInput) -> tuple:
    return inp.task.key, inp.trace.to_json(), inp.source_override


def _build_failure(reply: Reply) -> MeasureResult | None:
    """The failed result a build reply stands for, or None when it built."""
    if reply.failure == "timeout":
        return MeasureResult((), "timeout", f"build {reply.detail}", reply.wall_s)
    if reply.failure:
        return MeasureResult((), "build", f"the build worker died: {reply.detail}", reply.wall_s)
    if "failure" in reply.value:
        return MeasureResult((), reply.value["failure"], reply.value["error"], reply.wall_s)
    if "error" in reply.value:  # the worker itself failed (an unreadable task file)
        return MeasureResult((), "build", reply.value["error"], reply.wall_s)
    return None


def _mismatch(got: list[np.ndarray], want: list[np.ndarray]) -> str | None:
    """What differs between the kernel's outputs and the reference's, or None when they agree."""
    if len(got) != len(want):
        return f"the kernel wrote {len(got)} outputs, the reference computes {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, the reference's is {w.shape}"
        if g.dtype.kind == "f":
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
