"""Timing a kernel in a fresh interpreter, so a test can watch a crashing or hanging kernel fail as a value.

The library's isolated timing is the tuner's persistent worker (`runtime/worker.py`, `runtime/_runner.py`); this
one-shot version is only the tests': the caller (`time_in_subprocess`) starts this file as a script (fork+exec, so
no child inherits a half-copied OpenMP thread pool), sends one JSON request on stdin and reads one JSON reply. A
crash, a timeout or an exception in the worker comes back as `TimingResult(error=...)`.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import tilegrad
from tilegrad import config
from tilegrad.config import Config
from tilegrad.errors import TilegradError
from tilegrad.runtime.kernel import BufferSpec, kernel_address, random_arguments
from tilegrad.runtime.timing import TimingResult, harness, harness_library, measure

STDERR_TAIL_CHARS = 2000
PACKAGE_ROOT = Path(tilegrad.__file__).resolve().parents[1]  # the worker imports the tilegrad these tests import


def time_in_subprocess(
    library: Path,
    name: str,
    params: Sequence[BufferSpec],
    *,
    timeout_s: float = 10.0,
    warmup: int = 1,
    repeats: int = 5,
    min_repeat_s: float = 0.01,
    seed: int = 0,
    cfg: Config | None = None,
) -> TimingResult:
    """Time kernel `name` of `library` on random arguments (from `seed`) in a worker process; never raises on failure.

    `timeout_s` bounds the whole worker, interpreter start-up included.
    """
    cfg = cfg or config.get()
    try:
        harness_path = harness_library(cfg)
    except TilegradError as e:
        return TimingResult((), error=str(e))
    request = {
        "library": str(library),
        "name": name,
        "params": [[p.name, list(p.shape), p.dtype] for p in params],
        "harness": str(harness_path),
        "num_threads": cfg.num_threads,
        "warmup": warmup,
        "repeats": repeats,
        "min_repeat_s": min_repeat_s,
        "seed": seed,
    }
    return run_worker(request, timeout_s)


def run_worker(request: dict, timeout_s: float) -> TimingResult:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-P", str(Path(__file__).resolve())]
    with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: a chatty kernel cannot block on a full pipe
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        try:
            out, _ = proc.communicate(json.dumps(request).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return TimingResult((), error=f"timeout after {timeout_s} s")
        finally:
            if proc.returncode is None:  # timed out, or the caller was interrupted: never leave a spinning worker
                proc.kill()
                proc.communicate()
        stderr.seek(0, os.SEEK_END)
        stderr.seek(max(0, stderr.tell() - STDERR_TAIL_CHARS))
        tail = stderr.read().decode(errors="replace").strip()
    return interpret(proc.returncode, out, tail)


def interpret(returncode: int, out: bytes, stderr_tail: str) -> TimingResult:
    detail = f"\n{stderr_tail}" if stderr_tail else ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return TimingResult((), error=f"kernel crashed: {name}{detail}")
    if returncode > 0:
        return TimingResult((), error=f"timing worker failed (exit {returncode}){detail}")
    try:
        reply = json.loads(out)
    except ValueError:
        return TimingResult((), error=f"timing worker sent an unreadable reply: {out[:200]!r}{detail}")
    if reply.get("error"):
        return TimingResult((), error=reply["error"])
    return TimingResult(tuple(float(c) for c in reply["costs"]))


# ---- the worker side: this file run as a script ----

def serve_one_request() -> None:
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the kernel prints goes to stderr, not into the reply
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing kernel must not write a core file
    request = json.load(sys.stdin)
    try:
        answer = {"costs": time_request(request)}
    except Exception as e:  # the reply carries it; the caller turns it into an error result
        answer = {"error": f"{type(e).__name__}: {e}"}
    json.dump(answer, reply)
    reply.close()


def time_request(request: dict) -> list[float]:
    params = [BufferSpec(name, tuple(shape), dtype) for name, shape, dtype in request["params"]]
    fn = kernel_address(request["library"], request["name"])
    arrays = random_arguments(params, np.random.default_rng(request["seed"]))
    args = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    costs = measure(harness(request["harness"]), fn, args, request["num_threads"], request["warmup"],
                    request["repeats"], request["min_repeat_s"])
    return list(costs)


if __name__ == "__main__":
    serve_one_request()
