"""Search efficiency: Felix's gradient search against Ansor's evolutionary search on a network's task set.

Both policies get the same start, the same wall-clock budget and the same measurer settings, and record after
every round the best-so-far estimated end-to-end latency (sum over tasks of weight x best latency, a task's best
being its re-timed best: `tune_tasks(recheck=3)`, so the curves are not minima over lucky timings). Two starts:

- `--start scratch` (the papers' setting, the default): an empty records database. Each task's hand-written
  default schedule is timed once (it bounds the measurer's timeout) but does not count as measured, so the
  estimate is what the search itself found (the default sketch is still one of the sketches a search may
  propose), and is defined once every task has a working candidate.
- `--start defaults`: a copy of a database holding every task's default schedule, which counts as measured.

The table gives, per policy, the final estimate, the same estimate with each task's best candidate re-timed beside
the other policy's (`retime_bests`: even re-timed bests drift, as this machine's timings do by tens of percent
over minutes; the table's "rechecks" counts the search's re-timings), and the time and the number of measurements it took to reach 90/95/99% of the
best latency either policy found (reaching p% means best / latency >= p). Run:

    python benchmarks/search_efficiency.py --budget 600                      # ResNet-50 and BERT-base
    python benchmarks/search_efficiency.py --only resnet50 --budget 300 --json out.json --plot out.png
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from models import MODELS, _export  # benchmarks/models.py, beside this script

from tilegrad.tune.measure import MeasureInput, Measurer
from tilegrad.tune.records import Database
from tilegrad.tune.task import Task, extract_tasks
from tilegrad.tune.tuner import model_graph, tune_tasks

NETWORKS = {"resnet50": "ResNet-50", "bert_base": "BERT-base"}
POLICIES = ("gradient", "evolutionary")
LEVELS = (0.90, 0.95, 0.99)


def run_network(name: str, budget: float, workdir: Path, seed: int, scratch: bool) -> dict:
    module, args = MODELS[name]()
    tasks = extract_tasks(model_graph(_export(module.eval(), args)))
    base = workdir / f"{name}-base.db"
    with Measurer() as measurer:
        start = tune_tasks(tasks, base, trials=0, measurer=measurer, progress=False)  # the defaults only
        curves = {}
        for policy in POLICIES:
            db = workdir / f"{name}-{policy}.db"
            if scratch:
                db.unlink(missing_ok=True)
            else:
                shutil.copy(base, db)
            result = tune_tasks(tasks, db, policy=policy, budget=budget, measurer=measurer, seed=seed,
                                from_defaults=not scratch, confirm=0)  # the search alone
            # A round that ends after the budget does not count: both policies are compared at equal time.
            # The estimate is defined once every task has a working candidate (at once from the defaults).
            first = [] if scratch else [(0.0, 0, start.estimated_latency(False))]
            curve = first + [tuple(h) for h in result.history if h[0] <= budget and math.isfinite(h[2])]
            trials = max((h[1] for h in result.history if h[0] <= budget), default=0)
            final = curve[-1][2] if curve else math.inf
            curves[policy] = {"curve": curve, "trials": trials, "rechecks": result.rechecks,
                              "final_ms": final * 1e3 if curve else None}
            print(f"{name} {policy}: {trials} trials within the budget, final {final * 1e3:.2f} ms", file=sys.stderr)
        retimed = retime_bests(tasks, {policy: workdir / f"{name}-{policy}.db" for policy in POLICIES}, measurer)
    for policy, latency in retimed.items():
        curves[policy]["retimed_ms"] = latency * 1e3
        print(f"{name} {policy}: its best candidates re-timed side by side: {latency * 1e3:.2f} ms", file=sys.stderr)
    best = min((c["curve"][-1][2] for c in curves.values() if c["curve"]), default=math.inf)
    for c in curves.values():
        for level in LEVELS:
            hit = next(((t, n) for t, n, lat in c["curve"] if best / lat >= level), (None, None))
            c[f"time_to_{round(level * 100)}"], c[f"trials_to_{round(level * 100)}"] = hit
    return {"network": name, "tasks": len(tasks), "budget_s": budget, "start": "scratch" if scratch else "defaults",
            "best_ms": best * 1e3 if math.isfinite(best) else None,
            "untuned_ms": start.estimated_latency(False) * 1e3, "policies": curves}


def retime_bests(tasks: list[Task], dbs: dict[str, Path], measurer: Measurer, passes: int = 3) -> dict[str, float]:
    """Each policy's estimate, with every task's best record timed again, all policies' candidates in one batch
    per pass (so a slow spell of the machine hits both policies alike) and the median of the passes taken. The
    curves' figures are minima over many noisy timings; these are the figures a user of the records would see."""
    entries: list[tuple[str, Task]] = []
    inputs: list[MeasureInput] = []
    for policy, path in dbs.items():
        with Database(path) as db:
            for task in tasks:
                rec = db.best(task.key)
                if rec is not None:
                    entries.append((policy, task))
                    inputs.append(MeasureInput(task, rec.trace))
    timings = [[] for _ in inputs]
    for _ in range(passes):
        for i, r in enumerate(measurer.measure(inputs)):
            timings[i].append(r.latency)
    out = dict.fromkeys(dbs, 0.0)
    for (policy, task), costs in zip(entries, timings):
        out[policy] += task.weight * statistics.median(costs)
    for policy in dbs:
        if sum(p == policy for p, _ in entries) < len(tasks):
            out[policy] = math.inf  # a task without a working candidate: no estimate
    return out


