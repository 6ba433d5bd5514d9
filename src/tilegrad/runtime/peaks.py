"""This machine's measured float32 FMA peak and memory bandwidth: the ceilings a kernel's speed is read against.

Both are measured with C built like every kernel (the build cache's compiler and flags, OpenMP threads), so they
are what generated code can reach, not a datasheet's figure. The FMA peak runs `_CHAINS` independent chains of
vector multiply-adds per thread, as wide as the target's widest vector (AVX-512 16 lanes, AVX2 8, else 4), in
one parallel region; the bandwidth is a STREAM-like triad `a = b + s * c` over three arrays far larger than the
last-level cache, counting the bytes read and written.

A peak measured while something else runs is wrong for as long as it is cached, and every "% of peak" read
against it with it. So each figure is the best of several short runs spread over a second or two, and the FMA rate
is checked against the ISA's: the clock each thread runs at is measured too (a chain of dependent integer adds, one
cycle each on every core), and a core that retires fewer than `_MIN_FMA_PER_CYCLE` vector FMAs per measured cycle,
or a clock far below the one the CPU reports, means the cores were shared; the measurement is then repeated after
a pause and, failing again, refused. The result is cached as JSON in the cache directory with when and how it was
measured, one file per CPU model, ISA and thread count (`tilegrad.machine` is the public name of this module).
"""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import hashlib
import json
import logging
import os
import re
import time
import uuid
from pathlib import Path

from .. import config as _config
from ..errors import MeasureError
from ..target import Target, host
from .build import build
from .kernel import load_library

_log = logging.getLogger(__name__)

_CHAINS = 12  # independent accumulators per thread: enough to cover FMA latency x ports on current cores
_CHUNK_S = 0.002  # the FMA rate and the clock are the best of many chunks this long (a time slice is longer)
_RUNS = 5  # runs of chunks, `_SPREAD_S` apart
_SPREAD_S = 0.1
_ATTEMPTS = 3  # measurements that fail the sanity checks are repeated this often, `_RETRY_PAUSE_S` apart
_RETRY_PAUSE_S = 1.0
_MIN_FMA_PER_CYCLE = 0.75  # every FMA core retires at least one vector FMA a cycle (many two)
_MIN_CLOCK_FRACTION = 0.6  # of the clock the CPU reports: below it, the threads were sharing cores
_ADDS = 8  # dependent adds per round of the clock chain
_MIN_ARRAY_BYTES = 64 << 20  # each triad array: at least this, and 4x the last-level cache

_SOURCE = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdlib.h>
#include <time.h>

