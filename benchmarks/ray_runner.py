"""What measuring on Ray costs: the Ray runner's overhead per candidate over the local runner, and the build
throughput of two Ray build workers over one. Run:

    python benchmarks/ray_runner.py                    # 20 tilings of a 64x48x40 matmul, a local Ray cluster
    python benchmarks/ray_runner.py --candidates 8 --json

overhead    the same built libraries timed by `LocalRunner` and by `RayRunner` on one device of all this
            machine's cores (same threads, same timing settings): a warm-up pass of each that starts its
            workers, then `--rounds` passes of each in turns (local, Ray, local, ...), so that both time under
            the same conditions (Ray's daemons still settling after `ray.init`, other load coming and going);
            the median pass of each counts. Each pass times fresh copies of the libraries (a byte appended),
            as tuning times each library once: neither runner meets a library it has loaded, or a device one
            it has on its disk. The figure is (Ray's run phase - local's) / local's, per candidate.
            Target: at most 10%. With `--bare` each candidate is timed once (repeats=1, warmup=0,
            min_repeat_s=0, placements=1), so the difference per candidate is the Ray runner's own cost.
throughput  the same candidates built by a `RayBuilder` of one worker, then of two, each into a fresh build
            cache (so every candidate is compiled) after a warm-up build per worker; the figure is candidates
            per second, two over one.
            Target: at least 1.6x (builds are CPU-bound and independent; it needs two free cores).

Both need a quiet machine: other processes on the cores move the figures more than what is measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ray

from tilegrad import config
from tilegrad.tune.measure import LocalRunner, MeasureInput
from tilegrad.tune.measure.builder import LocalBuilder
from tilegrad.tune.measure.ray_builder import RayBuilder
from tilegrad.tune.measure.ray_cluster import NAMESPACE, register_device
from tilegrad.tune.measure.ray_runner import RayRunner
from tilegrad.tune.measure.result import Built

sys.path.insert(0, str(Path(__file__).parent))
from measure_overhead import matmul_task, tilings  # noqa: E402


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def fresh_copy(built: Built, directory: Path) -> Built:
    """`built` with its library copied into `directory`, the directory's name appended: the same code in a file
    no runner has met (a loader ignores bytes past an ELF file's segments)."""
    directory.mkdir(exist_ok=True)
    path = directory / Path(built.library).name
    path.write_bytes(Path(built.library).read_bytes() + directory.name.encode())
    return dataclasses.replace(built, library=str(path))


def overhead(cfg, inputs: list, threads: int, timing: dict, rounds: int) -> dict:
    """Run phases of the local and the Ray runner on the same libraries, in turns."""
    builder = LocalBuilder(cfg, workers=1)
    try:
        built = builder.build(inputs)
    finally:
        builder.close()
    local = LocalRunner(cfg, num_threads=threads, **timing)
    device = register_device("benchmark-ray-runner", detached=False)
    runners = {"local": local, "ray": RayRunner([device], cfg, num_threads=threads, **timing)}
    passes: dict[str, list[float]] = {name: [] for name in runners}
    with tempfile.TemporaryDirectory() as scratch:
        for turn in range(rounds + 1):  # the first is the warm-up
            for name, runner in runners.items():
                copies = Path(scratch) / f"{name}-{turn}"
                jobs = [(inp, fresh_copy(b, copies), False) for inp, b in zip(inputs, built)]
                wall, results = timed(lambda r=runner, j=jobs: r.run_all(j))
                assert all(r.valid for r in results), [r.error for r in results if not r.valid]
                if turn:
                    passes[name].append(wall / len(jobs))
    for runner in runners.values():
        runner.close()
    ray.kill(device)
    local_s, ray_s = statistics.median(passes["local"]), statistics.median(passes["ray"])
    return {"local_s_per_candidate": local_s, "ray_s_per_candidate": ray_s, "overhead": ray_s / local_s - 1,
            "passes_s_per_candidate": passes}


def throughput(inputs: list, warm_ups: list) -> dict:
    """Candidates built per second by one Ray build worker, then by two, each into a fresh build cache, after a
    warm-up build per worker (which starts its build process)."""
    rates = {}
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as cache, config.override(cache_dir=Path(cache)) as cfg:
            builder = RayBuilder(cfg, workers=workers)
            try:
                builder.build(warm_ups[:workers])
                wall, built = timed(lambda b=builder: b.build(inputs))
            finally:
                builder.close()
        assert not [b for b in built if not hasattr(b, "library")], built
        rates[workers] = len(inputs) / wall
    return {"one_worker_per_s": rates[1], "two_workers_per_s": rates[2], "speedup": rates[2] / rates[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--bare", action="store_true", help="time each candidate once: the runners' own costs")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes of each runner (the median counts)")
    parser.add_argument("--address", default=None, help="a running Ray cluster (default: start one here)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    threads = len(os.sched_getaffinity(0))
    if args.address:
        ray.init(address=args.address, namespace=NAMESPACE, log_to_driver=False)
    else:
        ray.init(num_cpus=max(2, threads), include_dashboard=False, namespace=NAMESPACE, log_to_driver=False)
    task = matmul_task()
    inputs = [MeasureInput(task, tr) for tr in tilings(task, args.candidates + 2)]
    inputs, warm_ups = inputs[:-2], inputs[-2:]
    timing = ({"repeats": 1, "warmup": 0, "min_repeat_s": 0.0, "placements": 1} if args.bare
              else {"repeats": 3, "min_repeat_s": 0.02})
    with tempfile.TemporaryDirectory() as cache, config.override(cache_dir=Path(cache)) as cfg:
        rows = {"overhead": overhead(cfg, inputs, threads, timing, args.rounds),
                "throughput": throughput(inputs, warm_ups)}
    ray.shutdown()
    if args.json:
        print(json.dumps({"candidates": len(inputs), "threads": threads, "rounds": args.rounds, "timing": timing,
                          **rows}, indent=2))
        return
    o, t = rows["overhead"], rows["throughput"]
    print(f"{len(inputs)} candidates of {task.name}, {threads} threads, median of {args.rounds} passes")
    print(f"{'figure':<28} {'value':>12} {'target':>10}")
    print(f"{'local runner per candidate':<28} {o['local_s_per_candidate'] * 1e3:10.2f}ms")
    print(f"{'Ray runner per candidate':<28} {o['ray_s_per_candidate'] * 1e3:10.2f}ms")
    print(f"{'Ray minus local':<28} {(o['ray_s_per_candidate'] - o['local_s_per_candidate']) * 1e3:10.2f}ms")
    print(f"{'Ray runner overhead':<28} {o['overhead'] * 100:11.1f}% {'<= 10%':>10}")
    print(f"{'builds/s, one Ray worker':<28} {t['one_worker_per_s']:12.2f}")
    print(f"{'builds/s, two Ray workers':<28} {t['two_workers_per_s']:12.2f}")
    print(f"{'build speed-up':<28} {t['speedup']:11.2f}x {'>= 1.6x':>10}")


if __name__ == "__main__":
    main()
