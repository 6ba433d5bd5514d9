"""Search efficiency: Felix's gradient search against Ansor's evolutionary search and AutoTVM's templates on a
network's task set.

All policies get the same start (nothing built: each its own measurer and an empty kernel cache), the same
wall-clock budget and the same measurer settings. They run by turns (`tilegrad.tools.turns`): one at a time, each
for some seconds of its own clock (`--turn`), so that a slow spell of the machine, minutes long on a shared host,
falls on all rather than on whichever ran during it; each one's clock counts only its own turns. Each records
after every round the best-so-far estimated end-to-end latency (sum over tasks of weight x best latency, a task's
best being its re-timed best: `TuneOptions(recheck=3)`, so the curves are not minima over lucky timings). Two
starts:

- `--start scratch` (the papers' setting, the default): an empty records database. Each task's hand-written
  default schedule is timed once (it bounds the measurer's timeout) but does not count as measured, so the
  estimate is what the search itself found (the default sketch is still one of the sketches a search may
  propose), and is defined once every task has a working candidate.
- `--start defaults`: a copy of a database holding every task's default schedule, which counts as measured.

Each search's own curve is made of its own timings, taken minutes apart on a machine whose speed drifts by tens of
percent over minutes, so the curves are re-timed (`retimed_curves`): every candidate that was some
task's best at some moment, in any policy, and every task's hand-written default are timed again at the end,
one batch over all of them per pass, shuffled, three passes, medians; each policy's curve is then rebuilt from
those figures and the moments its bests changed. The search still decides what is best (by its own timings, each
new best confirmed beside the old one); the re-timing only measures what it decided, all candidates under the
same conditions. The times and the measurements to reach 90/95/99% of the best any policy found (best /
latency >= p) are read off the re-timed curves, and so is each policy's latency once it had measured
TRIALS_PER_TASK candidates per task ("never" where the budget ended first); the table also gives each search's own
final estimate and its ratio to the re-timed one (how far its own curve can be trusted). Networks are those of
models.py or `zoo:<name>`, a zoo architecture at full size (the cost model's held-out networks). Run:

    python benchmarks/search_efficiency.py --budget 600                      # ResNet-50 and BERT-base
    python benchmarks/search_efficiency.py --only resnet50 --budget 300 --json out.json --plot out.png
    python benchmarks/search_efficiency.py --only zoo:squeezenet1_0,zoo:mobilevit --budget 300
    python benchmarks/search_efficiency.py --only bert_base --policies gradient,gradient:screen=0,autotvm

`--policies` names the contenders, the first compared with the others; `name:field=value` is a registered
policy with one of its settings changed (an ablation).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from models import MODELS, _export  # benchmarks/models.py, beside this script

from tilegrad import config
from tilegrad.schedule.trace import Trace
from tilegrad.tools.turns import run_by_turns
from tilegrad.tune.callbacks import default_callbacks
from tilegrad.tune.confirm import retime
from tilegrad.tune.measure import MeasureInput, Measurer
from tilegrad.tune.model import model_graph
from tilegrad.tune.results import TuneResult
from tilegrad.tune.search import make_policy
from tilegrad.tune.task import Task, extract_tasks
from tilegrad.tune.tuner import tune_tasks
from tilegrad.tune.tuning_run import TuneOptions

NETWORKS = {"resnet50": "ResNet-50", "bert_base": "BERT-base"}  # the default; any of models.py, or zoo:<name>
POLICIES = ("gradient", "evolutionary", "autotvm")  # the default contenders
LEVELS = (0.90, 0.95, 0.99)
TRIALS_PER_TASK = 64  # the fixed measurement budget a policy's latency is also compared at


def network(name: str):
    """(module, example inputs) of a benchmark model (models.py) or, as `zoo:<name>`, of a zoo architecture
    (zoo.py, full size): the cost model's held-out networks come from the zoo."""
    if name.startswith("zoo:"):
        import zoo

        return zoo.build(name.removeprefix("zoo:"), "full")
    return MODELS[name]()


def policy_of(label: str):
    """The policy a `--policies` entry names: `name`, or `name:field=value` (a setting changed)."""
    name, _, setting = label.partition(":")
    policy = make_policy(name)
    if not setting:
        return policy
    field, _, value = setting.partition("=")
    default = getattr(policy, field)
    return dataclasses.replace(policy, **{field: type(default)(float(value)) if not isinstance(default, bool)
                                          else value.lower() in ("1", "true", "yes")})