typedef float vf __attribute__((vector_size(LANES * 4)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#ifdef _OPENMP
#define THREAD omp_get_thread_num()
#else
#define THREAD 0
#endif

/* Runs `body` as `chunks` chunks that all threads start together, keeping the fastest chunk's seconds in `best`
   (thread 0's clock): a chunk that no other work interrupted is the fastest, so load that comes and goes does not
   lower the figure. */
#define BEST_CHUNK(best, chunks, body)                                  \
    for (int c = 0; c < (chunks); ++c) {                                \
        double t0 = 0;                                                  \
        _Pragma("omp barrier")                                          \
        _Pragma("omp master")                                           \
        t0 = now();                                                     \
        body                                                            \
        _Pragma("omp barrier")                                          \
        _Pragma("omp master")                                           \
        { double t = now() - t0; if (t < best) best = t; }              \
    }

/* Best seconds of one chunk of `iters` rounds of CHAINS vector FMAs on each of `threads` threads, over `chunks`
   chunks; the sums go to sink[thread]. */
double tg_fma_chunk_seconds(long long iters, int chunks, int threads, float *sink) {
    double best = 1e30;
    #pragma omp parallel num_threads(threads)
    {
        vf acc[CHAINS], m, a;
        for (int k = 0; k < LANES; ++k) { m[k] = 0.999999f; a[k] = 1e-6f * (float)(k + 1); }
        for (int j = 0; j < CHAINS; ++j) acc[j] = a * (float)(j + 1);
        BEST_CHUNK(best, chunks,
            for (long long i = 0; i < iters; ++i) {
                for (int j = 0; j < CHAINS; ++j) acc[j] = acc[j] * m + a;
            })
        float s = 0;
        for (int j = 0; j < CHAINS; ++j) for (int k = 0; k < LANES; ++k) s += acc[j][k];
        sink[THREAD] = s;
    }
    return best;
}

/* The same for the clock: chunks of `iters` rounds of ADDS dependent integer adds, ADDS * iters cycles, since each
   add needs the previous one's result and takes one cycle. The empty asm keeps x in a register between adds, so
   the compiler cannot fold the chain into one multiply; the addend is a register the compiler cannot see into,
   since some cores (Intel's Golden Cove) fold an add of a constant at rename and run such chains faster than one
   a cycle. */
#define ADD1 x += step; __asm__ volatile("" : "+r"(x));
double tg_clock_chunk_seconds(long long iters, int chunks, int threads, long long *sink) {
    double best = 1e30;
    #pragma omp parallel num_threads(threads)
    {
        long long x = 0, step = 1;
        __asm__ volatile("" : "+r"(step));
        BEST_CHUNK(best, chunks,
            for (long long i = 0; i < iters; ++i) { ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 })
        sink[THREAD] = x;
    }
    return best;
}

/* Best seconds of `passes` triads a = b + s * c over n floats each, on `threads` threads, `pause_ms` apart; -1 if
   out of memory. */
double tg_triad_seconds(long long n, int passes, int threads, int pause_ms) {
    struct timespec pause = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
    float *a = aligned_alloc(64, (size_t)n * 4), *b = aligned_alloc(64, (size_t)n * 4),
          *c = aligned_alloc(64, (size_t)n * 4);
    double best = -1;
    if (a && b && c) {
        #pragma omp parallel for num_threads(threads) schedule(static)
        for (long long i = 0; i < n; ++i) { a[i] = 0; b[i] = 1; c[i] = 2; }  /* first touch: pages near their thread */
        for (int p = 0; p < passes; ++p) {
            if (p) nanosleep(&pause, NULL);
            double t0 = now();
            #pragma omp parallel for num_threads(threads) schedule(static)
            for (long long i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
            double t = now() - t0;
            if (best < 0 || t < best) best = t;
        }
    }
    free(a); free(b); free(c);
    return best;
}
"""


@dataclasses.dataclass(frozen=True)
class MachinePeaks:
    """What this machine's generated code can reach: float32 FMA GFLOP/s and main-memory GB/s, on `threads`."""

    cpu: str  # the CPU's model name
    isa: str  # the vector extension the generated code uses: avx512f, avx2+fma, avx2, sse4.2, neon or scalar
    threads: int  # threads the peaks were measured with
    fma_gflops: float  # float32, all threads, 2 flops per FMA lane
    bandwidth_gbs: float  # triad over arrays far larger than the last-level cache, bytes read + written
    clock_ghz: float = 0.0  # the clock one thread ran at, measured beside the FMA rate
    fma_per_cycle: float = 0.0  # vector FMAs one core retired per measured cycle (the ISA's rate: 1 or 2)
    measured_at: str = ""  # when, in UTC (ISO 8601)
    how: str = ""  # the method, in words


def isa_of(target: Target) -> str:
    """The vector extension of `target` the generated code uses, as the peaks name it."""
    flags = target.flags
    if "avx512f" in flags:
        return "avx512f"
    if "avx2" in flags:
        return "avx2+fma" if "fma" in flags else "avx2"
    if {"neon", "asimd"} & flags:
        return "neon"
    return "sse4.2" if "sse4_2" in flags else "scalar"


def cache_path(threads: int | None = None, cfg: _config.Config | None = None) -> Path:
    """The file holding the peaks of this CPU and ISA on `threads` threads (default: the configured count)."""
    cfg = cfg or _config.get()
    target = host()
    key = "\n".join([target.model, isa_of(target), str(threads or cfg.num_threads)])
    return Path(cfg.cache_dir) / "machine" / f"peaks-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def measured_peaks(threads: int | None = None, remeasure: bool = False, *, duration_s: float = 0.15) -> MachinePeaks:
    """This machine's peaks on `threads` threads (default: the configured count), from the cache, or measured
    (each run of chunks about `duration_s` long, the whole a few seconds) and cached. `remeasure` measures again and
    overwrites the cached figures."""
    cfg = _config.get()
    threads = threads or cfg.num_threads
    path = cache_path(threads, cfg)
    if not remeasure:
        cached = _read(path)
        if cached is not None:
            return cached
    peaks = _measure(threads, duration_s, cfg)
    _write(path, peaks)
    return peaks


def cached_peaks(threads: int | None = None) -> MachinePeaks | None:
    """This machine's peaks on `threads` threads if they were measured before, else None (measuring nothing)."""
    return _read(cache_path(threads))


def _measure(threads: int, duration_s: float, cfg: _config.Config) -> MachinePeaks:
    """Build the measuring code for this target and measure both ceilings; repeat a measurement that fails the
    sanity checks after a pause, and refuse one that fails every time."""
    target = host()
    lanes = target.vector_lanes
    fma_chunk, clock_chunk, triad = _measuring_functions(load_library(build(measuring_source(lanes), cfg=cfg)),
                                                         threads)
    fma_iters, clock_iters = _calibrate(fma_chunk), _calibrate(clock_chunk)
    chunks = max(10, round(duration_s / _CHUNK_S))
    n = max(_MIN_ARRAY_BYTES, 4 * target.l3_bytes) // 4
    for attempt in range(1, _ATTEMPTS + 1):
        start = time.monotonic()
        fma_s, clock_s = [], []
        for run in range(_RUNS):
            if run:
                time.sleep(_SPREAD_S)
            fma_s.append(fma_chunk(fma_iters, chunks))
            clock_s.append(clock_chunk(clock_iters, chunks // 2))
        fma_gflops = 2.0 * lanes * _CHAINS * fma_iters * threads / min(fma_s) / 1e9
        ghz = _ADDS * clock_iters / min(clock_s) / 1e9
        per_cycle = fma_gflops / threads / (2.0 * lanes * ghz)
        problem = implausible(per_cycle, ghz, reported_ghz(), "fma" in target.flags or "asimd" in target.flags)
        if problem is None:
            triad_s = triad(n, _RUNS, int(_SPREAD_S * 1e3))
            if triad_s <= 0:
                raise MeasureError(f"cannot measure the memory bandwidth: allocating its three arrays of "
                                   f"{n * 4 >> 20} MiB failed; free memory and run `tilegrad info --machine "
                                   f"--remeasure`")
            how = (f"best {_CHUNK_S * 1e3:.0f} ms chunk of {_RUNS} x {chunks} over {time.monotonic() - start:.1f} s "
                   f"(attempt {attempt}): {_CHAINS} chains of {lanes}-lane FMAs per thread, the clock from chains "
                   f"of dependent adds, a triad over 3 x {n * 4 >> 20} MiB")
            return MachinePeaks(target.model, isa_of(target), threads, fma_gflops, 3 * 4 * n / triad_s / 1e9,
                                round(ghz, 3), round(per_cycle, 3),
                                datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), how)
        _log.warning("machine peaks, attempt %d of %d: %s; measuring again in %.0f s", attempt, _ATTEMPTS, problem,
                     _RETRY_PAUSE_S)
        if attempt < _ATTEMPTS:
            time.sleep(_RETRY_PAUSE_S)
    raise MeasureError(f"the machine's FMA peak measured {fma_gflops:.1f} GFLOP/s on {threads} threads, far below "
                       f"what the ISA does at the measured clock ({problem}): something else is using the cores. "
                       f"Measure again when the machine is idle: `tilegrad info --machine --remeasure`")


def _measuring_functions(lib, threads: int):
    """The measuring library's three functions, bound to `threads`: fma(iters, chunks) and clock(iters, chunks),
    the best chunk's seconds, and triad(n, passes, pause_ms), the best pass's seconds."""
    fma, clock, triad = lib.tg_fma_chunk_seconds, lib.tg_clock_chunk_seconds, lib.tg_triad_seconds
    fma.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    clock.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
    triad.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fma.restype = clock.restype = triad.restype = ctypes.c_double
    fma_sink, clock_sink = (ctypes.c_float * threads)(), (ctypes.c_longlong * threads)()
    return (lambda iters, chunks: fma(iters, chunks, threads, fma_sink),
            lambda iters, chunks: clock(iters, chunks, threads, clock_sink),
            lambda n, passes, pause_ms: triad(n, passes, threads, pause_ms))


def implausible(fma_per_cycle: float, ghz: float, reported: float | None, has_fma: bool) -> str | None:
    """Why a measurement cannot be the machine's peak (None if it can be): an FMA core that retired fewer than
    `_MIN_FMA_PER_CYCLE` vector FMAs per cycle, or threads that ran far below the clock the CPU reports, were
    sharing their cores with other work."""
    if has_fma and fma_per_cycle < _MIN_FMA_PER_CYCLE:
        return f"{fma_per_cycle:.2f} vector FMAs per cycle, where every FMA core retires at least 1"
    if reported and ghz < _MIN_CLOCK_FRACTION * reported:
        return f"the threads ran at {ghz:.2f} GHz where the CPU reports {reported:.2f}"
    return None


def reported_ghz() -> float | None:
    """The clock the CPU reports (/proc/cpuinfo's `cpu MHz`, the highest of its cores), if it does."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    mhz = [float(v) for v in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", text, re.M)]
    return max(mhz) / 1e3 if mhz else None


def measuring_source(lanes: int) -> str:
    """The C that measures both peaks, its FMA chains `lanes` float32s wide."""
    return f"#define LANES {lanes}\n#define CHAINS {_CHAINS}\n#ifdef _OPENMP\n#include <omp.h>\n#endif\n" + _SOURCE


def _calibrate(chunk) -> int:
    """Iterations that make one chunk, `chunk(iterations, 1)`, last about `_CHUNK_S` seconds."""
    iters = 1 << 6
    while True:
        seconds = min(chunk(iters, 3), 1.0)
        if seconds >= _CHUNK_S / 4 or iters >= 1 << 40:
            return max(1, int(iters * _CHUNK_S / max(seconds, 1e-9)))
        iters *= 4


def _read(path: Path) -> MachinePeaks | None:
    """The peaks cached at `path`; None if there are none, or they do not read (they are measured again)."""
    try:
        peaks = MachinePeaks(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        _log.warning("ignoring the unreadable machine peaks in %s (%s): measuring again", path, exc)
        return None
    if not peaks.measured_at:
        _log.info("the machine peaks in %s were measured without the sanity checks: measuring again", path)
        return None
    return peaks


def _write(path: Path, peaks: MachinePeaks) -> None:
    """Write `peaks` to `path` through a temporary file renamed into place, so readers never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.tmp")
    try:
        part.write_text(json.dumps(dataclasses.asdict(peaks), indent=1))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
