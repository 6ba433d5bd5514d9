"""This machine's measured float32 FMA peak and memory bandwidth: the ceilings a kernel's speed is read against.

Both are measured with C built like every kernel (the build cache's compiler and flags, OpenMP threads), so they
are what generated code can reach, not a datasheet's figure. The FMA peak runs `_CHAINS` independent chains of
vector multiply-adds per thread, as wide as the target's widest vector (AVX-512 16 lanes, AVX2 8, else 4), in
one parallel region; the bandwidth is a STREAM-like triad `a = b + s * c` over three arrays far larger than the
last-level cache, counting the bytes read and written. Each is the best of a few short runs. The result is cached
as JSON in the cache directory, one file per CPU model, ISA and thread count (`tilegrad.machine` is the public
name of this module).
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import logging
import os
import uuid
from pathlib import Path

from .. import config as _config
from ..errors import MeasureError
from ..target import Target, host
from .build import build
from .kernel import load_library

_log = logging.getLogger(__name__)

_CHAINS = 12  # independent accumulators per thread: enough to cover FMA latency x ports on current cores
_RUNS = 5  # each measurement is the best of this many runs
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

/* Seconds for `iters` rounds of CHAINS vector FMAs on each of `threads` threads; the sums go to sink[thread]. */
double tg_fma_seconds(long long iters, int threads, float *sink) {
    double t0 = now();
    #pragma omp parallel num_threads(threads)
    {
        vf acc[CHAINS], m, a;
        for (int k = 0; k < LANES; ++k) { m[k] = 0.999999f; a[k] = 1e-6f * (float)(k + 1); }
        for (int j = 0; j < CHAINS; ++j) acc[j] = a * (float)(j + 1);
        for (long long i = 0; i < iters; ++i) {
            for (int j = 0; j < CHAINS; ++j) acc[j] = acc[j] * m + a;
        }
        float s = 0;
        for (int j = 0; j < CHAINS; ++j) for (int k = 0; k < LANES; ++k) s += acc[j][k];
#ifdef _OPENMP
        sink[omp_get_thread_num()] = s;
#else
        sink[0] = s;
#endif
    }
    return now() - t0;
}

/* Best seconds of `passes` triads a = b + s * c over n floats each, on `threads` threads; -1 if out of memory. */
double tg_triad_seconds(long long n, int passes, int threads) {
    float *a = aligned_alloc(64, (size_t)n * 4), *b = aligned_alloc(64, (size_t)n * 4),
          *c = aligned_alloc(64, (size_t)n * 4);
    double best = -1;
    if (a && b && c) {
        #pragma omp parallel for num_threads(threads) schedule(static)
        for (long long i = 0; i < n; ++i) { a[i] = 0; b[i] = 1; c[i] = 2; }  /* first touch: pages near their thread */
        for (int p = 0; p < passes; ++p) {
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
    (each run about `duration_s` long, the whole under ~2 s) and cached. `remeasure` measures again and
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


def _measure(threads: int, duration_s: float, cfg: _config.Config) -> MachinePeaks:
    """Build the measuring code for this target and take the best of `_RUNS` runs of each ceiling."""
    target = host()
    lanes = target.vector_lanes
    lib = load_library(build(measuring_source(lanes), cfg=cfg))
    fma, triad = lib.tg_fma_seconds, lib.tg_triad_seconds
    fma.argtypes, fma.restype = [ctypes.c_longlong, ctypes.c_int, ctypes.POINTER(ctypes.c_float)], ctypes.c_double
    triad.argtypes, triad.restype = [ctypes.c_longlong, ctypes.c_int, ctypes.c_int], ctypes.c_double
    sink = (ctypes.c_float * threads)()
    iters = _calibrate(lambda n: fma(n, threads, sink), duration_s)
    seconds = min(fma(iters, threads, sink) for _ in range(_RUNS))
    fma_gflops = 2.0 * lanes * _CHAINS * iters * threads / seconds / 1e9
    n = max(_MIN_ARRAY_BYTES, 4 * target.l3_bytes) // 4
    best = triad(n, _RUNS, threads)
    if best <= 0:
        raise MeasureError(f"cannot measure the memory bandwidth: allocating its three arrays of {n * 4 >> 20} MiB "
                           f"failed; free memory and run `tilegrad info --machine --remeasure`")
    return MachinePeaks(target.model, isa_of(target), threads, fma_gflops, 3 * 4 * n / best / 1e9)


def measuring_source(lanes: int) -> str:
    """The C that measures both peaks, its FMA chains `lanes` float32s wide."""
    return f"#define LANES {lanes}\n#define CHAINS {_CHAINS}\n#ifdef _OPENMP\n#include <omp.h>\n#endif\n" + _SOURCE


def _calibrate(run, duration_s: float) -> int:
    """Iterations that make `run(iterations)` last about `duration_s` seconds."""
    iters = 1 << 12
    while True:
        seconds = run(iters)
        if seconds >= duration_s / 4 or iters >= 1 << 40:
            return max(1, int(iters * duration_s / max(seconds, 1e-9)))
        iters *= 8


def _read(path: Path) -> MachinePeaks | None:
    """The peaks cached at `path`; None if there are none, or they do not read (they are measured again)."""
    try:
        return MachinePeaks(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        _log.warning("ignoring the unreadable machine peaks in %s (%s): measuring again", path, exc)
        return None


def _write(path: Path, peaks: MachinePeaks) -> None:
    """Write `peaks` to `path` through a temporary file renamed into place, so readers never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.tmp")
    try:
        part.write_text(json.dumps(dataclasses.asdict(peaks), indent=1))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
