"""A product with its layer norm in one kernel (the stitched plan, schedule/rules_row_epilogue.py) against the two
kernels the rules make (the product with its bias and residual, then the layer norm), on BERT-base's shapes.

    TILEGRAD_NUM_THREADS=1 python benchmarks/row_epilogue.py          # table
    python benchmarks/row_epilogue.py --json                          # [{"case", "plan", "kernels", "ms"}]

Cases: "out_proj" (128 x 768 by 768 x 768, post-LN: the pre-norm sum is read by the layer norm alone), "ffn2"
(128 x 3072 by 3072 x 768) and "out_proj_pre_ln" (the pre-norm sum also returned: the fused kernel's second
output). Rounds interleave the two plans; each figure is the median over rounds of the median of `--repeats`
calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from timing import median_time

CASES = {"out_proj": (128, 768, 768, False), "ffn2": (128, 3072, 768, False), "out_proj_pre_ln": (128, 768, 768, True)}
PLANS = ("rules", "stitch")


def _graph(m, k, n, pre_norm_output):
    from tilegrad.ir.graph import GraphBuilder

    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x, r = b.input("x", (m, k)), b.input("r", (m, n))
    w = b.const((rng.standard_normal((k, n)) / np.sqrt(k)).astype("float32"), "w")
    h = b.op("add", b.op("add", b.op("matmul", x, w), b.const(rng.standard_normal(n).astype("float32"), "bias")), r)
    y = b.op("layer_norm", h, b.const(np.ones(n, "float32"), "gamma"), b.const(np.zeros(n, "float32"), "beta"),
             axis=-1)
    return b.build([y, h] if pre_norm_output else [y]), (rng.standard_normal((m, k)).astype("float32"),
                                                         rng.standard_normal((m, n)).astype("float32"))


def measure(case: str, repeats: int, rounds: int) -> list[dict]:
    from tilegrad.executor import compile_graph
    from tilegrad.passes import optimize
    from tilegrad.passes.memory_plan import kernel_count

    g, inputs = _graph(*CASES[case])
    built = {}
    for plan in PLANS:
        graph, _ = optimize(g, 2, options={"fusion": plan})
        built[plan] = (graph, compile_graph(graph))
    outs = [built[plan][1](*inputs) for plan in PLANS]
    for a, b in zip(*[o if isinstance(o, list) else [o] for o in outs]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    times = {plan: [] for plan in PLANS}
    for _ in range(rounds):
        for plan in PLANS:
            times[plan].append(median_time(lambda: built[plan][1](*inputs), repeats))
            time.sleep(0.2)
    return [{"case": case, "plan": plan, "kernels": kernel_count(built[plan][0]),
             "ms": statistics.median(times[plan]) * 1e3} for plan in PLANS]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=sorted(CASES), help="run only this case (repeatable)")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [row for case in args.only or CASES for row in measure(case, args.repeats, args.rounds)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'case':<18}{'plan':<8}{'kernels':>8}{'ms':>9}")
    for row in rows:
        print(f"{row['case']:<18}{row['plan']:<8}{row['kernels']:>8}{row['ms']:>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
