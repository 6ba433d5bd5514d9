"""The tuner's estimate against the model: the sum of a model's kernels timed one at a time (default schedules, as
the tuner's runner times them: warm, weights evicted, everything evicted) against the compiled model's measured
latency, per model of benchmarks/models.py. No tuning: the figure says how well the tuner's timings predict a
model call before any search leans on them. Run:

    python benchmarks/estimate.py                         # table
    python benchmarks/estimate.py --only resnet50 --json  # [{"model", "cpu", "isa", "model_ms", "kernels_ms",
                                                          #   "estimate_ms": {"none", "weights", "all"},
                                                          #   "ratio": {"none", "weights", "all"}}]

"model_ms" is the compiled model's median latency over interleaved rounds (its call overhead included),
"kernels_ms" the sum of its kernels timed inside the model (the profile); "estimate_ms" the sum over the tuning
tasks of weight x the runner's timing of the default schedule, per eviction mode (`LocalRunner(cold=...)`), and
"ratio" estimate / model. The runner's default mode is "weights".
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from models import MODELS, _export  # benchmarks/models.py, beside this script
from timing import median_time

MODES = ("none", "weights", "all")


def measure(name: str, rounds: int) -> dict:
    import tilegrad
    from tilegrad import config
    from tilegrad.target import host
    from tilegrad.tune.measure import MeasureInput, Measurer
    from tilegrad.tune.measure.runner import LocalRunner
    from tilegrad.tune.model import model_tasks

    module, args = MODELS[name]()
    model = _export(module.eval(), args)
    feeds = {f"in{i}": a.numpy() for i, a in enumerate(args)}
    compiled = tilegrad.compile(model)
    tasks = model_tasks(model, algorithms=False)
    sums: dict[str, list[float]] = {mode: [] for mode in MODES}
    latencies = []
    for _ in range(rounds):  # the model and each mode by turns, so a slow spell falls on all
        latencies.append(median_time(lambda: compiled(**feeds), 10))
        for mode in MODES:
            with Measurer(runner=LocalRunner(config.get(), cold=mode)) as m:
                results = m.measure([MeasureInput(t, t.default_trace()) for t in tasks])
            sums[mode].append(sum(t.weight * r.latency for t, r in zip(tasks, results)))
    profile = compiled.profile(**feeds, repeats=10)
    latency = statistics.median(latencies)
    estimate = {mode: statistics.median(s) for mode, s in sums.items()}
    target = host()
    return {"model": name, "cpu": target.model, "isa": target.isa, "model_ms": latency * 1e3,
            "kernels_ms": profile.kernels_s * 1e3, "estimate_ms": {k: v * 1e3 for k, v in estimate.items()},
            "ratio": {k: v / latency for k, v in estimate.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for name in args.only.split(",") if args.only else list(MODELS):
        rows.append(measure(name, args.rounds))
        if not args.json:
            print(f"  measured {name}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"CPU: {rows[0]['cpu']} ({rows[0]['isa']}); estimate / model latency, by what the runner evicts")
    print(f"{'model':<16}{'model ms':>9}{'kernels ms':>11}" + "".join(f"{m:>9}" for m in MODES))
    for r in rows:
        print(f"{r['model']:<16}{r['model_ms']:>9.2f}{r['kernels_ms']:>11.2f}"
              + "".join(f"{r['ratio'][m]:>9.2f}" for m in MODES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
