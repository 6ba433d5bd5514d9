"""Latency of a call that follows a pause, as a server with gaps between its requests sees it: tilegrad and ONNX
Runtime (its default spinning workers, and without spinning) on models of `models.py`. Run:

    python benchmarks/pauses.py                                  # MobileNetV2 and DCGAN, pauses 0, 2, 10, 50 ms
    python benchmarks/pauses.py --only resnet50 --pauses 0,50 --json

On a VM a vCPU idle for more than a few milliseconds is handed back to the host, and a runtime whose call waits
for a thread woken on it pays the host's time slices (docs/benchmarks.md, "Calls after a pause"). For each pause,
the contenders take turns (one second of idle between turns); each turn times `--calls` calls, each after a sleep
of the pause. Figures are medians over the rounds of each turn's median call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))  # models.py, beside this script

IDLE_S = 1.0  # between two contenders' turns: the last one's workers stop spinning


def contenders(name: str, directory: Path) -> dict:
    """{contender: a call with fixed inputs} for model `name` of models.py, exported to ONNX in `directory`."""
    import onnxruntime as ort
    import torch

    import models
    import tilegrad

    net, args = models.MODELS[name]()
    path = directory / f"{name}.onnx"
    torch.onnx.export(net.eval(), args, str(path), dynamo=False, opset_version=17)
    feeds = [a.numpy() for a in args]
    module = tilegrad.compile(str(path))
    sessions = {}
    for label, spinning in (("onnxruntime", "1"), ("onnxruntime, no spinning", "0")):
        options = ort.SessionOptions()
        options.intra_op_num_threads = tilegrad.config.get().num_threads
        options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
        sessions[label] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in sessions["onnxruntime"].get_inputs()]
    out = {"tilegrad": lambda: module(*feeds)}
    for label, session in sessions.items():
        out[label] = lambda s=session: s.run(None, dict(zip(names, feeds)))
    return out


def measure(name: str, pauses: list[float], rounds: int, calls: int, directory: Path) -> list[dict]:
    calls_of = contenders(name, directory)
    for call in calls_of.values():  # warm up, and build whatever is lazy
        for _ in range(3):
            call()
    rows = []
    for pause in pauses:
        medians: dict[str, list[float]] = {label: [] for label in calls_of}
        for _ in range(rounds):
            for label, call in calls_of.items():
                time.sleep(IDLE_S)
                times = []
                for _ in range(calls):
                    time.sleep(pause / 1e3)
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                medians[label].append(statistics.median(times))
        ms = {label: 1e3 * statistics.median(v) for label, v in medians.items()}
        rows.append({"model": name, "pause_ms": pause, **{f"{label} ms": round(v, 3) for label, v in ms.items()},
                     "vs onnxruntime": round(ms["onnxruntime"] / ms["tilegrad"], 3)})
    return rows


def main(argv=None) -> int:
    import tempfile

    import tilegrad
    from tilegrad.target import host

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--only", default="mobilenet_v2,dcgan_generator", help="comma-separated models of models.py")
    parser.add_argument("--pauses", default="0,2,10,50", help="comma-separated pauses before each call, in ms")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args(argv)
    pauses = [float(p) for p in args.pauses.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [row for name in args.only.split(",")
                for row in measure(name, pauses, args.rounds, args.calls, Path(tmp))]
    machine = host()
    if args.json:
        print(json.dumps({"cpu": machine.model, "isa": machine.isa, "rows": rows}, indent=1))
        return 0
    print(f"threads: {tilegrad.config.get().num_threads}; CPU: {machine.model} ({machine.isa}); medians of "
          f"{args.rounds} rounds of {args.calls} calls, each after its pause")
    labels = [k for k in rows[0] if k.endswith(" ms") and k != "pause_ms"]
    print(f"{'model':16s} {'pause ms':>8s} " + " ".join(f"{k:>28s}" for k in labels) + "  vs onnxruntime")
    for row in rows:
        print(f"{row['model']:16s} {row['pause_ms']:8.0f} " + " ".join(f"{row[k]:28.2f}" for k in labels)
              + f"  {row['vs onnxruntime']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
