"""What a measurement takes and gives: a candidate trace of a task in, its costs (or why there are none) out.

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
import statistics
from dataclasses import dataclass

from ...schedule import Trace
from ..task import Task

ERROR_KINDS = ("lower", "build", "timeout", "crash", "run", "wrong")
KERNEL_NAME = "candidate"  # the function every candidate's library defines (and a `source_override` must)


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
    noisy: bool = False  # its repeats spread more than timing.MAX_SPREAD of their median, even doubled in number

    @property
    def valid(self) -> bool:
        return self.error_kind is None

    @property
    def latency(self) -> float:
        """Median cost; infinite for a failed candidate, so failures sort last."""
        return statistics.median(self.costs) if self.valid and self.costs else math.inf


@dataclass(frozen=True)
class Built:
    """A candidate's kernel library, as the builder made it: where it is, its parameters (name, shape, dtype)
    in call order, and the seconds its build took (0 when it was built before)."""

    library: str
    params: list
    build_s: float
    launch: tuple | None = None  # a GPU kernel's (grid, block); its library is then a PTX file
