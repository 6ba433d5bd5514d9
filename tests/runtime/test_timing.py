import ctypes
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tilegrad.errors import KernelCallError, MeasureError
from tilegrad.runtime import (
    BufferSpec,
    Kernel,
    TimingResult,
    build,
    random_arguments,
    time_kernel,
)
from tilegrad.runtime.interference import lost_seconds
from tilegrad.runtime.kernel import placements
from tilegrad.runtime.timing import cold_harness, harness, harness_library, measure, spread

from .timing_worker import time_in_subprocess

ADD = """
void tg_add(void **args) {
    const float *a = args[0], *b = args[1];
    float *c = args[2];
    #pragma omp parallel for
    for (int i = 0; i < 4096; ++i) c[i] = a[i] + b[i];
}
"""
ADD_PARAMS = [BufferSpec(name, (4096,), "float32") for name in "ABC"]

CRASH = """
void tg_crash(void **args) {
    volatile float *nowhere = 0;
    *nowhere = 1.0f;
}
"""

HANG = """
void tg_hang(void **args) {
    volatile int spin = 1;
    while (spin) {}
}
"""

CHATTY = """
#include <stdio.h>
void tg_chatty(void **args) {
    float *x = args[0];
    printf("{not json}\\n");
    x[0] += 1.0f;
}
"""

QUICK = dict(repeats=3, min_repeat_s=0.001)


def test_time_kernel_gives_positive_finite_costs():
    kernel = Kernel(build(ADD), "tg_add", ADD_PARAMS)
    result = time_kernel(kernel, random_arguments(ADD_PARAMS, np.random.default_rng(0)), **QUICK)
    assert result.ok and len(result.costs) in (3, 6)
    assert all(0 < c < math.inf for c in result.costs)
    assert result.min <= result.median


def test_time_kernel_checks_its_arrays():
    kernel = Kernel(build(ADD), "tg_add", ADD_PARAMS)
    with pytest.raises(KernelCallError, match="takes 3 arrays"):
        time_kernel(kernel, [], **QUICK)


def test_bad_budget_is_refused():
    with pytest.raises(MeasureError, match="repeats >= 1"):
        measure(lambda *_: 1.0, 0, (ctypes.c_void_p * 0)(), 1, warmup=1, repeats=0, min_repeat_s=0.01)


def test_error_results_sort_last():
    failed = TimingResult((), error="timeout after 1.0 s")
    assert not failed.ok and failed.median == math.inf and failed.min == math.inf
    assert TimingResult((3.0, 1.0, 2.0)).median == 2.0


def test_subprocess_times_a_good_kernel():
    result = time_in_subprocess(build(ADD), "tg_add", ADD_PARAMS, **QUICK)
    assert result.ok, result.error
    assert len(result.costs) in (3, 6) and all(0 < c < math.inf for c in result.costs)


def test_subprocess_survives_a_crashing_kernel():
    result = time_in_subprocess(build(CRASH), "tg_crash", [], **QUICK)
    assert not result.ok and result.costs == ()
    assert result.error.startswith("kernel crashed: SIGSEGV")


def test_subprocess_times_out_a_hanging_kernel():
    start = time.monotonic()
    result = time_in_subprocess(build(HANG), "tg_hang", [], timeout_s=1.0, **QUICK)
    assert time.monotonic() - start < 2.0
    assert result.error == "timeout after 1.0 s"
    assert time_in_subprocess(build(ADD), "tg_add", ADD_PARAMS, **QUICK).ok  # the caller carries on


def test_subprocess_reports_worker_exceptions():
    result = time_in_subprocess(build(ADD), "tg_missing", ADD_PARAMS, **QUICK)
    assert "BuildError" in result.error and "defines no kernel 'tg_missing'" in result.error


def test_kernel_output_does_not_corrupt_the_reply():
    result = time_in_subprocess(build(CHATTY), "tg_chatty", [BufferSpec("x", (1,), "float32")], **QUICK)
    assert result.ok, result.error


