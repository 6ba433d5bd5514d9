"""Speed of the compiler itself: replaying a trace and lowering it to loop IR (what tuners do per candidate),
and rendering plus building C. Run:

    python benchmarks/compile_speed.py            # table
    python benchmarks/compile_speed.py --profile  # where the replay + lowering time goes
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import time

from tilegrad import config
from tilegrad.codegen.c import render_c
from tilegrad.loop import lower
from tilegrad.runtime import build
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.schedule.defaults import default_schedule
from tilegrad.te import nn, placeholder

from timing import median_time  # benchmarks/timing.py, beside this script


def tiled_matmul():
    def make():
        return nn.matmul(placeholder((512, 512), name="A"), placeholder((512, 512), name="B"), name="C")

    sch = Schedule(make())
    local = sch.cache_write("C")
    i0, j0, i1, j1 = sch.tile("C", "i", "j", 64, 64)
    i10, i11 = sch.split("C", i1, 4)
    sch.reorder("C", i0, j0, i10, i11, j1)
    sch.parallel("C", sch.fuse("C", i0, j0))
    sch.vectorize("C", j1)
    sch.compute_at(local, "C", i10)
    k0, k1 = sch.split(local, "k", 256)
    jo, ji = sch.split(local, "j", 16)
    sch.reorder(local, k0, jo, k1, "i", ji)
    sch.unroll(local, "i")
    sch.vectorize(local, ji)
    sch.auto_unroll(local, 64)
    return make, sch.trace


def tiled_conv2d():
    def make():
        x = placeholder((1, 64, 56, 56), name="X")
        w = placeholder((64, 64, 3, 3), name="W")
        return nn.conv2d(x, w, padding=1, name="Y")

    return make, default_schedule(make()).trace


def measure(name: str, make, trace, repeats: int) -> dict:
    outputs = make()
    replay = median_time(lambda: apply_trace(outputs, trace), repeats)
    replay_lower = median_time(lambda: lower(apply_trace(outputs, trace), "k"), repeats)
    kernel = lower(apply_trace(outputs, trace), "k")
    render = median_time(lambda: render_c(kernel), repeats)
    source = render_c(kernel)
    build_times = []
    for n in range(3):  # a unique comment defeats the build cache: a real compile each time
        unique = f"/* compile_speed {time.time_ns()} {n} */\n" + source
        start = time.perf_counter()
        build(unique)
        build_times.append(time.perf_counter() - start)
    return {"name": name, "steps": len(trace.steps), "replay_ms": replay * 1e3, "replay_lower_ms": replay_lower * 1e3,
            "render_ms": render * 1e3, "build_ms": statistics.median(build_times) * 1e3}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="profile replay + lowering of both programs")
    args = parser.parse_args(argv)
    programs = [("tiled matmul 512^3", *tiled_matmul()), ("tiled conv2d 64x56x56", *tiled_conv2d())]
    if args.profile:
        prof = cProfile.Profile()
        for _, make, trace in programs:
            outputs = make()
            prof.runcall(lambda: [lower(apply_trace(outputs, trace), "k") for _ in range(50)])
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
        print(text.getvalue())
        return 0
    with config.override():
        rows = [measure(name, make, trace, args.repeats) for name, make, trace in programs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'program':<24}{'steps':>6}{'replay ms':>11}{'replay+lower ms':>17}{'render C ms':>13}{'build ms':>10}")
    for r in rows:
        print(f"{r['name']:<24}{r['steps']:>6}{r['replay_ms']:>11.3f}{r['replay_lower_ms']:>17.3f}"
              f"{r['render_ms']:>13.3f}{r['build_ms']:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
