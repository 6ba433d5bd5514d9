"""Timing kernels: the C timing loop, its harness, and `measure`, which calibrates and repeats it.

The timing loop runs in C (`tg_time`), so ctypes overhead does not pollute the cost of small kernels. A measurement
is `warmup` calls, a calibration that picks `number` calls per repeat so a repeat lasts at least `min_repeat_s`,
then `repeats` repeats, each reporting seconds per call. A repeat during which the kernel's threads waited on other
processes (`interference.py`) is taken again, so a busy neighbour does not become the kernel's cost.

`time_kernel` times in this process; the tuner's runner (`_runner.py`, in a `worker.Worker`) calls `measure` in a
worker process that a crashing or hanging kernel cannot take down.
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import config
from ..config import Config
from ..errors import MeasureError
from .build import build
from .interference import lost_seconds
from .kernel import Kernel, load_library

_HARNESS = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
typedef void (*tg_kernel)(void **);

static double tg_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Call fn(args) `number` times on `num_threads` OpenMP threads; return seconds per call. */
double tg_time(tg_kernel fn, void **args, long long number, int num_threads) {
#ifdef _OPENMP
    omp_set_num_threads(num_threads);
#endif
    double t0 = tg_seconds();
    for (long long i = 0; i < number; ++i) fn(args);
    return (tg_seconds() - t0) / (double)number;
}

/* Write back and drop one cache line from every level of every core's caches. */
static inline void tg_evict(const char *p) {
#if defined(__CLFLUSHOPT__)  /* unordered, so far faster than clflush on cached lines (docs/tuning.md) */
    __asm__ volatile("clflushopt %0" : : "m"(*(const char *)p) : "memory");
#elif defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("clflush %0" : : "m"(*(const char *)p) : "memory");
#elif defined(__aarch64__)
    __asm__ volatile("dc civac, %0" : : "r"(p) : "memory");
#endif
}

/* tg_time, but before each call the `count` buffers cold[i] (of bytes[i] bytes) are evicted from the caches, as a
   model call finds the weights and inputs that other kernels have pushed out; the evictions are not timed. The
   team evicts (so it is awake when the call starts), each thread a share of every buffer. */
double tg_time_cold(tg_kernel fn, void **args, long long number, int num_threads, void **cold,
                    const long long *bytes, int count) {
#ifdef _OPENMP
    omp_set_num_threads(num_threads);
#endif
    double total = 0.0;
    for (long long i = 0; i < number; ++i) {
        for (int b = 0; b < count; ++b) {
            const char *base = (const char *)((uintptr_t)cold[b] & ~(uintptr_t)63);
            long long lines = ((const char *)cold[b] + bytes[b] - base + 63) / 64;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
            for (long long l = 0; l < lines; ++l) tg_evict(base + 64 * l);
        }
#if defined(__x86_64__) || defined(__i386__)
        __asm__ volatile("mfence" ::: "memory");
#elif defined(__aarch64__)
        __asm__ volatile("dsb ish" ::: "memory");
#endif
        double t0 = tg_seconds();
        fn(args);
        total += tg_seconds() - t0;
    }
    return total / (double)number;
}
"""

TimeFn = Callable[[int, ctypes.Array, int, int], float]
# A timed repeat whose threads spent more than this fraction of their time ready but not running is taken again: the
# figures it would add are another process's (in the tuner, mostly its own BLAS pool spinning after a matmul).
MAX_LOST_FRACTION = 0.05
# Repeats further apart than this (of their median) are doubled; still that far apart, the timing is noisy.
MAX_SPREAD = 0.25
# A cold call (code and data not yet in cache, the thread pool asleep) may take this many times a warm one before its
# figure alone abandons a kernel.
COLD_ALLOWANCE = 2.0


@dataclass(frozen=True)
class TimingResult:
    """Seconds per call, one per repeat; or no costs and an `error` saying why the kernel could not be timed."""

    costs: tuple[float, ...]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def median(self) -> float:
        """Median cost; infinite for a failed measurement, so failures sort last."""
        return statistics.median(self.costs) if self.costs else math.inf

    @property
    def min(self) -> float:
        return min(self.costs, default=math.inf)


def time_kernel(
    kernel: Kernel, arrays: Sequence[np.ndarray], *, warmup: int = 1, repeats: int = 5, min_repeat_s: float = 0.01
) -> TimingResult:
    """Time `kernel` on `arrays` in this process (a crash here is a crash of the caller)."""
    args = kernel.pack(arrays)
    tg_time = harness(harness_library(kernel.cfg))
    costs = measure(tg_time, kernel.function_address, args, kernel.num_threads, warmup, repeats, min_repeat_s)
    return TimingResult(costs)


def harness_library(cfg: Config | None = None) -> Path:
    """The timing harness built with `cfg`'s compiler and flags (so it shares the kernels' OpenMP runtime)."""
    return build(_HARNESS, cfg=cfg or config.get())


