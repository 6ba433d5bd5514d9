"""Other runtimes timed on the inputs a compiled module benchmarks on, so that `tilegrad bench` and the tuning
report can set tilegrad's time beside theirs.

A peer is a callable taking the module's input specs and returning its median seconds per call, or None with the
reason it could not run (not installed, refused the model): a peer failing is a line of a report, never an
error of tilegrad's. ONNX Runtime runs with as many threads as tilegrad's kernels (`Config.num_threads`), so
the two share the machine alike.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

from .runtime.module import benchmark_inputs

Peer = Callable[[Sequence], "tuple[float | None, str]"]


def onnxruntime_peer(proto, repeats: int = 3, min_repeat_s: float = 0.05) -> Peer:
    """ONNX Runtime on the ONNX model `proto`, its session made once, at the first timing."""
    session = []

    def run(specs) -> tuple[float | None, str]:
        try:
            import onnxruntime as ort
        except ImportError:
            return None, "unavailable: onnxruntime is not installed (pip install onnxruntime)"
        from . import config

        if not session:
            options = ort.SessionOptions()
            options.intra_op_num_threads = config.get().num_threads
            try:
                session.append(ort.InferenceSession(proto.SerializeToString(), options,
                                                    providers=["CPUExecutionProvider"]))
            except Exception as exc:  # noqa: BLE001  (a peer failing is a line of a report, not an error of ours)
                return None, "failed: " + " ".join(str(exc).split())[:200]
        feeds = benchmark_inputs(specs)
        return median_seconds(lambda: session[0].run(None, feeds), repeats, min_repeat_s), ""

    return run


def median_seconds(run: Callable[[], object], repeats: int, min_repeat_s: float) -> float:
    """Median seconds per call of `run` over `repeats` repeats, each long enough to time (at least
    `min_repeat_s`), after a warm-up call."""
    run()
    number = 1
    while True:  # calibrate: calls per repeat so that a repeat lasts at least min_repeat_s
        t0 = time.perf_counter()
        for _ in range(number):
            run()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_repeat_s or number >= 1 << 20:
            break
        number *= 2 if elapsed <= 0 else max(2, min(10, math.ceil(min_repeat_s / elapsed)))
    costs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            run()
        costs.append((time.perf_counter() - t0) / number)
    return statistics.median(costs)
