"""Fusion benchmark: the rule-based fusion against FusionStitching's explorer (`compile(fusion="stitch")`), side by
side on whole models and on the memory-bound chains alone, with Inductor's kernel count for the same models.

    python benchmarks/fusion.py                    # table
    python benchmarks/fusion.py --json             # [{"model", "plan", "kernels", "bytes_between_kernels",
                                                   #   "memory_bound_ms", "total_ms", "inductor_kernels", "cpu"}]
    python benchmarks/fusion.py --only gelu_chain  # one case
    python benchmarks/fusion.py --no-inductor      # without Inductor's kernel count (it compiles for minutes)
    python benchmarks/fusion.py --counts-only      # kernels and bytes between kernels alone: nothing built or timed

"plan" is "rule-based" (the rules alone, as before FusionStitching: the attention pass disabled), "rules+attention"
(the rules after the attention pass: the default compile) or "stitched" (the attention pass and the explorer: all of
issue 28). "kernels" counts the kernels one inference runs; "bytes_between_kernels"
the bytes kernels write to intermediate tensors plus the bytes kernels read back from them (views looked
through); "memory_bound_ms" the profiled time of the kernels that run no convolution or matrix product (median of
the per-kernel profile, `Module.profile`; an attention kernel counts as a matrix product), "total_ms" the median
latency of the un-instrumented module over rounds that interleave the three plans.
"inductor_kernels" is the number of kernels in the code torch.compile's Inductor generates for the model (its
C++ kernels plus the calls of its extern kernels, e.g. mm), the same for every row of a model. The stitched rows
use this machine's measured fusion costs (`tilegrad.tune.fusion_costs`, measured once and cached).
With --counts-only the rows hold "model", "plan", "kernels" and "bytes_between_kernels" alone, read from the
optimised graphs (opt level 2 with the plan's passes), the stitched plan scored with the nominal costs
(`passes.stitch_cost.NOMINAL`), so the counts are the same on every machine and measure nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import warnings

import numpy as np
import torch
from torch import nn

from models import MODELS, _export  # benchmarks/models.py, beside this script
from timing import median_time

IDLE_S = 0.5  # between modules, so that one's threads have gone idle before the next is timed

# plan: (fusion, passes disabled); the attention pass runs by default, so the rules alone disable it
PLANS = {"rule-based": ("rules", ["attention"]), "rules+attention": ("rules", []), "stitched": ("stitch", [])}
CHAIN_SHAPE = (128, 768)


class _Gelu(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x)


class _Softmax(nn.Module):
    def forward(self, x):
        return x.softmax(-1)


def _layer_norm():
    return nn.LayerNorm(CHAIN_SHAPE[-1]), (torch.randn(*CHAIN_SHAPE),)


CASES = {
    "bert_base": MODELS["bert_base"],
    "gpt2_small": MODELS["gpt2_small"],
    "vit_b16": MODELS["vit_b16"],
    "mobilenet_v2": MODELS["mobilenet_v2"],
    "layer_norm_chain": _layer_norm,
    "softmax_chain": lambda: (_Softmax(), (torch.randn(*CHAIN_SHAPE),)),
    "gelu_chain": lambda: (_Gelu(), (torch.randn(*CHAIN_SHAPE),)),
}


def bytes_between_kernels(g) -> int:
    """Bytes kernels write to intermediate tensors and read back from them (a view is its input's memory; a kernel
    reading one tensor as several operands, as the attention reads a fused QKV projection, reads it once)."""
    from tilegrad.ir.registry import lookup
    from tilegrad.passes.memory_plan import intermediates_of, nbytes, plan_memory

    kernel_nodes = plan_memory(g, intermediates_of(g)).kernel_nodes(g)
    made_by_kernel = {id(v) for n in kernel_nodes for v in n.outputs}
    base: dict[int, int] = {}
    for n in g.nodes:
        if lookup(n.op).view:
            base[id(n.outputs[0])] = base.get(id(n.inputs[0]), id(n.inputs[0]))
    outputs = {base.get(id(v), id(v)) for v in g.outputs}
    written = sum(nbytes(v) for n in kernel_nodes for v in n.outputs if id(v) not in outputs)
    read = sum(nbytes(v) for n in kernel_nodes for v in {id(v): v for v in n.inputs}.values()
               if base.get(id(v), id(v)) in made_by_kernel)
    return written + read


def memory_bound_seconds(profile) -> float:
    """The profiled seconds of the kernels whose ops include no convolution or matrix product (an attention
    kernel holds two)."""
    from tilegrad.ir.registry import OUT_FUSABLE, lookup

    def heavy(label: str) -> bool:
        return any(op == "attention" or lookup(op).kind == OUT_FUSABLE for op in label.split("[")[0].split("+"))

    return sum(r.seconds for r in profile.sites if not heavy(r.label))


def inductor_kernels(module, args) -> int:
    """Kernels in Inductor's generated code for `module`: its compiled C++ kernels and its extern kernel calls."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    with torch.no_grad():
        _, sources = run_and_get_code(torch.compile(module), *args)
    code = "\n".join(sources)
    defined = len(re.findall(r"async_compile\.cpp(?:_pybinding)?\(", code))
    extern = len(re.findall(r"extern_kernels\.\w+\(", code))
    return defined + extern


