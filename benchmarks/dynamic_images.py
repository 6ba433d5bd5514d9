"""Dynamic image sizes: one tilegrad module compiled with `dynamic=` for every height and width within bounds,
against a module specialised to each size, and ONNX Runtime, on the convolutional models of benchmarks/models.py
(ResNet-50, MobileNetV2; random weights) exported with dynamic `h` and `w`.

For each model: the dynamic module's compile time, then per size (square images, `--sizes`) the median latency of
each contender in interleaved rounds (a pause between runtimes so their thread pools go idle), and the largest
difference from ONNX Runtime's output. The specialised modules are compiled for the first `--specialised` sizes
only (each compile takes tens of seconds). Run:

    python benchmarks/dynamic_images.py                       # table
    python benchmarks/dynamic_images.py --json                # {"cpu", "isa", "models": [{"model", "compile_s",
                                                              #   "rows": [{"size", "dynamic_ms", "specialised_ms",
                                                              #   "onnxruntime_ms", "max_abs_error"}]}]}
    python benchmarks/dynamic_images.py --only resnet50 --sizes 160,224,300 --specialised 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from timing import median_time  # benchmarks/timing.py, beside this script

IDLE_S = 0.5
LOW, HIGH = 64, 512
_spec = importlib.util.spec_from_file_location("models_bench", Path(__file__).with_name("models.py"))
models_bench = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)  # its dataclasses look it up
_spec.loader.exec_module(models_bench)
MODELS = {"resnet50": models_bench.resnet50, "mobilenet_v2": models_bench.mobilenet_v2}


def _export(module: torch.nn.Module, example: torch.Tensor, path: Path) -> None:
    torch.onnx.export(module, (example,), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {2: "h", 3: "w"}}, dynamo=False)


def measure(name: str, sizes: list[int], specialised: int, rounds: int, repeats: int) -> dict:
    import onnxruntime as ort

    import tilegrad

    torch.manual_seed(0)
    module, (example,) = MODELS[name]()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.onnx"
        _export(module.eval(), example, path)
        start = time.perf_counter()
        dynamic = tilegrad.compile(path, dynamic={"h": (LOW, HIGH), "w": (LOW, HIGH)})
        compile_s = time.perf_counter() - start
        options = ort.SessionOptions()
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        rows = []
        for k, size in enumerate(sizes):
            x = np.random.default_rng(size).standard_normal((1, 3, size, size)).astype(np.float32)
            contenders = {"dynamic": lambda: dynamic(x), "onnxruntime": lambda: session.run(None, {"x": x})}
            if k < specialised:
                fixed = tilegrad.compile(path, input_shapes={"x": (1, 3, size, size)})
                contenders["specialised"] = lambda: fixed(x)
            error = float(np.abs(np.asarray(dynamic(x)) - session.run(None, {"x": x})[0]).max())
            times = {c: [] for c in contenders}
            for _ in range(rounds):
                for c, fn in contenders.items():
                    times[c].append(median_time(fn, repeats))
                    time.sleep(IDLE_S)
            rows.append({"size": size, "max_abs_error": error, "specialised_ms": None,
                         **{f"{c}_ms": 1e3 * statistics.median(v) for c, v in times.items()}})
    return {"model": name, "compile_s": compile_s, "bounds": [LOW, HIGH], "rows": rows}


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(MODELS), action="append")
    parser.add_argument("--sizes", default="96,160,224,320,448", help="square image sizes, comma-separated")
    parser.add_argument("--specialised", type=int, default=2, help="sizes (the first ones) to specialise for")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from tilegrad.target import host

    target = host()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = [measure(name, sizes, args.specialised, args.rounds, args.repeats)
               for name in (args.only or sorted(MODELS))]
    if args.json:
        json.dump({"cpu": target.model, "isa": target.isa, "models": results}, sys.stdout, indent=1)
        print()
        return 0
    print(f"CPU: {target.model} ({target.isa}); bounds {LOW}..{HIGH} for h and w")
    for r in results:
        print(f"\n{r['model']}: dynamic module compiled in {r['compile_s']:.1f} s")
        print(f"{'size':>5} {'dynamic ms':>11} {'specialised':>12} {'ORT ms':>9} {'spec/dyn':>9} {'ORT/dyn':>8} "
              f"{'max err':>9}")
        for row in r["rows"]:
            spec = row["specialised_ms"]
            print(f"{row['size']:>5} {row['dynamic_ms']:>11.2f} {spec if spec else float('nan'):>12.2f} "
                  f"{row['onnxruntime_ms']:>9.2f} {(spec or float('nan')) / row['dynamic_ms']:>9.3f} "
                  f"{row['onnxruntime_ms'] / row['dynamic_ms']:>8.3f} {row['max_abs_error']:>9.1e}")
        print(f"geomean ORT/dynamic {_geomean(x['onnxruntime_ms'] / x['dynamic_ms'] for x in r['rows']):.3f}, "
              f"specialised/dynamic "
              f"{_geomean(x['specialised_ms'] / x['dynamic_ms'] for x in r['rows'] if x['specialised_ms']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