def run_network(name: str, budget: float, workdir: Path, seed: int, scratch: bool, turn_s: float,
                policies: tuple[str, ...] = POLICIES) -> dict:
    module, args = network(name)
    tasks = extract_tasks(model_graph(_export(module.eval(), args)))
    base = workdir / f"{name}-base.db"
    with Measurer() as measurer:
        start = tune_tasks(tasks, base, options=TuneOptions(trials=0), measurer=measurer,  # the defaults only
                           callbacks=default_callbacks(progress=False))

    def search(policy: str):
        def job(clock) -> TuneResult:
            db = workdir / f"{name}-{policy.replace(':', '-').replace('=', '')}.db"
            if scratch:
                db.unlink(missing_ok=True)
            else:
                shutil.copy(base, db)
            # Each policy starts with nothing built: its own measurer and an empty kernel cache. Shared, the second
            # policy built for free whatever the first had built (defaults, small tasks' few schedules).
            with tempfile.TemporaryDirectory(prefix=f"tilegrad-{policy}-cache-") as cache, \
                    Measurer(cfg=dataclasses.replace(config.get(), cache_dir=Path(cache))) as measurer:
                # The search alone: no final confirmation.
                options = TuneOptions(budget=budget, seed=seed, from_defaults=not scratch, confirm=0)
                return tune_tasks(tasks, db, policy_of(policy), options, measurer=measurer, clock=clock)
        return job

    runs: dict[str, TuneResult] = run_by_turns({p: search(p) for p in policies}, turn_s=turn_s)
    curves = {}
    for policy, result in runs.items():
        # A round that ends after the budget does not count: the policies are compared at equal time.
        # The estimate is defined once every task has a working candidate (at once from the defaults).
        first = [] if scratch else [(0.0, 0, start.estimated_latency(False))]
        own = first + [tuple(h) for h in result.history if h[0] <= budget and math.isfinite(h[2])]
        trials = max((h[1] for h in result.history if h[0] <= budget), default=0)
        curves[policy] = {"own_curve": own, "trials": trials, "rechecks": result.rechecks,
                          "own_final_ms": own[-1][2] * 1e3 if own else None,
                          "incumbents": [list(i) for i in result.incumbents]}
        print(f"{name} {policy}: {trials} trials within the budget, its own final estimate "
              f"{own[-1][2] * 1e3 if own else math.inf:.2f} ms", file=sys.stderr)
    with Measurer(abandon_slower_than=None) as measurer:  # the early bests of a curve are re-timed in full too
        retimed, defaults = retimed_curves(tasks, runs, budget, measurer)
    for policy, curve in retimed.items():
        curves[policy]["curve"] = curve
        curves[policy]["final_ms"] = curve[-1][2] * 1e3 if curve else None
        print(f"{name} {policy}: re-timed final {curve[-1][2] * 1e3 if curve else math.inf:.2f} ms", file=sys.stderr)
    best = min((lat for c in curves.values() for _, _, lat in c["curve"]), default=math.inf)
    fixed = TRIALS_PER_TASK * len(tasks)
    for c in curves.values():
        for level in LEVELS:
            hit = next(((t, n) for t, n, lat in c["curve"] if best / lat >= level), (None, None))
            c[f"time_to_{round(level * 100)}"], c[f"trials_to_{round(level * 100)}"] = hit
        # the re-timed latency once the policy had measured TRIALS_PER_TASK per task (None: it never did)
        at_fixed = [lat for _, n, lat in c["curve"] if n <= fixed]
        c["ms_at_fixed_trials"] = at_fixed[-1] * 1e3 if at_fixed and c["trials"] >= fixed else None
        # how far the policy's own final estimate is from the re-timed one: what its own curve is worth
        c["own_over_retimed"] = (c["own_final_ms"] / c["final_ms"] if c["own_final_ms"] and c["final_ms"]
                                 else None)
    return {"network": name, "tasks": len(tasks), "budget_s": budget, "start": "scratch" if scratch else "defaults",
            "fixed_trials": fixed,
            "best_ms": best * 1e3 if math.isfinite(best) else None,
            "untuned_ms": start.estimated_latency(False) * 1e3, "untuned_retimed_ms": defaults * 1e3,
            "policies": curves}


def retimed_curves(tasks: list[Task], runs: dict[str, TuneResult], budget: float, measurer: Measurer,
                   passes: int = 3) -> tuple[dict[str, list[tuple[float, int, float]]], float]:
    """Each policy's best-so-far curve with every best re-timed, and the hand-written defaults' estimate timed in
    the same passes. All candidates that were a task's best within the budget, in any policy, and every task's
    default are timed `passes` times, each pass one batch over all of them in a shuffled order (so a slow spell of
    the machine, or a position in the batch, favours no policy); a curve point is the sum over tasks of weight x
    the median re-timing of the task's best at that moment, defined once every task has a best."""
    by_key = {t.key: t for t in tasks}
    defaults = {t.key: t.default_trace().to_json() for t in tasks}
    keys = sorted({(key, trace) for r in runs.values() for t, _, key, trace in r.incumbents if t <= budget}
                  | set(defaults.items()))
    timings = retime(measurer, [MeasureInput(by_key[key], Trace.from_json(trace)) for key, trace in keys], passes)
    latency = {k: statistics.median(r.latency for r in results) for k, results in zip(keys, timings)}
    out = {}
    for policy, run in runs.items():
        events, best, curve = list(run.incumbents), {}, []
        for t, n, _ in [(0.0, 0, math.nan), *(h for h in run.history if h[0] <= budget)]:  # 0: the defaults' start
            while events and events[0][0] <= t:
                _, _, key, trace = events.pop(0)
                best[key] = latency[(key, trace)]
            if len(best) == len(tasks) and all(math.isfinite(v) for v in best.values()):
                curve.append((t, n, sum(by_key[key].weight * v for key, v in best.items())))
        out[policy] = curve
    return out, sum(t.weight * latency[(t.key, defaults[t.key])] for t in tasks)


