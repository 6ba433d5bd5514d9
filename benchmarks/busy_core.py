"""Latency when another process holds a core: tilegrad and ONNX Runtime on a ResNet-18-like CNN and a small
transformer, on a quiet machine and with a spinning process pinned to one core. Run:

    python benchmarks/busy_core.py                       # table
    python benchmarks/busy_core.py --json                # [{"model", "runtime", "quiet_ms", "busy_ms", "slowdown"}]
    python benchmarks/busy_core.py --spin-us 0,100,3000  # tilegrad once per TILEGRAD_SPIN_US value as well

Each runtime runs in a worker process of its own (the OpenMP runtime reads its wait policy when it loads), with
as many threads as this process may use cores. Rounds alternate quiet and busy phases; in a busy phase a process
spinning on the last of those cores is started first and stopped after; within a phase the workers take turns,
each timing `--calls` calls after a pause. Figures are medians over rounds of each worker's median call.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py, beside this script

CORES = sorted(os.sched_getaffinity(0))
IDLE_S = 0.3  # between two workers' turns, so that no thread pool still spinning from the last turn steals a core


# -- models ------------------------------------------------------------------------------------------------------


def _resnet18():
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                                      nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):
            return torch.relu(self.body(x) + self.skip(x))

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, width, stride), Basic(width, width, 1)]
        cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers), (torch.randn(1, 3, 224, 224),)


def _transformer():
    import torch
    from models import Bert

    return Bert(layers=4, d=256, heads=4, vocab=1000, seq=128), (torch.randint(0, 1000, (1, 128)),)


MODELS = {"resnet18": _resnet18, "transformer_4x256": _transformer}


def _export(name: str) -> tuple[bytes, dict]:
    import torch

    torch.manual_seed(0)
    module, args = MODELS[name]()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, f, dynamo=False, input_names=["x"])
    return f.getvalue(), {"x": args[0].numpy()}


# -- workers -----------------------------------------------------------------------------------------------------


def _worker(conn, runtime: str, model: bytes, feeds: dict, env: dict) -> None:
    """Load `model` in `runtime`, then answer each request (a number of calls) with the median call in seconds."""
    os.environ.update(env)
    if runtime == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = len(CORES)
        sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        call = lambda: sess.run(None, feeds)  # noqa: E731
    else:
        import tilegrad

        module = tilegrad.compile(model)
        call = lambda: module(**feeds)  # noqa: E731
    for _ in range(3):
        call()
    conn.send("ready")
    while (calls := conn.recv()) is not None:
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        conn.send(statistics.median(times))


def _spin(core: int) -> None:
    os.sched_setaffinity(0, {core})
    while True:
        pass


# -- measurement ---------------------------------------------------------------------------------------------------


def measure(model_name: str, spin_us: list[int | None], rounds: int, calls: int) -> list[dict]:
    model, feeds = _export(model_name)
    ctx = mp.get_context("spawn")
    configs = [("onnxruntime", None, {})] + [
        ("tilegrad", s, {} if s is None else {"TILEGRAD_SPIN_US": str(s)}) for s in spin_us]
    workers = []
    for runtime, spin, env in configs:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child, runtime, model, feeds, env), daemon=True)
        proc.start()
        workers.append((runtime, spin, parent, proc))
    for _, _, conn, _ in workers:
        if conn.recv() != "ready":
            raise RuntimeError("a worker failed to start")
    times = {(w[0], w[1], busy): [] for w in workers for busy in (False, True)}
    try:
        for _ in range(rounds):
            for busy in (False, True):
                spinner = ctx.Process(target=_spin, args=(CORES[-1],), daemon=True) if busy else None
                if spinner:
                    spinner.start()
                    time.sleep(0.2)
                for runtime, spin, conn, _ in workers:
                    time.sleep(IDLE_S)
                    conn.send(calls)
                    times[runtime, spin, busy].append(conn.recv())
                if spinner:
                    spinner.terminate()
                    spinner.join()
    finally:
        for _, _, conn, proc in workers:
            conn.send(None)
            proc.join(timeout=10)
    rows = []
    for runtime, spin, _, _ in workers:
        quiet, busy = (statistics.median(times[runtime, spin, b]) * 1e3 for b in (False, True))
        rows.append({"model": model_name, "runtime": runtime, "spin_us": spin, "quiet_ms": round(quiet, 2),
                     "busy_ms": round(busy, 2), "slowdown": round(busy / quiet, 2)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(MODELS), action="append")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=10, help="calls per worker per phase")
    ap.add_argument("--spin-us", default="", help="comma-separated TILEGRAD_SPIN_US values to time besides the "
                                                   "default")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if len(CORES) < 2:
        sys.exit("needs at least two cores: one to keep busy, one to run on")
    spin_us = [None] + [int(s) for s in args.spin_us.split(",") if s]
    rows = [r for name in (args.only or MODELS) for r in measure(name, spin_us, args.rounds, args.calls)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{len(CORES)} cores, the busy phase spins on core {CORES[-1]}")
    print(f"{'model':20s} {'runtime':12s} {'spin_us':>8s} {'quiet ms':>9s} {'busy ms':>9s} {'slowdown':>9s}")
    for r in rows:
        spin = "default" if r["spin_us"] is None else str(r["spin_us"])
        spin = spin if r["runtime"] == "tilegrad" else ""
        print(f"{r['model']:20s} {r['runtime']:12s} {spin:>8s} {r['quiet_ms']:9.2f} {r['busy_ms']:9.2f} "
              f"{r['slowdown']:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