def harness(library: Path) -> TimeFn:
    """`tg_time` from a built timing harness."""
    fn = load_library(library).tg_time
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int]
    fn.restype = ctypes.c_double
    return fn


def cold_harness(library: Path, placed: Sequence[tuple[ctypes.Array, Sequence[np.ndarray]]]) -> TimeFn:
    """A `TimeFn` like `harness`'s that evicts buffers from the caches before each call (`tg_time_cold`): for each
    argument array of `placed`, the arrays to evict before a call on it."""
    fn = load_library(library).tg_time_cold
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_int]
    fn.restype = ctypes.c_double
    evicted = {}
    for args, arrays in placed:
        pointers = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        sizes = (ctypes.c_longlong * max(1, len(arrays)))(*[a.nbytes for a in arrays])
        evicted[ctypes.addressof(args)] = (pointers, sizes, len(arrays))

    def timed(kernel: int, args: ctypes.Array, number: int, num_threads: int) -> float:
        return fn(kernel, args, number, num_threads, *evicted[ctypes.addressof(args)])

    return timed


def measure(
    tg_time: TimeFn,
    fn: int,
    args: ctypes.Array | Sequence[ctypes.Array],
    num_threads: int,
    warmup: int,
    repeats: int,
    min_repeat_s: float,
    abandon_above_s: float | None = None,
    lost: Callable[[], float] = lost_seconds,
) -> tuple[float, ...]:
    """Warm up, calibrate the calls per repeat (so that a repeat's wall time, a cold harness's evictions included,
    reaches `min_repeat_s`), then return seconds per call for each repeat.

    `args` may be several argument arrays (the same buffers at different placements): repeat i then runs on
    `args[i % len(args)]`, after one untimed call that brings that placement into cache. When the first warm call
    takes longer than `abandon_above_s`, that call's time is the only cost returned: the caller has said such a
    kernel cannot matter, and its repeats would cost most of a tuning round. A warm-up already COLD_ALLOWANCE times
    past that bar is the only cost itself: the slowest candidates then cost one call, not two.

    A repeat during which the kernel's threads lost more than MAX_LOST_FRACTION of their time to others (`lost`, a
    clock of seconds lost: see `interference.py`) is run again on the same placement, 2 x `repeats` times at most
    per measurement (a BLAS pool spins for ~0.1 s); after that a disturbed repeat counts as it is. A disturbed
    first call is timed again before it can abandon the kernel. Repeats whose `spread` exceeds MAX_SPREAD are
    doubled in number, so that one far-off repeat does not become the median.
    """
    _check_budget(warmup, repeats, min_repeat_s)
    placed = [args] if isinstance(args, ctypes.Array) else list(args)
    first = placed[0]

    def timed(here: ctypes.Array, number: int) -> tuple[float, bool]:
        before = lost()
        per_call = tg_time(fn, here, number, num_threads)
        return per_call, lost() - before > MAX_LOST_FRACTION * per_call * number * num_threads

    if warmup:
        cold, disturbed = timed(first, warmup)
        if abandon_above_s is not None and cold > COLD_ALLOWANCE * abandon_above_s and not disturbed:
            return (cold,)
    number = 1
    per_call, disturbed = timed(first, number)
    if abandon_above_s is not None and per_call > abandon_above_s:
        if disturbed:
            per_call, _ = timed(first, number)
        if per_call > abandon_above_s:
            return (per_call,)
    wall_per_call = per_call  # what a call costs the caller: a cold harness's evictions too
    while wall_per_call * number < min_repeat_s:
        wanted = math.ceil(1.2 * min_repeat_s / max(wall_per_call, 1e-9))
        number = min(number * 100, max(number * 2, wanted))
        started = time.perf_counter()
        per_call = tg_time(fn, first, number, num_threads)
        wall_per_call = max(per_call, (time.perf_counter() - started) / number)
    costs: list[float] = []
    retries = 2 * repeats
    wanted = repeats
    while len(costs) < wanted:
        here = placed[len(costs) % len(placed)]
        if len(placed) > 1:
            tg_time(fn, here, 1, num_threads)
        cost, disturbed = timed(here, number)
        if disturbed and retries:
            retries -= 1
        else:
            costs.append(cost)
        if len(costs) == wanted == repeats > 1 and spread(costs) > MAX_SPREAD:
            wanted = 2 * repeats  # repeats this far apart: twice as many, so that the median is not one of them
    return tuple(costs)


def spread(costs: Sequence[float]) -> float:
    """How far apart repeats are: (slowest - fastest) / median."""
    return (max(costs) - min(costs)) / statistics.median(costs) if costs else 0.0


def _check_budget(warmup: int, repeats: int, min_repeat_s: float) -> None:
    if warmup < 0 or repeats < 1 or not min_repeat_s >= 0:
        raise MeasureError(
            f"need warmup >= 0, repeats >= 1, min_repeat_s >= 0; got {warmup}, {repeats}, {min_repeat_s}"
        )
