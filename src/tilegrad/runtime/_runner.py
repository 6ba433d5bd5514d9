"""The persistent timing worker behind the tuner's measurer (`python -m tilegrad.runtime._runner`).

Each request names a built kernel library, the kernel's parameters, a `.npz` file of its inputs and the timing
harness; the reply is `{"costs": [seconds per call, ...]}`. With `"placements": n` the repeats cycle over n copies of
the buffers at fixed, different page offsets, so that no candidate's figure rests on one lucky (or unlucky) layout
of its buffers in the caches. With `"outputs": path` the kernel first runs once on
outputs poisoned with NaN (a bit pattern for integers), and those outputs are saved to `path` for the caller to
check, so a kernel that reads its outputs before writing them is caught too. With `"cold": [i, ...]` the buffers of
those parameters are evicted from the caches before each timed call (`timing.cold_harness`). With `"abandon_above_s": t` a kernel
whose first warm call takes longer than t is timed no further (one cost). It never runs the compiler: the
caller has built everything. A kernel that crashes or spins takes down only this process (see `worker.py`).
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np

from .kernel import BufferSpec, kernel_address, placements, random_arguments
from .timing import TimeFn, cold_harness, harness, measure
from .worker import serve

_POISON_BYTE = 0xA5


def _handle(request: dict) -> dict:
    params = tuple(BufferSpec(name, tuple(shape), dtype) for name, shape, dtype in request["params"])
    fn = kernel_address(request["library"], request["name"])
    inputs = _inputs(request["inputs"])
    placed = _buffers(params, request.get("placements", 1))
    if len(inputs) > len(params) or any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(inputs, placed[0])):
        raise ValueError(f"the inputs in {request['inputs']} do not fit the kernel's parameters {params}")
    for arrays in placed:
        for buffer, value in zip(arrays, inputs):
            buffer[...] = value  # every candidate starts from pristine inputs, even if the last one wrote into them
    args = [(ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays]) for arrays in placed]
    tg_time = _harness(request["harness"])
    threads = request["num_threads"]
    if request.get("outputs"):
        outputs = placed[0][len(inputs):]
        for out in outputs:
            if out.dtype.kind == "f":
                out.fill(np.nan)
            else:
                out.view(np.uint8).fill(_POISON_BYTE)
        tg_time(fn, args[0], 1, threads)
        np.savez(request["outputs"], *outputs)
    if request.get("cold"):
        tg_time = cold_harness(request["harness"], [(a, [arrays[k] for k in request["cold"]])
                                                    for a, arrays in zip(args, placed)])
    costs = measure(tg_time, fn, args, threads, request["warmup"], request["repeats"], request["min_repeat_s"],
                    request.get("abandon_above_s"))
    return {"costs": list(costs)}


@lru_cache(maxsize=4)
def _inputs(path: str) -> list[np.ndarray]:
    with np.load(path) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


@lru_cache(maxsize=4)
def _buffers(params: tuple[BufferSpec, ...], count: int) -> list[list[np.ndarray]]:
    """`count` sets of buffers for `params` at the fixed placements, reused by every candidate of the same task."""
    return [random_arguments(params, np.random.default_rng(0), offsets) for offsets in placements(len(params), count)]


@lru_cache(maxsize=None)
def _harness(path: str) -> TimeFn:
    return harness(path)


if __name__ == "__main__":
    serve(_handle)