def measure(name: str, inductor: bool, repeats: int, rounds: int) -> list[dict]:
    from tilegrad.api import compile_with_report
    from tilegrad.runtime.peaks import measured_peaks

    torch.manual_seed(0)
    module, args = CASES[name]()
    module.eval()
    model = _export(module, args)
    feeds = {f"in{i}": a.numpy() for i, a in enumerate(args)}
    with torch.no_grad():
        want = module(*args).numpy()
    count = inductor_kernels(module, args) if inductor else None
    built = {plan: compile_with_report(model, fusion=fusion, disable_passes=disabled)
             for plan, (fusion, disabled) in PLANS.items()}
    times: dict[str, list[float]] = {plan: [] for plan in PLANS}
    for _ in range(rounds):  # interleaved, so that a slow spell of the machine falls on every plan
        for plan, b in built.items():
            times[plan].append(median_time(lambda: b.module(**feeds), repeats))
            time.sleep(IDLE_S)
    rows = []
    for plan, b in built.items():
        got = b.module(**feeds)
        got = got[0] if isinstance(got, list) else got
        error = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-12))
        profile = b.module.profile(**feeds, repeats=repeats)
        rows.append({"model": name, "plan": plan, "kernels": b.kernels,
                     "bytes_between_kernels": bytes_between_kernels(b.graph),
                     "memory_bound_ms": memory_bound_seconds(profile) * 1e3,
                     "total_ms": statistics.median(times[plan]) * 1e3,
                     "inductor_kernels": count, "max_rel_error": error, "cpu": measured_peaks().cpu})
    return rows


def counts(name: str) -> list[dict]:
    """Each plan's kernels and bytes between kernels, from its optimised graph: nothing is built or timed."""
    from tilegrad.frontend.onnx import import_onnx
    from tilegrad.passes import optimize
    from tilegrad.passes.memory_plan import kernel_count

    torch.manual_seed(0)
    module, args = CASES[name]()
    g = import_onnx(_export(module.eval(), args))
    rows = []
    for plan, (fusion, disabled) in PLANS.items():
        graph, _ = optimize(g, disable=disabled, options={"fusion": fusion})
        rows.append({"model": name, "plan": plan, "kernels": kernel_count(graph),
                     "bytes_between_kernels": bytes_between_kernels(graph)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=sorted(CASES), help="run only this case (repeatable)")
    ap.add_argument("--json", action="store_true", help="print JSON rows")
    ap.add_argument("--no-inductor", action="store_true", help="skip Inductor's kernel count")
    ap.add_argument("--counts-only", action="store_true",
                    help="kernels and bytes between kernels only, from the optimised graphs (no build, no timing)")
    ap.add_argument("--repeats", type=int, default=10, help="timed calls per round and profiled runs (median)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds over the plans (median)")
    args = ap.parse_args(argv)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.only or CASES:
            rows += counts(name) if args.counts_only else measure(name, not args.no_inductor, args.repeats,
                                                                   args.rounds)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if args.counts_only:
        print(f"{'model':<18}{'plan':<17}{'kernels':>8}{'MiB between':>12}")
        for r in rows:
            print(f"{r['model']:<18}{r['plan']:<17}{r['kernels']:>8}{r['bytes_between_kernels'] / 2**20:>12.2f}")
        return 0
    print(f"{'model':<18}{'plan':<17}{'kernels':>8}{'MiB between':>12}{'mem-bound ms':>13}{'total ms':>10}"
          f"{'inductor':>9}")
    for r in rows:
        print(f"{r['model']:<18}{r['plan']:<17}{r['kernels']:>8}{r['bytes_between_kernels'] / 2**20:>12.2f}"
              f"{r['memory_bound_ms']:>13.3f}{r['total_ms']:>10.3f}{r['inductor_kernels']!s:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
