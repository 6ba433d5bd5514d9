"""The measurer's build worker (`python -m tilegrad.tune.measure._builder CONFIG.pkl`): trace in, kernel library out.

A request names a task's node (a pickle the measurer wrote, weights stripped), a trace as JSON and the kernel's
name; the worker replays the trace on the node's computation, lowers it, renders C and compiles it with the
configuration in CONFIG.pkl. The reply is `{"library", "params", "build_s"}`, or `{"failure": "lower" | "build",
"error"}` when the trace does not replay or lower, or the compiler rejects the source. With `"source"` set, that C
source is compiled instead of the rendered one (the measurer's test hook for kernels that crash or hang); the
trace still gives the parameters.
"""

from __future__ import annotations

import pickle
import sys
import time
from functools import lru_cache

from ...config import Config
from ...errors import BuildError
from ...ir.graph import Node
from ...kernel import build_sources, lower_kernel, render_kernel
from ...runtime.worker import serve
from ...schedule import Trace


def _handle(request: dict, cfg: Config) -> dict:
    start = time.perf_counter()
    try:
        kernel = lower_kernel(_node(request["task"]), Trace.from_json(request["trace"]), name=request["name"])
        params = [[b.name, [int(d.value) for d in b.shape], b.dtype] for b in kernel.params]
        source = request.get("source") or render_kernel(kernel)
    except Exception as e:  # any failure to replay, lower or render is this candidate's failure, not the tuner's
        return {"failure": "lower", "error": f"{type(e).__name__}: {e}"}
    try:
        library = build_sources([source], cfg=cfg)
    except BuildError as e:
        return {"failure": "build", "error": str(e)}
    return {"library": str(library), "params": params, "build_s": time.perf_counter() - start}


@lru_cache(maxsize=8)
def _node(path: str) -> Node:
    with open(path, "rb") as f:
        return pickle.load(f)


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        cfg = pickle.load(f)
    serve(lambda request: _handle(request, cfg))


if __name__ == "__main__":
    main()
