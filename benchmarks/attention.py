"""The attention kernel against the separate kernels it replaces, per shape, in one process: the attention of one
layer of `models.py`'s encoders (from the QKV projection's output (1, S, 3d) through the head split, the
attention and the head merge to (1, S, d)), compiled with the attention pass (`enable_passes`, whatever the
default) and without it (`disable_passes`), timed in interleaved rounds (each round times both modules): the best
of a round's calls, since on a shared machine the best is the call that was not preempted, and the median of those
over the rounds.

    python benchmarks/attention.py                  # table
    python benchmarks/attention.py --json           # [{"shape", "plan", "kernels", "ms", "rounds_ms", "cpu"}]
    python benchmarks/attention.py --only bert      # one shape
    python benchmarks/attention.py --forms          # the kernel alone: two-pass against blockwise softmax

The shapes: BERT-base (128 tokens, 768 wide, 12 heads), ViT-B/16 (197 tokens), GPT-2 small (128, causal), 512
tokens (`mid`), 1024 tokens (`long`), and on request (`--only`) 2048 (`2k`) and 4096 (`4k`). Set TILEGRAD_NUM_THREADS=1 on a shared machine.

`--forms` times the attention kernel alone instead, in the models' layouts (a fused QKV (1, S, 3, H, D) read as
all three operands, the output (1, S, H, D)), built in each `form` of the op: "two_pass" (whole rows of scores
per block of query rows) and "blockwise" (the online softmax merged from blocks of `--key-block` keys; repeat the
option to time several; by default the block `compile` picks, passes/attention_form.key_block_for), in the same
interleaved rounds, and names the form `compile` would pick on this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np
import torch
from models import _export  # benchmarks/models.py, beside this script
from torch import nn

SHAPES = {"bert": (128, 768, 12, False), "vit": (197, 768, 12, False), "gpt2": (128, 768, 12, True),
          "mid": (512, 768, 12, False), "long": (1024, 768, 12, False), "2k": (2048, 768, 12, False),
          "4k": (4096, 768, 12, False)}
PLANS = {"attention kernel": {"enable_passes": ["attention"]}, "separate kernels": {"disable_passes": ["attention"]}}


class LayerAttention(nn.Module):
    """EncoderLayer's attention (benchmarks/models.py) from the QKV product to the merged heads."""

    def __init__(self, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal

    def forward(self, qkv):
        b, t, d3 = qkv.shape
        d = d3 // 3
        q, k, v = qkv.split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if self.causal:
            scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        return (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)


def measure(name: str, rounds: int, repeats: int) -> list[dict]:
    from tilegrad.api import compile_with_report
    from tilegrad.runtime.peaks import measured_peaks

    tokens, width, heads, causal = SHAPES[name]
    module = LayerAttention(heads, causal).eval()
    qkv = torch.randn(1, tokens, 3 * width)
    model = _export(module, (qkv,))
    with torch.no_grad():
        want = module(qkv).numpy()
    built = {plan: compile_with_report(model, **passes) for plan, passes in PLANS.items()}
    feeds = {"in0": qkv.numpy()}
    for plan, b in built.items():
        got = b.module(**feeds)
        np.testing.assert_allclose(got[0] if isinstance(got, list) else got, want, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}, {plan}")
    times: dict[str, list[float]] = {plan: [] for plan in PLANS}
    for _ in range(rounds):
        for plan, b in built.items():
            times[plan].append(_best_time(lambda b=b: b.module(**feeds), repeats) * 1e3)
    return [{"shape": name, "plan": plan, "kernels": built[plan].kernels, "ms": statistics.median(times[plan]),
             "rounds_ms": times[plan], "cpu": measured_peaks().cpu} for plan in PLANS]


def measure_forms(name: str, rounds: int, repeats: int, key_blocks: list[int]) -> list[dict]:
    from tilegrad import kernel
    from tilegrad.ir.registry import lookup
    from tilegrad.runtime.peaks import measured_peaks
    from tilegrad.te import tensor as te

    tokens, width, heads, causal = SHAPES[name]
    shape = (1, tokens, 3, heads, width // heads)
    qkv = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    attrs = {"scale": None, "causal": causal, "qkv_layout": "bs3hd", "out_layout": "bshd"}
    from tilegrad.passes.attention_form import choose_form
    from tilegrad.target import host

    chosen, block = choose_form(tokens, tokens, width // heads, width // heads, host().l2_bytes)
    forms = {"two-pass kernel": {"form": "two_pass"},
             **{f"blockwise kb={kb}": {"form": "blockwise", "key_block": kb} for kb in key_blocks or [block]}}
    built = {}
    for plan, form in forms.items():
        ins = [te.placeholder(shape, "float32", n) for n in "qkv"]
        out = lookup("attention").compute(*ins, **attrs, **form)
        built[plan] = kernel.build((ins, [out]), name="attention")
    want = lookup("attention").reference(qkv, qkv, qkv, **attrs)
    for plan, k in built.items():
        np.testing.assert_allclose(k.run(qkv, qkv, qkv), want, rtol=1e-4, atol=1e-4, err_msg=f"{name}, {plan}")
    times: dict[str, list[float]] = {plan: [] for plan in forms}
    for _ in range(rounds):
        for plan, k in built.items():
            times[plan].append(_best_time(lambda k=k: k.run(qkv, qkv, qkv), repeats) * 1e3)
    return [{"shape": name, "plan": plan, "kernels": 1, "ms": statistics.median(times[plan]),
             "rounds_ms": times[plan], "cpu": measured_peaks().cpu, "compile_picks": chosen} for plan in forms]


def _best_time(fn, repeats: int) -> float:
    """Seconds of the fastest of `repeats` calls of `fn`."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=sorted(SHAPES), help="run only this shape (repeatable)")
    ap.add_argument("--json", action="store_true", help="print JSON rows")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median)")
    ap.add_argument("--repeats", type=int, default=20, help="calls per round (the best)")
    ap.add_argument("--forms", action="store_true", help="time the kernel alone, two-pass against blockwise")
    ap.add_argument("--key-block", type=int, action="append", help="keys per block of the blockwise form "
                    "(repeatable; default: the block compile picks)")
    args = ap.parse_args(argv)
    rows = [r for name in args.only or [n for n in SHAPES if SHAPES[n][0] <= 1024]
            for r in (measure_forms(name, args.rounds, args.repeats, args.key_block or []) if args.forms
                      else measure(name, args.rounds, args.repeats))]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'shape':<8}{'plan':<20}{'kernels':>8}{'ms':>9}   rounds")
    for r in rows:
        picked = "  (compile's pick)" if r.get("compile_picks", "-").replace("_", "-") in r["plan"] else ""
        print(f"{r['shape']:<8}{r['plan']:<20}{r['kernels']:>8}{r['ms']:>9.3f}   "
              + " ".join(f"{t:.3f}" for t in r["rounds_ms"]) + picked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