def table(results: list[dict]) -> str:
    head = (f"{'network':<10} {'policy':<18} {'trials':>6} {'rechecks':>8} {'own final':>9} {'re-timed':>9} "
            f"{'own/re':>6} {f'at {TRIALS_PER_TASK}/task':>11}" + "".join(f" {f'{round(p * 100)}% at s (n)':>17}"
                                                                          for p in LEVELS))
    lines = [head]
    for r in results:
        for policy, c in r["policies"].items():
            cells = "".join(
                f" {'never':>17}" if c[f"time_to_{round(p * 100)}"] is None else
                f" {c[f'time_to_{round(p * 100)}']:>10.0f} ({c[f'trials_to_{round(p * 100)}']:>4})" for p in LEVELS)
            own = "-" if c["own_final_ms"] is None else f"{c['own_final_ms']:.2f}"
            final = "-" if c["final_ms"] is None else f"{c['final_ms']:.2f}"
            ratio = "-" if c["own_over_retimed"] is None else f"{c['own_over_retimed']:.3f}"
            fixed = "never" if c["ms_at_fixed_trials"] is None else f"{c['ms_at_fixed_trials']:.2f}"
            lines.append(f"{r['network']:<10} {policy:<18} {c['trials']:>6} {c['rechecks']:>8} {own:>9} {final:>9} "
                         f"{ratio:>6} {fixed:>11}{cells}")
        lines.append(f"{r['network']:<10} hand-written defaults: {r['untuned_ms']:.2f} ms at the start, "
                     f"{r['untuned_retimed_ms']:.2f} ms re-timed with the bests")
        first, *others = r["policies"]
        g = r["policies"][first]
        for other in others:
            e = r["policies"][other]
            if g["ms_at_fixed_trials"] and e["ms_at_fixed_trials"]:
                lines.append(f"{r['network']:<10} at {TRIALS_PER_TASK} trials per task: {first} "
                             f"{e['ms_at_fixed_trials'] / g['ms_at_fixed_trials']:.2f}x faster than {other}")
            for p in LEVELS:
                key = f"time_to_{round(p * 100)}"
                if g[key] is not None and e[key] is not None and max(g[key], e[key]) > 0:
                    lines.append(f"{r['network']:<10} {round(p * 100)}%: {first} reached it "
                                 f"{e[key] / max(g[key], 1e-9):.1f}x sooner than {other}")
    return "\n".join(lines)


def plot(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.6 * len(results)), squeeze=False)
    for row, r in zip(axes, results):
        for k, (policy, c) in enumerate(r["policies"].items()):
            for key, style, label in (("curve", "-", f"{policy}, re-timed"), ("own_curve", ":", f"{policy}, own")):
                t, n, lat = zip(*c[key] or [(0, 0, math.nan)])
                ms = [v * 1e3 for v in lat]
                row[0].step(t, ms, style, where="post", label=label, color=f"C{k}")
                row[1].step(n, ms, style, where="post", label=label, color=f"C{k}")
        for ax, xlabel in zip(row, ("wall-clock seconds", "measurements")):
            ax.axhline(r["untuned_retimed_ms"], color="grey", linestyle="--", label="hand-written defaults, re-timed")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("estimated latency (ms)")
            ax.set_title(NETWORKS.get(r["network"], r["network"]))
            ax.legend()
            ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(NETWORKS),
                   help="networks, comma-separated: " + ", ".join(MODELS) + ", or zoo:<architecture>")
    p.add_argument("--budget", type=float, default=600.0, help="seconds of tuning per network and policy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--turn", type=float, default=20.0,
                   help="seconds of its own time each policy runs before handing the machine to the next")
    p.add_argument("--start", choices=("scratch", "defaults"), default="scratch",
                   help="search from nothing (the papers' setting) or from the hand-written default schedules")
    p.add_argument("--policies", default=",".join(POLICIES),
                   help="contenders, comma-separated, the first compared with the others: a policy's name, or "
                        "name:field=value for one setting changed")
    p.add_argument("--workdir", default=None, help="where the records databases go (default: a temporary dir)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", default=None, metavar="PNG", help="plot best-so-far curves (needs matplotlib)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        results = []
        for name in args.only.split(","):
            results.append(run_network(name, args.budget, workdir, args.seed, args.start == "scratch", args.turn,
                                       tuple(args.policies.split(","))))
            if args.json:  # written after each network, so a long run keeps what it has
                Path(args.json).write_text(json.dumps(results, indent=1))
    print(table(results))
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