def table(results: list[dict]) -> str:
    head = f"{'network':<10} {'policy':<13} {'trials':>6} {'rechecks':>8} {'final ms':>9} {'re-timed':>9}" + "".join(
        f" {f'{round(p * 100)}% at s (n)':>17}" for p in LEVELS)
    lines = [head]
    for r in results:
        for policy, c in r["policies"].items():
            cells = "".join(
                f" {'never':>17}" if c[f"time_to_{round(p * 100)}"] is None else
                f" {c[f'time_to_{round(p * 100)}']:>10.0f} ({c[f'trials_to_{round(p * 100)}']:>4})" for p in LEVELS)
            final = "-" if c["final_ms"] is None else f"{c['final_ms']:.2f}"
            retimed = c.get("retimed_ms", math.inf)
            retimed = "-" if not math.isfinite(retimed) else f"{retimed:.2f}"
            lines.append(f"{r['network']:<10} {policy:<13} {c['trials']:>6} {c.get('rechecks', 0):>8} {final:>9} "
                         f"{retimed:>9}{cells}")
        g, e = r["policies"]["gradient"], r["policies"]["evolutionary"]
        for p in LEVELS:
            key = f"time_to_{round(p * 100)}"
            if g[key] is not None and e[key] is not None and max(g[key], e[key]) > 0:
                lines.append(f"{r['network']:<10} {round(p * 100)}%: gradient reached it "
                             f"{e[key] / max(g[key], 1e-9):.1f}x sooner than evolutionary")
    return "\n".join(lines)


def plot(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.6 * len(results)), squeeze=False)
    for row, r in zip(axes, results):
        for policy, c in r["policies"].items():
            t, n, lat = zip(*c["curve"] or [(0, 0, math.nan)])
            ms = [v * 1e3 for v in lat]
            row[0].step(t, ms, where="post", label=policy)
            row[1].step(n, ms, where="post", label=policy)
        for ax, xlabel in zip(row, ("wall-clock seconds", "measurements")):
            ax.axhline(r["untuned_ms"], color="grey", linestyle=":", label="hand-written defaults")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("estimated latency (ms)")
            ax.set_title(NETWORKS.get(r["network"], r["network"]))
            ax.legend()
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(NETWORKS), help="networks, comma-separated: " + ", ".join(NETWORKS))
    p.add_argument("--budget", type=float, default=600.0, help="seconds of tuning per network and policy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", choices=("scratch", "defaults"), default="scratch",
                   help="search from nothing (the papers' setting) or from the hand-written default schedules")
    p.add_argument("--workdir", default=None, help="where the records databases go (default: a temporary dir)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", default=None, metavar="PNG", help="plot best-so-far curves (needs matplotlib)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        results = []
        for name in args.only.split(","):
            results.append(run_network(name, args.budget, workdir, args.seed, args.start == "scratch"))
            if args.json:  # written after each network, so a long run keeps what it has
                Path(args.json).write_text(json.dumps(results, indent=1))
    print(table(results))
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
