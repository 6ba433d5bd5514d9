"""The worker process behind `time_in_subprocess`: reads one JSON request on stdin, writes one JSON reply.

It exists so that a kernel which crashes or hangs takes down only this process. It never runs the compiler: the
caller has already built the timing harness and sends its path.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

import numpy as np

from .kernel import BufferSpec, kernel_address, random_arguments
from .timing import harness, measure


def main() -> None:
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the kernel prints goes to stderr, not into the reply
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing candidate must not write a core file
    request = json.load(sys.stdin)
    try:
        answer = {"costs": _time(request)}
    except Exception as e:  # the reply carries it; the caller turns it into an error result
        answer = {"error": f"{type(e).__name__}: {e}"}
    json.dump(answer, reply)
    reply.close()


def _time(request: dict) -> list[float]:
    params = [BufferSpec(name, tuple(shape), dtype) for name, shape, dtype in request["params"]]
    fn = kernel_address(request["library"], request["name"])
    arrays = random_arguments(params, np.random.default_rng(request["seed"]))
    args = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    costs = measure(
        harness(request["harness"]),
        fn,
        args,
        request["num_threads"],
        request["warmup"],
        request["repeats"],
        request["min_repeat_s"],
    )
    return list(costs)


if __name__ == "__main__":
    main()
