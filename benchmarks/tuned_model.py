"""A model compiled with its tuning records against the same model untuned: `tilegrad.compile(model)` and
`tilegrad.compile(model, db=...)` on one input, outputs compared, then timed in interleaved rounds, and each
database's choice of convolution algorithms counted. The figure of merit is the median over rounds of each
round's tuned/untuned ratio (paired, so a slow spell of the machine hits both), with its interquartile range, a
bootstrap 95% interval of that median (rounds resampled) and the number of rounds the variant won. Run:

    python benchmarks/tuned_model.py --model resnet50 --db tune.db                # records already there
    python benchmarks/tuned_model.py --model resnet50 --db a.db --db b.db --json  # several databases
    python benchmarks/tuned_model.py --model resnet50 --tune-budget 600 --policy gradient --db new.db
                                                                                  # tune first, then time
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from models import MODELS, _export  # benchmarks/models.py, beside this script
from timing import median_time

import tilegrad
from tilegrad.api import compile_with_report

PAUSE_S = 0.3  # let the other runtime's threads go idle before timing the next


def run(name: str, dbs: list[str], rounds: int, repeats: int) -> dict:
    module, args = MODELS[name]()
    proto = _export(module.eval(), args)
    feeds = [a.numpy() for a in args]
    untuned = tilegrad.compile(proto)
    variants = {"untuned": untuned}
    reference = untuned(*feeds)
    algorithms = {}
    for db in dbs:
        compilation = compile_with_report(proto, db=db)
        tuned = compilation.module
        chosen = compilation.report.decisions.get("conv_algorithm", {}).values()
        algorithms[Path(db).name] = dict(Counter(c.algorithm for c in chosen))
        out = tuned(*feeds)
        for a, b in zip(reference if isinstance(reference, tuple) else (reference,),
                        out if isinstance(out, tuple) else (out,)):
            np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-3, err_msg=f"{db}: outputs differ from untuned")
        variants[Path(db).name] = tuned
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for key, fn in variants.items():
            time.sleep(PAUSE_S)
            times[key].append(median_time(lambda fn=fn: fn(*feeds), repeats))
    base = np.array(times["untuned"])
    rows = {}
    for key, t in times.items():
        ratio = np.array(t) / base
        low, high = _bootstrap_median(ratio)
        rows[key] = {"ms": float(np.median(t)) * 1e3, "ratio_median": float(np.median(ratio)),
                     "ratio_q1": float(np.quantile(ratio, 0.25)), "ratio_q3": float(np.quantile(ratio, 0.75)),
                     "ratio_ci95": [low, high], "rounds_faster": int(np.sum(ratio < 1))}
    return {"model": name, "rounds": rounds, "repeats": repeats, "threads": torch.get_num_threads(),
            "variants": rows, "conv_algorithms": algorithms}


def _bootstrap_median(x: np.ndarray, resamples: int = 4000) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the median of x."""
    medians = np.median(np.random.default_rng(0).choice(x, (resamples, len(x))), axis=1)
    return float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    p.add_argument("--db", action="append", default=[], help="records database (repeatable)")
    p.add_argument("--tune-budget", type=float, default=None,
                   help="tune into the (single) --db for this many seconds first")
    p.add_argument("--policy", default="gradient", choices=("gradient", "evolutionary"))
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if not a.db:
        p.error("give at least one --db")
    if a.tune_budget is not None:
        if len(a.db) != 1:
            p.error("--tune-budget tunes into exactly one --db")
        module, args = MODELS[a.model]()
        result = tilegrad.tune(_export(module.eval(), args), db=a.db[0], policy=a.policy, budget=a.tune_budget,
                               progress=sys.stderr.isatty())
        print(result.table(), file=sys.stderr)
    torch.set_num_threads(os.cpu_count() or 1)
    r = run(a.model, a.db, a.rounds, a.repeats)
    if a.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"{r['model']}: medians over {r['rounds']} interleaved rounds of {r['repeats']} calls")
    print(f"{'variant':<32} {'ms':>9} {'vs untuned: median (IQR) [95% CI]':>40} {'rounds won':>11}")
    for key, v in r["variants"].items():
        low, high = v["ratio_ci95"]
        print(f"{key:<32} {v['ms']:>9.2f} {v['ratio_median']:>12.3f} ({v['ratio_q1']:.3f}-{v['ratio_q3']:.3f}) "
              f"[{low:.3f}-{high:.3f}] {v['rounds_faster']:>5}/{r['rounds']}")
    for key, counts in r["conv_algorithms"].items():
        print(f"{key}: convolutions by algorithm: {', '.join(f'{k} {n}' for k, n in sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
