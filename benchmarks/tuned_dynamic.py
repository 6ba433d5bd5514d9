"""A dynamic module tuned for a distribution of lengths against the same module untuned and ONNX Runtime: GPT-2
(transformers, random weights, `--layers` layers of GPT-2 small's width) exported with a dynamic `seq`, tuned with
`tilegrad.tune(dynamic=)` for `--budget` seconds, then `compile(dynamic=)` with and without the records timed at
`--lengths` log-spaced lengths in interleaved rounds (a pause between runtimes). With `--compare`, the model is
tuned twice with the same budget, each dynamic kernel as one task over the points (Felix's descent on the
features bound at every point, `tune/range_task.py`: "tuned") and with a task per point and a choice among their
best ("apart"), and both are timed. Each tuning ends by timing the module at its sample points with the records and
without ("confirmed_s", summed over the points), and compile replays the records only where they were faster
("chosen": "tuned", else "untuned", and then the "tuned" module is the untuned one). Run:

    python benchmarks/tuned_dynamic.py                         # table
    python benchmarks/tuned_dynamic.py --budget 300 --json     # {"cpu", "isa", "tunings": {"tuned": {"tune_s",
                                                               #  "trials", "points", "kernels", "confirmed_s",
                                                               #  "chosen"}}, "rows": [{"seq",
                                                               #  "untuned_ms", "tuned_ms", "onnxruntime_ms"}]}
    python benchmarks/tuned_dynamic.py --compare               # "apart" beside "tuned"

The sample points are the tuner's default (three log-spaced values of the bounds); the lengths timed include
values between and beyond them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from timing import median_time  # benchmarks/timing.py, beside this script

IDLE_S = 0.3
LOW, HIGH = 16, 512


def _export(layers: int, path: Path) -> None:
    import transformers
    from torch.export import Dim

    torch.manual_seed(0)
    model = transformers.GPT2Model(transformers.GPT2Config(n_layer=layers)).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, use_cache=False).last_hidden_state

    ids = torch.zeros((1, 32), dtype=torch.int64)
    program = torch.onnx.export(LastHidden().eval(), (ids,), dynamic_shapes={"ids": {1: Dim("seq", min=1, max=HIGH)}},
                                dynamo=True, verbose=False)
    program.save(str(path))


def measure(layers: int, budget: float, count: int, rounds: int, repeats: int, compare: bool) -> dict:
    import onnxruntime as ort

    import tilegrad

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpt2.onnx"
        _export(layers, path)
        bounds = {"seq": (LOW, HIGH)}
        modules, tunings = {"untuned": tilegrad.compile(path, dynamic=bounds)}, {}
        for label, apart in [("tuned", False)] + [("apart", True)] * compare:
            db = Path(tmp) / f"{label}.db"
            start = time.perf_counter()
            result = tilegrad.tune(path, db=db, dynamic=bounds, budget=budget, points_apart=apart, progress=False)
            confirmed = result.graph
            tunings[label] = {"tune_s": time.perf_counter() - start, "trials": result.trials,
                              "points": result.points, "kernels": len(result.distribution or {}),
                              "confirmed_s": confirmed and confirmed.seconds, "chosen": confirmed and confirmed.chosen}
            modules[label] = tilegrad.compile(path, dynamic=bounds, db=db)
        tuned = modules["tuned"]
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        lengths = sorted({round(LOW * (HIGH / LOW) ** (k / max(1, count - 1))) for k in range(count)})
        rows = []
        for n in lengths:
            x = np.random.default_rng(n).integers(0, 50257, (1, n))
            want = session.run(None, {"ids": x})[0]
            got = tuned(x)
            error = float(np.abs(got - want).max() / max(1e-6, np.abs(want).max()))
            contenders = {**{k: (lambda m=m: m(x)) for k, m in modules.items()},
                          "onnxruntime": lambda: session.run(None, {"ids": x})}
            times = {k: [] for k in contenders}
            for _ in range(rounds):
                for k, fn in contenders.items():
                    times[k].append(median_time(fn, repeats))
                    time.sleep(IDLE_S)
            rows.append({"seq": n, "max_rel_error": error,
                         **{f"{k}_ms": 1e3 * statistics.median(v) for k, v in times.items()}})
    return {"layers": layers, "budget_s": budget, "tunings": tunings, "rows": rows}


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--budget", type=float, default=180.0, help="tuning seconds")
    parser.add_argument("--lengths", type=int, default=8, help="lengths timed, log-spaced 16 to 512")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compare", action="store_true",
                        help="also tune with a task per sample point (the same budget) and time it beside")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from tilegrad.target import host

    target = host()
    r = measure(args.layers, args.budget, args.lengths, args.rounds, args.repeats, args.compare)
    if args.json:
        json.dump({"cpu": target.model, "isa": target.isa, **r}, sys.stdout, indent=1)
        print()
        return 0
    print(f"CPU: {target.model} ({target.isa}); GPT-2 of {r['layers']} layers")
    for label, t in r["tunings"].items():
        print(f"{label}: {t['tune_s']:.0f} s, {t['trials']} candidates, {t['points']} points, {t['kernels']} dynamic "
              "kernels scheduled" + (f"; the module at the points, untuned {t['confirmed_s']['untuned'] * 1e3:.2f} ms, "
                                     f"with the records {t['confirmed_s']['tuned'] * 1e3:.2f} ms -> {t['chosen']}"
                                     if t["chosen"] else ""))
    labels = ["untuned", *r["tunings"], "onnxruntime"]
    print(f"{'seq':>5} " + " ".join(f"{k[:11] + ' ms':>14}" for k in labels) + " "
          + " ".join(f"{k[:11] + '/tuned':>17}" for k in labels if k != "tuned") + f" {'err':>8}")
    for row in r["rows"]:
        print(f"{row['seq']:>5} " + " ".join(f"{row[k + '_ms']:>14.2f}" for k in labels) + " "
              + " ".join(f"{row[k + '_ms'] / row['tuned_ms']:>17.3f}" for k in labels if k != "tuned")
              + f" {row['max_rel_error']:>8.1e}")
    print("geomean " + ", ".join(f"{k}/tuned {_geomean(x[k + '_ms'] / x['tuned_ms'] for x in r['rows']):.3f}"
                                 for k in labels if k != "tuned"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
