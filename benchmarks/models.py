"""Whole-model benchmark: tilegrad (untuned, default schedules, and optionally tuned) against ONNX Runtime,
PyTorch eager and torch.compile (Inductor, its default backend, and the "tilegrad" backend).

The models are defined here in PyTorch with random weights (no downloads), exported to ONNX once, and each
runtime is timed on the same input: medians over interleaved rounds, with a pause between runtimes. Run:

    python benchmarks/models.py                     # table
    python benchmarks/models.py --json              # [{"model", "opt_level", "cpu", "isa", "tilegrad_ms",
                                                    #   "untuned_ms", "tuned_ms", "onnxruntime_ms", "torch_ms",
                                                    #   "torch_compile_inductor_ms", "torch_compile_tilegrad_ms",
                                                    #   "kernels", "peak_bytes", "intermediate_bytes", "tune_s",
                                                    #   "estimate_untuned_ms", "estimate_tuned_ms",
                                                    #   "tuned_max_rel_error"}]
    python benchmarks/models.py --only resnet50 --opt-levels 0,2
    python benchmarks/models.py --no-torch-compile  # without the two torch.compile columns (Inductor compiles
                                                    #   for a minute or more per model)
    python benchmarks/models.py --tune-budget 600 --db-dir dbs/   # tune each model first (tilegrad.tune, the
                                                    #   default policy, into dbs/<model>.db), then time it tuned too

"kernels" counts the kernels one inference runs, "peak_bytes" the workspace the static memory plan gives the
intermediate tensors (with lifetime-based reuse), "intermediate_bytes" what those tensors would take without
reuse. "torch_ms" is PyTorch eager; the torch.compile columns are None with --no-torch-compile. The tilegrad
backend compiles at the default opt level (2) and must not fall back to eager (that is an error here).

With --tune-budget SECONDS and --db-dir DIR, each model is tuned at each opt level for that many seconds into
DIR/<model>.db before it is timed (an existing database is resumed and the budget still spent), compiled with
those records beside the untuned module, and the two are timed in the same interleaved rounds: the rows add
"tuned_ms" and "untuned_ms" (the same figure as "tilegrad_ms"), "tune_s" (the seconds tuning took, to set against
the budget), "estimate_untuned_ms" and "estimate_tuned_ms" (the tuner's estimates of the model, the sums of its
kernels' timings: the table sets each against the measured latency, "est/meas") and "tuned_max_rel_error" (the
tuned module's output against ONNX Runtime's); without tuning these are None. --report
also writes each model's tuning report (`tilegrad tune --report`) into DIR/<model>_report/. Every row names
the machine: "cpu" (its model) and "isa" (the widest vector extension tilegrad's target detects).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from timing import median_time  # benchmarks/timing.py, beside this script

THREADS = os.cpu_count() or 1
IDLE_S = 0.5


# -- models ------------------------------------------------------------------------------------------------------


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet50():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers), (torch.randn(1, 3, 224, 224),)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


def mobilenet_v2():
    layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)):
        for i in range(n):
            layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += [nn.Conv2d(320, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(), nn.AdaptiveAvgPool2d(1),
               nn.Flatten(), nn.Linear(1280, 1000)]
    return nn.Sequential(*layers), (torch.randn(1, 3, 224, 224),)


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, causal=False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), 1)
            scores = scores.masked_fill(mask, float("-inf"))
        att = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.out(att))
        return self.ln2(x + self.ff(x))


class Bert(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, vocab=30522, seq=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads) for _ in range(layers)])

    def forward(self, ids):
        return self.layers(self.tok(ids) + self.pos)


def bert_base():
    return Bert(), (torch.randint(0, 30522, (1, 128)),)


class Gpt2(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, vocab=50257, seq=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads, causal=True) for _ in range(layers)])
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.head(self.layers(self.tok(ids) + self.pos))


def gpt2_small():
    return Gpt2(), (torch.randint(0, 50257, (1, 128)),)


class Vit(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, patch=16, image=224):
        super().__init__()
        self.embed = nn.Conv2d(3, d, patch, patch)
        tokens = (image // patch) ** 2 + 1
        self.cls, self.pos = nn.Parameter(torch.zeros(1, 1, d)), nn.Parameter(torch.randn(1, tokens, d) * 0.02)
        self.layers = nn.Sequential(*[EncoderLayer(d, heads) for _ in range(layers)])
        self.head = nn.Linear(d, 1000)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.layers(x)[:, 0])


def vit_b16():
    return Vit(), (torch.randn(1, 3, 224, 224),)


def dcgan_generator():
    layers, cin = [nn.ConvTranspose2d(100, 512, 4, 1, 0, bias=False), nn.BatchNorm2d(512), nn.ReLU()], 512
    for cout in (256, 128, 64):
        layers += [nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        cin = cout
    layers += [nn.ConvTranspose2d(64, 3, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers), (torch.randn(1, 100, 1, 1),)


MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "bert_base": bert_base, "vit_b16": vit_b16,
          "gpt2_small": gpt2_small, "dcgan_generator": dcgan_generator}


# -- measurement ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tuning:
    """Tune each model for `budget_s` seconds into `db_dir`/<model>.db before timing it; with `report`, write the
    tuning report into `db_dir`/<model>_report/."""

    budget_s: float
    db_dir: Path
    report: bool = False

    def db(self, name: str) -> Path:
        return self.db_dir / f"{name}.db"

    def tune(self, name: str, model: bytes, opt_level: int) -> tuple[float, float, float]:
        """Tune `model` into its database; returns the seconds it took, and the tuner's estimates of the model's
        latency (seconds) untuned and tuned."""
        import tilegrad

        callbacks = []
        if self.report:
            from tilegrad.machine import measured_peaks
            from tilegrad.tune.report import WriteReport

            callbacks.append(WriteReport(self.db_dir / f"{name}_report", measured_peaks(), model=name))
        self.db_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        result = tilegrad.tune(model, db=self.db(name), opt_level=opt_level, budget=self.budget_s,
                               callbacks=callbacks)
        return time.perf_counter() - start, result.estimated_latency(False), result.estimated_latency(True)


def _export(module, args) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, f, dynamo=False, opset_version=17,
                          input_names=[f"in{i}" for i in range(len(args))])
    return f.getvalue()


def _torch_compiled(module, args) -> dict:
    """torch.compile'd callables: "inductor" (the default backend) and "tilegrad", each called once (under no_grad,
    which the tilegrad backend needs) so that it compiles, with the seconds that took."""
    from tilegrad.torch_backend import EagerFallbackWarning

    compiled = {}
    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        for key, backend in (("inductor", "inductor"), ("tilegrad", "tilegrad")):
            fn = torch.compile(module, backend=backend)
            start = time.perf_counter()
            fn(*args)
            compiled[key] = (fn, time.perf_counter() - start)
    return compiled


def _compiled(model: bytes, level: int, feeds: dict, want: np.ndarray, db: Path | None = None) -> tuple:
    """(compilation, seconds it took, max relative error against ONNX Runtime's output `want`)."""
    from tilegrad.api import compile_with_report

    start = time.perf_counter()
    built = compile_with_report(model, opt_level=level, db=db)
    ours = built.module(**feeds)
    ours = ours[0] if isinstance(ours, list) else ours
    return built, time.perf_counter() - start, float(np.max(np.abs(ours - want)) / (np.max(np.abs(want)) + 1e-12))


def measure(name: str, rounds: int, repeats: int, opt_levels=(2,), torch_compile: bool = True,
            tuning: Tuning | None = None) -> list[dict]:
    """One row per opt level: tilegrad at that level (and, with `tuning`, tuned at that level first), timed
    interleaved with ONNX Runtime, PyTorch eager and torch.compile (Inductor and the tilegrad backend)."""
    import onnxruntime as ort

    from tilegrad.target import host

    torch.manual_seed(0)
    module, args = MODELS[name]()
    module.eval()
    model = _export(module, args)
    feeds = {f"in{i}": a.numpy() for i, a in enumerate(args)}
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    builds = {level: _compiled(model, level, feeds, want) for level in opt_levels}
    tuned, tune_s, estimates = {}, {}, {}
    for level in opt_levels if tuning else ():
        tune_s[level], untuned_estimate, tuned_estimate = tuning.tune(name, model, level)
        estimates[level] = (untuned_estimate, tuned_estimate)
        tuned[level] = _compiled(model, level, feeds, want, db=tuning.db(name))
    torch.set_num_threads(THREADS)
    compiled = _torch_compiled(module, args) if torch_compile else {}
    times = {f"tilegrad{level}": [] for level in opt_levels} | {f"tuned{level}": [] for level in tuned}
    times |= {"onnxruntime": [], "torch": []}
    times |= {f"torch_compile_{key}": [] for key in compiled}
    with torch.no_grad():
        for _ in range(rounds):
            for level in opt_levels:
                mod = builds[level][0].module
                times[f"tilegrad{level}"].append(median_time(lambda: mod(**feeds), repeats))
                time.sleep(IDLE_S)
                if level in tuned:
                    mod = tuned[level][0].module
                    times[f"tuned{level}"].append(median_time(lambda: mod(**feeds), repeats))
                    time.sleep(IDLE_S)
            times["onnxruntime"].append(median_time(lambda: session.run(None, feeds), repeats))
            time.sleep(IDLE_S)
            times["torch"].append(median_time(lambda: module(*args), repeats))
            time.sleep(IDLE_S)
            for key, (fn, _) in compiled.items():
                times[f"torch_compile_{key}"].append(median_time(lambda: fn(*args), repeats))
                time.sleep(IDLE_S)
    target = host()
    rows = []
    for level in opt_levels:
        built, compile_s, error = builds[level]
        spec = built.module.spec
        untuned_ms = statistics.median(times[f"tilegrad{level}"]) * 1e3
        rows.append({"model": name, "opt_level": level, "cpu": target.model, "isa": target.isa,
                     "tilegrad_ms": untuned_ms, "untuned_ms": untuned_ms,
                     "tuned_ms": statistics.median(times[f"tuned{level}"]) * 1e3 if level in tuned else None,
                     "tune_s": tune_s.get(level),
                     "estimate_untuned_ms": estimates[level][0] * 1e3 if level in tuned else None,
                     "estimate_tuned_ms": estimates[level][1] * 1e3 if level in tuned else None,
                     "tuned_max_rel_error": tuned[level][2] if level in tuned else None,
                     "onnxruntime_ms": statistics.median(times["onnxruntime"]) * 1e3,
                     "torch_ms": statistics.median(times["torch"]) * 1e3,
                     **{f"torch_compile_{key}_ms": statistics.median(times[f"torch_compile_{key}"]) * 1e3
                        if key in compiled else None for key in ("inductor", "tilegrad")},
                     **{f"torch_compile_{key}_compile_s": compiled[key][1] if key in compiled else None
                        for key in ("inductor", "tilegrad")},
                     "kernels": built.kernels, "peak_bytes": spec.workspace_bytes,
                     "intermediate_bytes": spec.unshared_bytes, "compile_s": compile_s, "max_rel_error": error})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--opt-levels", default="2", help="comma-separated opt levels to compile at (e.g. 0,2)")
    parser.add_argument("--no-torch-compile", action="store_true",
                        help="skip the torch.compile columns (Inductor and the tilegrad backend)")
    parser.add_argument("--tune-budget", type=float, default=None, metavar="SECONDS",
                        help="tune each model for this long (per opt level) before timing it; needs --db-dir")
    parser.add_argument("--db-dir", type=Path, default=None, metavar="DIR",
                        help="the tuning databases, DIR/<model>.db (created or resumed)")
    parser.add_argument("--report", action="store_true",
                        help="with --tune-budget, write each model's tuning report into DIR/<model>_report/")
    args = parser.parse_args(argv)
    if (args.tune_budget is None) != (args.db_dir is None):
        parser.error("--tune-budget and --db-dir go together")
    if args.report and args.tune_budget is None:
        parser.error("--report needs --tune-budget and --db-dir")
    tuning = Tuning(args.tune_budget, args.db_dir, args.report) if args.tune_budget is not None else None
    names = args.only.split(",") if args.only else list(MODELS)
    levels = tuple(int(x) for x in args.opt_levels.split(","))
    rows = []
    for name in names:
        rows.extend(measure(name, args.rounds, args.repeats, levels, torch_compile=not args.no_torch_compile,
                            tuning=tuning))
        if not args.json:
            print(f"  measured {name}", file=sys.stderr)
    if args.json:
        keys = ("model", "opt_level", "cpu", "isa", "tilegrad_ms", "untuned_ms", "tuned_ms", "onnxruntime_ms",
                "torch_ms", "torch_compile_inductor_ms", "torch_compile_tilegrad_ms", "kernels", "peak_bytes",
                "intermediate_bytes", "tune_s", "estimate_untuned_ms", "estimate_tuned_ms", "tuned_max_rel_error")
        print(json.dumps([{k: r[k] for k in keys} for r in rows], indent=1))
        return 0
    tuned_note = f"; tuned ms: after {tuning.budget_s:g} s of tuning per opt level" if tuning else ""
    print(f"threads: {THREADS}; CPU: {rows[0]['cpu']} ({rows[0]['isa']}); tilegrad ms: untuned (default "
          f"schedules){tuned_note}; latency ratios are peer time / tilegrad time")
    tuned_head = f"{'tuned ms':>9}{'tuned vs ORT':>13}{'est/meas':>9}{'tuned est/meas':>15}{'tune s':>7}" if tuning else ""
    print(f"{'model':<14}{'opt':>4}{'tilegrad ms':>12}{'ORT ms':>9}{'torch ms':>9}{'vs ORT':>8}{'vs torch':>9}"
          f"{'kernels':>8}{'peak MiB':>9}{'interm MiB':>11}{'compile s':>10}{'rel err':>9}{tuned_head}")
    for r in rows:
        tuned = (f"{r['tuned_ms']:>9.2f}{r['onnxruntime_ms'] / r['tuned_ms']:>12.2f}x"
                 f"{r['estimate_untuned_ms'] / r['untuned_ms']:>9.2f}{r['estimate_tuned_ms'] / r['tuned_ms']:>15.2f}"
                 f"{r['tune_s']:>7.0f}" if tuning else "")
        print(f"{r['model']:<14}{r['opt_level']:>4}{r['tilegrad_ms']:>12.2f}{r['onnxruntime_ms']:>9.2f}"
              f"{r['torch_ms']:>9.2f}{r['onnxruntime_ms'] / r['tilegrad_ms']:>7.2f}x"
              f"{r['torch_ms'] / r['tilegrad_ms']:>8.2f}x{r['kernels']:>8}{r['peak_bytes'] / 2**20:>9.1f}"
              f"{r['intermediate_bytes'] / 2**20:>11.1f}{r['compile_s']:>10.1f}{r['max_rel_error']:>9.1e}{tuned}")
    for level in levels:
        ratios = [r["tilegrad_ms"] / r["onnxruntime_ms"] for r in rows if r["opt_level"] == level]
        print(f"opt {level}: geometric mean of tilegrad / ONNX Runtime latency: "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}")
    if not args.no_torch_compile:
        print("\ntorch.compile (same rounds; compile s is the first call's time):")
        print(f"{'model':<14}{'eager ms':>9}{'inductor ms':>12}{'tilegrad backend ms':>20}{'inductor compile s':>19}"
              f"{'backend compile s':>18}")
        for r in rows:
            if r["opt_level"] == levels[0]:
                print(f"{r['model']:<14}{r['torch_ms']:>9.2f}{r['torch_compile_inductor_ms']:>12.2f}"
                      f"{r['torch_compile_tilegrad_ms']:>20.2f}{r['torch_compile_inductor_compile_s']:>19.1f}"
                      f"{r['torch_compile_tilegrad_compile_s']:>18.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
