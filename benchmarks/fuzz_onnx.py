"""Fuzz the ONNX frontend: mutated small models (`tilegrad.tools.onnx_fuzz`) through import, compile and run,
outcomes counted by kind. Run:

    python benchmarks/fuzz_onnx.py                      # 500 cases, import + compile, a table
    python benchmarks/fuzz_onnx.py --cases 2000 --seed 7 --run-every 10 --json

Cases run in a worker process: a crash or a hang costs one case (counted as `crash` or `timeout`) and a new
worker. `--run-every K` also builds and calls every K-th case that compiles (the C compiler makes those slow).
The table gives the count of each outcome, then each kind of escape (an exception that is not a
`TilegradError`, a crash, a hostile model accepted) with its first cases, which reproduce with
`make_case(number)`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from tilegrad.tools.onnx_fuzz import OUTCOMES, Outcome, make_case, run_case

LISTED = ("wrapped exception", "other exception", "crash", "timeout", "hostile accepted", "mismatch")  # listed by kind


def _serve(conn, scratch: str) -> None:
    """Worker: run each case number received with its stages, send back the Outcome."""
    while True:
        job = conn.recv()
        if job is None:
            return
        number, stages = job
        with tempfile.TemporaryDirectory(dir=scratch) as directory:
            conn.send(run_case(make_case(number), Path(directory), stages))


class _Worker:
    def __init__(self, ctx, scratch: str):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, scratch), daemon=True)
        self.proc.start()
        child.close()

    def run(self, number: int, stages: tuple[str, ...], timeout_s: float) -> Outcome | None:
        """The case's outcome; None when the worker died or hung (it is then stopped)."""
        self.conn.send((number, stages))
        if self.conn.poll(timeout_s):
            try:
                return self.conn.recv()
            except (EOFError, OSError):  # it died: wait until it is gone, so that it is not taken for a hang
                self.proc.join(10)
                return None
        return None

    def stop(self) -> None:
        self.proc.kill()
        self.proc.join()


def fuzz(cases: int, seed: int, run_every: int, timeout_s: float, progress: bool) -> list[tuple[int, Outcome]]:
    """(case number, outcome) for `cases` cases numbered from `seed`."""
    ctx = multiprocessing.get_context("fork")
    results = []
    compiled = 0
    with tempfile.TemporaryDirectory(prefix="tilegrad-fuzz-") as scratch:
        worker = _Worker(ctx, scratch)
        try:
            for number in range(seed, seed + cases):
                stages = ("import", "compile")
                outcome = worker.run(number, stages, timeout_s)
                if outcome is not None and outcome.kind == "ok" and run_every:
                    compiled += 1
                    if compiled % run_every == 0:
                        outcome = worker.run(number, (*stages, "run"), timeout_s * 4)
                if outcome is None:
                    alive = worker.proc.is_alive()
                    worker.stop()
                    code = worker.proc.exitcode
                    kind, why = ("timeout", f"no answer in {timeout_s:g} s") if alive else \
                        ("crash", f"worker died (exit code {code})")
                    outcome = Outcome(kind, "?", message=why, mutations="; ".join(make_case(number).mutations))
                    worker = _Worker(ctx, scratch)
                results.append((number, outcome))
                if progress and len(results) % 50 == 0:
                    print(f"  {len(results)}/{cases}", file=sys.stderr)
        finally:
            worker.stop()
    return results


def table(results, elapsed: float) -> str:
    counts = Counter(o.kind for _, o in results)
    lines = [f"{len(results)} cases in {elapsed:.1f} s", f"{'outcome':<18} {'cases':>6}"]
    lines += [f"{kind:<18} {counts.get(kind, 0):>6}" for kind in OUTCOMES]
    stages = Counter(o.stage for _, o in results if o.kind == "ok")
    lines.append("ok, by the last stage run: " + ", ".join(f"{k} {n}" for k, n in sorted(stages.items())))
    errors = Counter(o.error for _, o in results if o.kind == "tilegrad error")
    lines.append("tilegrad errors by class: " + ", ".join(f"{k} {n}" for k, n in errors.most_common()))
    escapes = defaultdict(list)
    for number, o in results:
        if o.kind in LISTED:
            escapes[(o.kind, o.stage, o.error)].append((number, o))
    for (kind, stage, error), found in sorted(escapes.items(), key=lambda kv: -len(kv[1])):
        number, first = found[0]
        lines.append(f"{kind} at {stage}: {error or '-'} x{len(found)}; first case {number} "
                     f"({first.mutations[:120]}): {first.message[:160]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=500, help="how many cases (default 500)")
    p.add_argument("--seed", type=int, default=0, help="the first case number (default 0)")
    p.add_argument("--run-every", type=int, default=0, metavar="K",
                   help="also build and run every K-th case that compiles (default 0: none)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    p.add_argument("--json", action="store_true", help="print the counts and every escape as JSON")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    results = fuzz(args.cases, args.seed, args.run_every, args.timeout, progress=not args.json)
    elapsed = time.perf_counter() - t0
    if args.json:
        counts = Counter(o.kind for _, o in results)
        escapes = [{"case": n, **dataclasses.asdict(o)} for n, o in results if o.kind in LISTED]
        print(json.dumps({"cases": len(results), "seconds": round(elapsed, 1),
                          "counts": {k: counts.get(k, 0) for k in OUTCOMES},
                          "ok_by_stage": dict(Counter(o.stage for _, o in results if o.kind == "ok")),
                          "escapes": escapes}, indent=1))
    else:
        print(table(results, elapsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
