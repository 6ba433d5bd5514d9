"""Convolution algorithms side by side: direct (packed), Winograd F(2,3) and F(4,3), im2col + GEMM, on ResNet-50's
3x3 layers (and a few other shapes), each compiled through the graph pipeline with the algorithm forced, and the
one the default rule picks. Medians of interleaved rounds. Run:

    python benchmarks/conv_algorithms.py            # table
    python benchmarks/conv_algorithms.py --json     # [{"shape", "direct_ms", "winograd2_ms", ..., "picked"}, ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.passes import optimize

from timing import median_time  # benchmarks/timing.py, beside this script

ALGORITHMS = ("direct", "winograd2", "winograd4", "im2col")
SHAPES = [  # (channels, out channels, size, kernel)
    (64, 64, 56, 3), (128, 128, 28, 3), (256, 256, 14, 3), (512, 512, 7, 3), (128, 128, 23, 3), (64, 64, 23, 5),
]


def _graph(c, o, size, k):
    b = GraphBuilder()
    x = b.input("x", (1, c, size, size))
    w = b.const(np.random.default_rng(0).standard_normal((o, c, k, k)).astype("float32") / (c * k * k), "w")
    return b.build(b.op("conv", x, w, strides=(1, 1), pads=(k // 2,) * 4, dilations=(1, 1), group=1))


def _algorithm(node) -> str | None:
    if node.op.startswith("winograd_conv"):
        return f"winograd{node.attrs['m']}"
    return {"blocked_conv": "direct", "im2col_conv": "im2col"}.get(node.op)


def measure(shape, rounds, repeats) -> dict:
    g = _graph(*shape)
    x = np.random.default_rng(1).standard_normal(g.inputs[0].shape).astype("float32")
    modules = {}
    for algo in ALGORITHMS:
        try:
            opt, _ = optimize(g, 2, disable=["layout"], options={"conv_algorithm": {g.nodes[0].name: algo}})
        except Exception:  # noqa: BLE001  (Winograd refuses a 5x5 kernel)
            continue
        modules[algo] = compile_graph(opt)
    default, _ = optimize(g, 2, disable=["layout", "fuse"])
    picked = next(_algorithm(n) for n in default.nodes if _algorithm(n))
    times = {a: [] for a in modules}
    for _ in range(rounds):
        for algo, mod in modules.items():
            times[algo].append(median_time(lambda: mod(x), repeats))
            time.sleep(0.2)
    c, o, size, k = shape
    row = {"shape": f"{c}->{o} {size}x{size} {k}x{k}", "picked": picked}
    for algo in ALGORITHMS:
        row[f"{algo}_ms"] = statistics.median(times[algo]) * 1e3 if algo in times else None
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    rows = [measure(s, args.rounds, args.repeats) for s in SHAPES]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'shape':<24}" + "".join(f"{a + ' ms':>14}" for a in ALGORITHMS) + "   default pick")
    for r in rows:
        cells = "".join(f"{r[a + '_ms']:>14.3f}" if r[a + "_ms"] is not None else f"{'-':>14}" for a in ALGORITHMS)
        print(f"{r['shape']:<24}{cells}   {r['picked']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