def test_placed_arguments_sit_at_their_page_offsets_with_the_same_values():
    offsets = placements(len(ADD_PARAMS), 3)
    assert offsets == placements(len(ADD_PARAMS), 3)  # fixed, so every timing worker uses the same placements
    assert len({tuple(o) for o in offsets}) == 3
    plain = random_arguments(ADD_PARAMS, np.random.default_rng(0))
    for placement in offsets:
        placed = random_arguments(ADD_PARAMS, np.random.default_rng(0), placement)
        assert [a.ctypes.data % 4096 for a in placed] == placement
        assert all(np.array_equal(a, b) for a, b in zip(placed, plain))


def test_measure_cycles_the_repeats_over_placements():
    kernel = Kernel(build(ADD), "tg_add", ADD_PARAMS)
    placed = [random_arguments(ADD_PARAMS, np.random.default_rng(0), p) for p in placements(3, 2)]
    args = [kernel.pack(arrays) for arrays in placed]
    tg_time = harness(harness_library(kernel.cfg))
    costs = measure(tg_time, kernel.function_address, args, kernel.num_threads, 1, 4, 0.001)
    assert len(costs) in (4, 8) and all(0 < c < math.inf for c in costs)  # 8 where the 4 spread too far
    for arrays in placed:  # every placement ran the kernel
        np.testing.assert_allclose(arrays[2], arrays[0] + arrays[1])


SUM = """
void tg_sum(void **args) {  /* reads a 256 KiB buffer, which fits any core's L2, as fast as it can */
    const unsigned *a = args[0];
    unsigned *out = args[1], s = 0;
    for (int i = 0; i < 65536; ++i) s += a[i];
    out[0] = s;
}
"""
SUM_PARAMS = [BufferSpec("a", (65536,), "uint32"), BufferSpec("out", (1,), "uint32")]


def test_a_call_on_evicted_buffers_is_slower_than_a_warm_one():
    kernel = Kernel(build(SUM), "tg_sum", SUM_PARAMS)
    arrays = random_arguments(SUM_PARAMS, np.random.default_rng(0))
    args = kernel.pack(arrays)
    warm = harness(harness_library(kernel.cfg))
    cold = cold_harness(harness_library(kernel.cfg), [(args, arrays[:1])])
    # The best of each: a busy machine (the suite's other worker) slows some calls of either, never the best
    # cold call below memory's speed.
    warm_s = min(measure(warm, kernel.function_address, args, 1, 1, 5, 0.002))
    cold_s = min(measure(cold, kernel.function_address, args, 1, 1, 5, 0.002))
    assert cold_s > 1.5 * warm_s  # from memory, not from L2
    assert arrays[1][0] == arrays[0].sum(dtype=np.uint32)


def test_a_kernel_slower_than_the_abandon_bar_is_timed_once():
    calls = []

    def tg_time(fn, args, number, num_threads):
        calls.append(number)
        return 0.5

    assert measure(tg_time, 0, [None], 1, 1, 3, 0.001, abandon_above_s=0.3, lost=_quiet) == (0.5,)
    assert calls == [1, 1]  # the warm-up, then the first warm call
    calls.clear()
    assert measure(tg_time, 0, [None], 1, 1, 3, 0.001, abandon_above_s=0.1, lost=_quiet) == (0.5,)
    assert calls == [1]  # the warm-up alone: COLD_ALLOWANCE times past the bar
    calls.clear()
    assert measure(tg_time, 0, [None], 1, 1, 3, 0.001, abandon_above_s=1.0, lost=_quiet) == (0.5, 0.5, 0.5)
    assert calls == [1, 1, 1, 1, 1]


def _quiet() -> float:
    return 0.0


