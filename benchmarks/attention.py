"""The attention kernel against the separate kernels it replaces, per shape, in one process: the attention of one
layer of `models.py`'s encoders (from the QKV projection's output (1, S, 3d) through the head split, the
attention and the head merge to (1, S, d)), compiled with the attention pass (`enable_passes`, whatever the
default) and without it (`disable_passes`), timed in interleaved rounds (each round times both modules): the best
of a round's calls, since on a shared machine the best is the call that was not preempted, and the median of those
over the rounds.

    python benchmarks/attention.py                  # table
    python benchmarks/attention.py --json           # [{"shape", "plan", "kernels", "ms", "rounds_ms", "cpu"}]
    python benchmarks/attention.py --only bert      # one shape

The shapes: BERT-base (128 tokens, 768 wide, 12 heads), ViT-B/16 (197 tokens), GPT-2 small (128, causal), and
1024 tokens (`long`). Set TILEGRAD_NUM_THREADS=1 on a shared machine.
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
          "long": (1024, 768, 12, False)}
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
    args = ap.parse_args(argv)
    rows = [r for name in args.only or SHAPES for r in measure(name, args.rounds, args.repeats)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'shape':<8}{'plan':<18}{'kernels':>8}{'ms':>9}   rounds")
    for r in rows:
        print(f"{r['shape']:<8}{r['plan']:<18}{r['kernels']:>8}{r['ms']:>9.3f}   "
              + " ".join(f"{t:.3f}" for t in r["rounds_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
