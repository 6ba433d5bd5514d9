"""The measurer: candidate schedules in, costs (or the reason there are none) out.

A batch is measured in two phases, so that no compiler competes with a timing for the cores:

1. **Build.** The builder (`builder.py`; `ray_builder.py` on a Ray cluster) replays, lowers, renders and compiles
   each candidate in parallel.
2. **Run.** A `Runner` (`runner.py`; by default `LocalRunner`, an isolated timing worker on this machine;
   `ray_runner.py` on devices of a Ray cluster) times the built kernels (`run_all`: one after another on one
   device, side by side on several). A sample of candidates (`check_fraction`, spread evenly, the first always)
   also has its outputs compared with the task's NumPy reference.

Failures are values (`result.py`): a crashing, hanging or wrong candidate is a result with its `error_kind`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ... import config
from ...config import Config
from ...schedule import Trace
from ..task import Task
from .builder import Builder, LocalBuilder
from .result import MeasureInput, MeasureResult
from .runner import LocalRunner, Runner


class Measurer:
    """Builds candidates with `builder` (default: a `LocalBuilder` of `builders` workers), then times them with
    `runner`.

    A `builder` (an object with `build(inputs)` and `close()`, such as `cuda.CudaBuilder`) replaces the local
    build workers. Without a `runner`, a `LocalRunner` is made with `timing` (its keyword settings: `repeats`, `warmup`,
    `min_repeat_s`, `placements`, `timeout_s`, `abandon_slower_than`, `cold`, `num_threads`, `seed`).
    """

    def __init__(self, *, runner: Runner | None = None, builder: Builder | None = None, builders: int | None = None,
                 build_timeout_s: float = 60.0, check_fraction: float = 0.25, cfg: Config | None = None, **timing):
        if not 0 <= check_fraction <= 1:
            raise ValueError(f"need 0 <= check_fraction <= 1; got {check_fraction}")
        self.cfg = cfg or config.get()
        self.check_fraction = check_fraction
        self.runner = runner or LocalRunner(self.cfg, **timing)
        self.builder = builder or LocalBuilder(self.cfg, workers=builders, timeout_s=build_timeout_s)
        self._measured = 0

    def measure(self, inputs: Sequence[MeasureInput],
                on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        """One result per input, in order. Builds the whole batch first, then times it. Each result is also
        given to `on_result` with its input's index as soon as it is known (a failed build once the builds are
        done, a timing as it ends), so that a tuning run killed in the middle of a batch keeps what it measured."""
        tell = on_result or (lambda i, r: None)
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
        for i in to_build:  # now, while the builds still separate it from any timing
            if checks[i]:
                self.runner.prepare(inputs[i].task)
        built = dict(zip(to_build, self.builder.build([inputs[i] for i in to_build])))
        for i, b in built.items():
            if isinstance(b, MeasureResult):
                results[i] = b
        for i, r in enumerate(results):
            if r is not None:
                tell(i, r)
        to_run = [i for i in to_build if results[i] is None]  # timed in the order given

        def timed(k: int, r: MeasureResult) -> None:
            results[to_run[k]] = r
            tell(to_run[k], r)

        self.runner.run_all([(inputs[i], built[i], checks[i]) for i in to_run], timed)
        return results

    @property
    def fingerprint(self) -> str | None:
        """The machine fingerprint the records of this measurer's timings carry: its runner's where it times
        elsewhere (`RayRunner.fingerprint`), else None, this machine's."""
        return getattr(self.runner, "fingerprint", None)

    def measure_one(self, task: Task, trace: Trace) -> MeasureResult:
        """Measure a single trace (benchmarks, the chosen schedule of a tuned task)."""
        return self.measure([MeasureInput(task, trace)])[0]

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """Tell the runner the latency of the task's default schedule (`Runner.limit_by_default`)."""
        self.runner.limit_by_default(task, default_latency)

    def close(self) -> None:
        """Stop the workers and remove the temporary files."""
        self.builder.close()
        self.runner.close()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _sample_check(self) -> bool:
        n, f = self._measured, self.check_fraction
        self._measured += 1
        return math.ceil((n + 1) * f) > math.ceil(n * f)