def test_repeats_far_apart_are_doubled_in_number_so_one_outlier_is_not_the_median():
    timings = iter([0.01, 0.01, 0.01, 0.01, 0.03, 0.01, 0.01, 0.01])  # warm-up, first call, then the repeats

    def tg_time(fn, args, number, num_threads):
        return next(timings)

    costs = measure(tg_time, 0, [None], 1, 1, 3, 0.001, lost=_quiet)
    assert costs == (0.01, 0.01, 0.03, 0.01, 0.01, 0.01) and spread(costs) == pytest.approx(2.0)
    steady = measure(lambda *a: 0.01, 0, [None], 1, 1, 3, 0.001, lost=_quiet)
    assert steady == (0.01, 0.01, 0.01) and spread(steady) == 0.0


class _Neighbour:
    """A fake machine: `tg_time` costs what `slow` says for the calls it is told to disturb, and the lost-time clock
    advances by the whole call while a disturbed call runs."""

    def __init__(self, disturbed: set[int], fast: float = 0.001, slow: float = 0.005):
        self.disturbed, self.fast, self.slow = disturbed, fast, slow
        self.calls: list[tuple[object, int]] = []  # (placement, number) of every call
        self.clock = 0.0

    def tg_time(self, fn, args, number, num_threads):
        k = len(self.calls)
        self.calls.append((args, number))
        if k in self.disturbed:
            self.clock += self.slow * number * num_threads
            return self.slow
        return self.fast

    def lost(self) -> float:
        return self.clock


def test_a_disturbed_repeat_is_taken_again_on_its_placement():
    # calls: 0 warm-up, 1 first warm call, 2 calibration (number 2), then per repeat one untimed call and the timing
    box = _Neighbour(disturbed={6})  # repeat 1's timing (calls 3, 4 are repeat 0; 5, 6 repeat 1)
    costs = measure(box.tg_time, 0, ["p0", "p1"], 2, 1, 3, 0.0015, lost=box.lost)
    assert costs == (0.001, 0.001, 0.001)
    timed = [args for args, number in box.calls[3:] if number > 1]
    assert timed == ["p0", "p1", "p1", "p0"]  # repeat 1 ran again on its own placement


def test_retries_are_bounded_and_a_disturbed_repeat_then_counts():
    box = _Neighbour(disturbed=set(range(3, 100)))  # every timed repeat is disturbed
    costs = measure(box.tg_time, 0, [None], 1, 1, 2, 0.0015, lost=box.lost)
    assert costs == (0.005, 0.005)
    assert len([n for _, n in box.calls[3:] if n > 1]) == 6  # 2 repeats + 4 retries


def test_a_disturbed_first_call_does_not_abandon_the_kernel():
    box = _Neighbour(disturbed={1})  # the first warm call, 5x slow
    costs = measure(box.tg_time, 0, [None], 1, 1, 2, 0.0015, abandon_above_s=0.002, lost=box.lost)
    assert costs == (0.001, 0.001)
    box = _Neighbour(disturbed={0})  # a disturbed warm-up past COLD_ALLOWANCE x the bar does not abandon either
    assert measure(box.tg_time, 0, [None], 1, 1, 2, 0.0015, abandon_above_s=0.002, lost=box.lost) == (0.001, 0.001)
    box = _Neighbour(disturbed={1, 2})  # still slow when timed again: abandoned on that second figure
    assert measure(box.tg_time, 0, [None], 1, 1, 2, 0.0015, abandon_above_s=0.002, lost=box.lost) == (0.005,)


def test_the_lost_time_clock_sees_processes_that_compete_for_the_cores():
    """Busy processes on every core: this thread, busy too, waits on a runqueue for part of the time."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.2)  # let them start
        before = lost_seconds()
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            pass
        assert lost_seconds() - before > 0.05
    finally:
        for p in spinners:
            p.kill()
            p.wait()


@pytest.mark.parametrize("offsets", [[0, 64], [0, 64, 4096], [0, 64, 100]])
def test_bad_page_offsets_are_refused(offsets):
    with pytest.raises(ValueError, match="page offset"):
        random_arguments(ADD_PARAMS, np.random.default_rng(0), offsets)
