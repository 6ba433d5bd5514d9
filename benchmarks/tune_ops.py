"""Tuned single operators against PyTorch and ONNX Runtime: matmul 1024^3 and ResNet-50's 3x3 convolutions.

Each operator is a one-node ONNX model with constant weights (as in a real model), compiled by tilegrad's graph
passes into its kernel; that kernel is tuned (Ansor's evolutionary search unless `--policy gradient`) for
`--trials` candidates, then the default and the tuned kernel are timed side by side with PyTorch and ONNX Runtime
(medians, interleaved rounds, a pause between runtimes). Run:

    python benchmarks/tune_ops.py                   # table
    python benchmarks/tune_ops.py --json            # [{"name", "trials", "tune_s", "default_ms", "tuned_ms",
                                                    #   "torch_ms", "onnxruntime_ms"}]
    python benchmarks/tune_ops.py --only matmul_1024 --trials 64
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
from timing import median_time  # benchmarks/timing.py, beside this script
from torch import nn

import tilegrad
from tilegrad.tune.callbacks import default_callbacks
from tilegrad.tune.model import model_graph
from tilegrad.tune.search import POLICIES
from tilegrad.tune.task import extract_tasks
from tilegrad.tune.tuner import tune_tasks
from tilegrad.tune.tuning_run import TuneOptions

THREADS = os.cpu_count() or 1
IDLE_S = 0.5


class MatMul(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, n) / n ** 0.5)

    def forward(self, x):
        return x @ self.w


def _conv(c, hw):
    return nn.Conv2d(c, c, 3, padding=1, bias=False), (torch.randn(1, c, hw, hw),)


OPS = {
    "matmul_1024": lambda: (MatMul(1024), (torch.randn(1024, 1024),)),
    "conv3x3_64x56": lambda: _conv(64, 56),
    "conv3x3_128x28": lambda: _conv(128, 28),
    "conv3x3_256x14": lambda: _conv(256, 14),
    "conv3x3_512x7": lambda: _conv(512, 7),
}


def _onnx(module, args) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, input_names=["x"], dynamo=False)
    return buf.getvalue()


def run(name: str, trials: int, rounds: int, db_dir: str, policy: str) -> dict:
    module, args = OPS[name]()
    module.eval()
    proto = _onnx(module, args)
    x = args[0].numpy()
    db = os.path.join(db_dir, f"{name}.db")
    tasks = extract_tasks(model_graph(proto))
    t0 = time.monotonic()
    result = tune_tasks(tasks, db, policy, TuneOptions(trials=trials),
                        callbacks=default_callbacks(progress=sys.stderr.isatty()))
    tune_s = time.monotonic() - t0
    default = tilegrad.compile(proto)
    tuned = tilegrad.compile(proto, db=db)
    np.testing.assert_allclose(tuned(x), default(x), rtol=1e-3, atol=1e-3)

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    sess = ort.InferenceSession(proto, opts, providers=["CPUExecutionProvider"])
    torch.set_num_threads(THREADS)
    runners = {
        "default": lambda: default(x),
        "tuned": lambda: tuned(x),
        "torch": lambda: module(args[0]),
        "onnxruntime": lambda: sess.run(None, {"x": x}),
    }
    times: dict[str, list[float]] = {k: [] for k in runners}
    with torch.no_grad():
        for _ in range(rounds):
            for key, fn in runners.items():
                time.sleep(IDLE_S)
                times[key].append(median_time(fn, repeats=5))
    med = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    return {"name": name, "policy": policy, "trials": result.trials, "tune_s": round(tune_s, 1), "default_ms": med["default"],
            "tuned_ms": med["tuned"], "torch_ms": med["torch"], "onnxruntime_ms": med["onnxruntime"],
            "gflops_tuned": sum(t.flops * t.weight for t in tasks) / med["tuned"] / 1e6}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(OPS), help="comma-separated: " + ", ".join(OPS))
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--policy", choices=sorted(POLICIES), default="evolutionary")
    p.add_argument("--db-dir", default=None, help="keep the records databases here (default: a temporary dir)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            rows.append(run(name, args.trials, args.rounds, args.db_dir or tmp, args.policy))
            if not args.json:
                r = rows[-1]
                best_peer = min(r["torch_ms"], r["onnxruntime_ms"])
                print(f"{r['name']:<16} trials {r['trials']:>4} tune {r['tune_s']:>6.0f} s  default "
                      f"{r['default_ms']:8.3f} ms  tuned {r['tuned_ms']:8.3f} ms ({r['gflops_tuned']:6.1f} GFLOP/s)"
                      f"  torch {r['torch_ms']:8.3f}  ORT {r['onnxruntime_ms']:8.3f}  "
                      f"tuned speed vs best peer {best_peer / r['tuned_ms']:.2f}x", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
