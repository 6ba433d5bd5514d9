"""Speed of the compiler itself: replaying a trace and lowering it to loop IR (what tuners do per candidate),
and rendering plus building C; and whole models: a cold compile (an empty build cache) and a warm one (the cache
filled by the cold one), each in a fresh process as a user's script meets them, beside ONNX Runtime's session
creation and torch.compile's first call. Run:

    python benchmarks/compile_speed.py            # table of the two programs
    python benchmarks/compile_speed.py --profile  # where the replay + lowering time goes
    python benchmarks/compile_speed.py --models resnet50,bert_base [--no-torch-compile] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


MODEL_STEP = """
import os, sys, time, warnings
kind, path = sys.argv[1], sys.argv[2]
if kind == "tilegrad":
    import tilegrad
    start = time.perf_counter()
    tilegrad.compile(path)
elif kind == "onnxruntime":
    import onnxruntime as ort
    start = time.perf_counter()
    ort.InferenceSession(path, providers=["CPUExecutionProvider"])
else:
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[3])))
    from models import MODELS
    module, args = MODELS[kind.split(":")[1]]()
    compiled = torch.compile(module.eval())
    start = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(*args)
print(time.perf_counter() - start)
"""


def _step_seconds(kind: str, path: Path, cache: Path) -> float:
    """Seconds of one compile step (`MODEL_STEP`) in a process of its own, with `cache` as tilegrad's cache."""
    env = {**os.environ, "TILEGRAD_CACHE_DIR": str(cache)}
    models = Path(__file__).with_name("models.py")
    out = subprocess.run([sys.executable, "-c", MODEL_STEP, kind, str(path), str(models)], capture_output=True,
                         text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def measure_models(names: list[str], torch_compile: bool) -> list[dict]:
    """Per model: tilegrad cold and warm, ONNX Runtime's session, torch.compile's first call (or None)."""
    from models import MODELS, _export

    rows = []
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            module, args = MODELS[name]()
            path = Path(tmp) / f"{name}.onnx"
            path.write_bytes(_export(module.eval(), args))
            cache = Path(tmp) / "cache"
            row = {"model": name, "tilegrad_cold_s": _step_seconds("tilegrad", path, cache),
                   "tilegrad_warm_s": _step_seconds("tilegrad", path, cache),
                   "onnxruntime_session_s": _step_seconds("onnxruntime", path, cache),
                   "torch_compile_first_call_s": _step_seconds(f"torch:{name}", path, cache) if torch_compile
                   else None}
        rows.append(row)
    return rows


def _model_table(rows: list[dict]) -> str:
    lines = [f"{'model':<14}{'tilegrad cold s':>16}{'warm s':>8}{'ORT session s':>15}{'torch.compile 1st call s':>26}"]
    for r in rows:
        tc = r["torch_compile_first_call_s"]
        lines.append(f"{r['model']:<14}{r['tilegrad_cold_s']:>16.2f}{r['tilegrad_warm_s']:>8.2f}"
                     f"{r['onnxruntime_session_s']:>15.2f}{'-' if tc is None else f'{tc:.2f}':>26}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="profile replay + lowering of both programs")
    parser.add_argument("--models", metavar="NAME[,NAME]", help="whole models of benchmarks/models.py instead")
    parser.add_argument("--no-torch-compile", action="store_true", help="with --models, leave torch.compile out")
    args = parser.parse_args(argv)
    if args.models:
        rows = measure_models(args.models.split(","), not args.no_torch_compile)
        print(json.dumps(rows, indent=1) if args.json else _model_table(rows))
        return 0
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
