"""What the tuner's measurer costs per candidate, beyond the kernel's own run time. Run:

    python benchmarks/measure_overhead.py                 # 20 distinct tilings of a 64x48x40 matmul
    python benchmarks/measure_overhead.py --candidates 40 --json

Three batches of the same candidates on one Measurer, builds into a fresh cache directory:
  cold     first batch: worker start-up, every candidate compiled by gcc, then timed (the defaults: 3 repeats of
           at least 20 ms after a warm-up and a calibration)
  warm     same candidates again: the build workers replay, lower and render, and find the library in the cache
  bare     warm, and timing reduced to one call (repeats=1, warmup=0, min_repeat_s=0): what is left of the run
           phase is the timing worker's own overhead (request, dlopen, inputs, the call, the reply)
The build phase's wall time is the batch's wall time minus the run phase (kernels are timed one by one).
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from pathlib import Path

from tilegrad import config
from tilegrad.ir.graph import GraphBuilder
from tilegrad.schedule import Schedule
from tilegrad.tune.measure import MeasureInput, Measurer
from tilegrad.tune.task import extract_tasks


def matmul_task():
    b = GraphBuilder()
    return extract_tasks(b.build(b.op("matmul", b.input("A", (64, 48)), b.input("B", (48, 40)))))[0]


def tilings(task, n: int) -> list:
    traces = []
    for tile_i, tile_j, vectorize in itertools.product([1, 2, 4, 8, 16, 32, 64], [4, 8, 20, 40], [True, False]):
        sch = Schedule(task.compute()[1])
        c = sch.outputs[0]
        i_0, i_1 = sch.split(c, "i", tile_i)
        j_0, j_1 = sch.split(c, "j", tile_j)
        sch.reorder(c, i_0, j_0, "k", i_1, j_1)
        if vectorize:
            sch.vectorize(c, j_1)
        traces.append(sch.trace)
    return traces[:n]


def batch(measurer: Measurer, inputs: list) -> dict:
    start = time.perf_counter()
    results = measurer.measure(inputs)
    wall = time.perf_counter() - start
    assert all(r.valid for r in results), [r.error for r in results if not r.valid]
    run = sum(r.run_s for r in results)
    return {"wall_s": wall, "build_phase_s": wall - run, "run_phase_s": run,
            "build_s_sum": sum(r.build_s for r in results), "per_candidate_s": wall / len(inputs),
            "run_per_candidate_s": run / len(inputs), "kernel_s_median": sorted(r.latency for r in results)[
                len(results) // 2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    task = matmul_task()
    inputs = [MeasureInput(task, tr) for tr in tilings(task, args.candidates)]
    with tempfile.TemporaryDirectory() as cache, config.override(cache_dir=Path(cache)) as cfg:
        start = time.perf_counter()
        with Measurer(cfg=cfg) as m:
            setup = time.perf_counter() - start
            rows = {"cold": batch(m, inputs), "warm": batch(m, inputs)}
            m.runner.repeats, m.runner.warmup, m.runner.min_repeat_s = 1, 0, 0.0
            rows["bare"] = batch(m, inputs)
    if args.json:
        print(json.dumps({"candidates": len(inputs), "setup_s": setup, **rows}, indent=2))
        return
    print(f"{len(inputs)} candidates of {task.name}; Measurer() {setup * 1e3:.0f} ms (harness build)")
    print(f"{'batch':6} {'wall':>8} {'build phase':>12} {'run phase':>10} {'per cand.':>10} {'run/cand.':>10}")
    for name, r in rows.items():
        print(f"{name:6} {r['wall_s']:7.2f}s {r['build_phase_s']:11.2f}s {r['run_phase_s']:9.2f}s "
              f"{r['per_candidate_s'] * 1e3:8.1f}ms {r['run_per_candidate_s'] * 1e3:8.1f}ms")


if __name__ == "__main__":
    main()
