"""Peak memory of compiling a model against the size of its weights (issue 48: at most 2x).

A chain of Gemm layers with random float32 weights of `--gib` GiB in all, saved as an ONNX model with external
data (a protobuf holds at most 2 GiB), is compiled by `tilegrad.compile(path)` in a fresh process; the figure is
that process's peak resident set (ru_maxrss) over the weights' bytes, beside the same for loading it into an ONNX
Runtime session. Each step runs in a process of its own, started by this small one: Linux carries a process's peak
RSS over fork and exec, so a child of the process that built the model would report the builder's peak. Run:

    python benchmarks/compile_memory.py                 # 2 GiB of weights
    python benchmarks/compile_memory.py --gib 0.5 --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

WIDTH = 8192  # each layer's weight is WIDTH x WIDTH float32: 256 MiB

MEASURE = """
import resource, sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "tilegrad":
    import tilegrad
    module = tilegrad.compile(path)
else:
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def build(directory: Path, gib: float) -> tuple[Path, int]:
    """The model file and its weights' bytes: layers of WIDTH x WIDTH until `gib` GiB, a relu between them (run in
    a child process: `--build DIR GIB`)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    layers = max(1, round(gib * 2**30 / (WIDTH * WIDTH * 4)))
    rng = np.random.default_rng(0)
    nodes, weights, x = [], [], "x"
    for k in range(layers):
        w = (rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / np.sqrt(WIDTH)).astype(np.float32)
        weights.append(numpy_helper.from_array(w, f"w{k}"))
        nodes.append(helper.make_node("Gemm", [x, f"w{k}"], [f"g{k}"], name=f"gemm{k}"))
        nodes.append(helper.make_node("Relu", [f"g{k}"], [f"r{k}"], name=f"relu{k}"))
        x = f"r{k}"
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, WIDTH])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [4, WIDTH])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = directory / "big.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="big.weights")
    return path, layers * WIDTH * WIDTH * 4


def peak_bytes(kind: str, path: Path) -> int:
    out = subprocess.run([sys.executable, "-c", MEASURE, kind, str(path)], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="weights in GiB (in layers of 256 MiB)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--build", metavar="DIR", help=argparse.SUPPRESS)  # the child that writes the model
    args = ap.parse_args(argv)
    if args.build:
        print(build(Path(args.build), args.gib)[1])
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, __file__, "--build", tmp, "--gib", str(args.gib)], capture_output=True,
                             text=True, check=True)
        path, weight_bytes = Path(tmp) / "big.onnx", int(out.stdout.strip().splitlines()[-1])
        rows = [{"runtime": kind, "peak_rss_mib": round((peak := peak_bytes(kind, path)) / 2**20),
                 "weights_mib": round(weight_bytes / 2**20), "ratio": round(peak / weight_bytes, 2)}
                for kind in ("tilegrad", "onnxruntime")]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'runtime':12s} {'weights MiB':>12s} {'peak RSS MiB':>13s} {'peak / weights':>15s}")
    for r in rows:
        print(f"{r['runtime']:12s} {r['weights_mib']:12d} {r['peak_rss_mib']:13d} {r['ratio']:15.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
