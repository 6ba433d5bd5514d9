"""Two saved modules of one model (say, compiled before and after a change to the kernels), timed in one process,
call by call in alternation.

On a shared VM consecutive runs of the same library move by 15%, more than most kernel changes gain; two
libraries loaded side by side and called alternately see the same machine state, so their ratio holds where their
separate timings do not. Each round calls A then B (B then A every other round), one call each after a pause, so
neither runtime's threads are warm from the other's call; figures are medians over the rounds. With `--warm N`,
each round times N calls back to back instead (their median), as a server under steady load sees the module:
threads awake, a small model's weights in cache. Run:

    python benchmarks/ab_modules.py DIR_A DIR_B                # saved by Module.save, same model
    python benchmarks/ab_modules.py DIR_A DIR_B --rounds 80 --json
    python benchmarks/ab_modules.py DIR_A DIR_B --rounds 30 --warm 15

The inputs are random, of the shapes and dtypes module A declares; B must take the same.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import tilegrad
from tilegrad.runtime.module import benchmark_inputs

PAUSE_S = 0.05  # between calls: the other library's idle threads go to sleep, as between a server's requests


def compare(a, b, rounds: int, warmup: int = 3, warm: int = 0) -> dict:
    """Medians of `rounds` alternated rounds of modules `a` and `b` on the same inputs, in milliseconds: one call
    after a pause each, or (`warm` > 0) the median of `warm` calls back to back."""
    feeds = benchmark_inputs(a.spec.inputs)
    for m in (a, b):
        for _ in range(warmup):
            m(**feeds)
    times = {"a": [], "b": []}
    for r in range(rounds):
        for key in ("a", "b") if r % 2 == 0 else ("b", "a"):
            module = a if key == "a" else b
            calls = []
            for _ in range(max(1, warm)):
                start = time.perf_counter()
                module(**feeds)
                calls.append(time.perf_counter() - start)
            times[key].append(statistics.median(calls))
            if not warm:
                time.sleep(PAUSE_S)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return {"a_ms": round(ms["a"], 3), "b_ms": round(ms["b"], 3), "b_over_a": round(ms["b"] / ms["a"], 4),
            "rounds": rounds, "warm": warm}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="a directory written by Module.save")
    ap.add_argument("b", help="another, of the same model")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warm", type=int, default=0, metavar="N",
                    help="time N calls back to back per round (their median) instead of one after a pause")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    a, b = tilegrad.load(args.a), tilegrad.load(args.b)
    if a.input_shapes != b.input_shapes:
        ap.error(f"the modules take different inputs: {a.input_shapes} and {b.input_shapes}")
    result = {"a": args.a, "b": args.b, **compare(a, b, args.rounds, warm=args.warm)}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"A {result['a_ms']:.3f} ms   B {result['b_ms']:.3f} ms   B/A {result['b_over_a']:.3f}   "
              f"(medians of {args.rounds} alternated " + (f"rounds of {args.warm} calls)" if args.warm else "calls)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
