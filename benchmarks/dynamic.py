"""Dynamic sequence lengths: one tilegrad module compiled with `dynamic=` against a module specialised to each
length, the module `tilegrad.compile(path)` gives without `dynamic=` (its dimensions made dynamic as calls change
them), ONNX Runtime and PyTorch eager, over many lengths of BERT-base and GPT-2 small (transformers' models, random
weights, exported by torch.export with a dynamic `seq`).

For each model: the dynamic module's compile time and its first call; the automatic module's first call at each
length in a shuffled order (how many compiles the lengths cost it, and how long each first call took); then per
length (log-spaced, 16 to 512 by default) the median latency of each contender in interleaved rounds (a pause
between runtimes so their thread pools go idle). The specialised modules are compiled for a few of the lengths
only (--specialised, each compile takes seconds): the table sets the dynamic module against them where they
exist. Run:

    python benchmarks/dynamic.py                       # table
    python benchmarks/dynamic.py --json                # {"cpu", "isa", "models": [{"model", "compile_s",
                                                       #   "first_call_ms", "automatic": {"compiles",
                                                       #   "first_calls_ms", "bounds"}, "rows": [{"seq",
                                                       #   "dynamic_ms", "automatic_ms", "specialised_ms",
                                                       #   "onnxruntime_ms", "torch_ms"}]}]}
    python benchmarks/dynamic.py --only gpt2_small --lengths 50 --rounds 5

With --decode TOKENS (default 128): GPT-2 small decodes TOKENS tokens greedily after a 16-token prompt with a KV
cache (examples/generate.py: prefill and step models with dynamic lengths) on each runtime, in interleaved rounds:
the JSON's "decode" holds each runtime's total and median per-token milliseconds; --decode 0 skips it.
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
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "generate.py"
LOW, HIGH = 16, 512


def bert_base():
    import transformers

    return transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False), 30522


def gpt2_small():
    import transformers

    return transformers.GPT2Model(transformers.GPT2Config()), 50257


MODELS = {"bert_base": bert_base, "gpt2_small": gpt2_small}


class _LastHidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model.eval()

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).last_hidden_state if "GPT2" in type(self.model).__name__ \
            else self.model(input_ids=ids).last_hidden_state


def _export(module, path: Path) -> None:
    from torch.export import Dim

    ids = torch.zeros((1, 32), dtype=torch.int64)
    program = torch.onnx.export(module, (ids,), dynamic_shapes={"ids": {1: Dim("seq", min=1, max=HIGH)}},
                                dynamo=True, verbose=False)
    program.save(str(path))


def lengths(count: int) -> list[int]:
    """`count` lengths from LOW to HIGH, spaced evenly in log scale, distinct."""
    return sorted({round(LOW * (HIGH / LOW) ** (k / max(1, count - 1))) for k in range(count)})


def measure(name: str, count: int, specialised: int, rounds: int, repeats: int) -> dict:
    import onnxruntime as ort

    import tilegrad
    from tilegrad import metrics

    module, vocab = MODELS[name]()
    wrapped = _LastHidden(module).eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.onnx"
        _export(wrapped, path)
        start = time.perf_counter()
        dynamic = tilegrad.compile(path, dynamic={"seq": (LOW, HIGH)})
        compile_s = time.perf_counter() - start
        ids = {n: np.random.default_rng(n).integers(0, vocab, (1, n)) for n in lengths(count)}
        first = next(iter(ids.values()))
        start = time.perf_counter()
        dynamic(first)
        first_call_s = time.perf_counter() - start
        automatic, first_calls = tilegrad.compile(path), {}
        before = metrics.counters["specializations_compiled"] + metrics.counters["dynamic_modules_compiled"]
        for n in np.random.default_rng(0).permutation(list(ids)).tolist():
            start = time.perf_counter()
            automatic(ids[n])
            first_calls[n] = 1e3 * (time.perf_counter() - start)
        compiles = metrics.counters["specializations_compiled"] + metrics.counters["dynamic_modules_compiled"] - before
        session = ort.InferenceSession(str(path))
        measured = list(ids)
        pick = {measured[round(k * (len(measured) - 1) / max(1, specialised - 1))] for k in range(specialised)}
        fixed = {n: tilegrad.compile(path, input_shapes={"ids": (1, n)}) for n in sorted(pick)}
        rows = []
        for n, x in ids.items():
            want = session.run(None, {"ids": x})[0]
            error = float(np.abs(dynamic(x) - want).max() / max(1e-6, np.abs(want).max()))
            contenders = {"dynamic": lambda: dynamic(x), "automatic": lambda: automatic(x),
                          "onnxruntime": lambda: session.run(None, {"ids": x}),
                          "torch": lambda: _torch_call(wrapped, x)}
            if n in fixed:
                contenders["specialised"] = lambda: fixed[n](x)
            times = {k: [] for k in contenders}
            for _ in range(rounds):
                for k, fn in contenders.items():
                    times[k].append(median_time(fn, repeats))
                    time.sleep(IDLE_S / 5)
            row = {"seq": n, "max_rel_error": error}
            row.update({f"{k}_ms": 1e3 * statistics.median(v) for k, v in times.items()})
            rows.append(row)
            time.sleep(IDLE_S)
    return {"model": name, "compile_s": compile_s, "first_call_ms": 1e3 * first_call_s,
            "automatic": {"compiles": compiles, "first_calls_ms": first_calls,
                          "bounds": {d: list(b) if isinstance(b, tuple) else b
                                     for d, b in (automatic.dynamic_bounds or {}).items()}},
            "rows": rows}


def decode(tokens: int, rounds: int) -> dict:
    """GPT-2 small's greedy decoding of `tokens` tokens on each runtime (examples/generate.py), interleaved."""
    spec = importlib.util.spec_from_file_location("generate_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    positions = 16 + tokens + 1
    model = example.gpt2(*example.SIZES["small"], positions)
    prompt = np.random.default_rng(0).integers(0, model.config.vocab_size, (1, 16))
    with tempfile.TemporaryDirectory() as tmp:
        contenders = example.runtimes(*example.export(model, Path(tmp), positions), model, positions)
        totals = {k: [] for k in contenders}
        per_token = {k: [] for k in contenders}
        tokens_of = {}
        for _ in range(rounds):
            for name, fns in contenders.items():
                tokens_of[name], times = example.generate(*fns, prompt, tokens)
                totals[name].append(sum(times))
                per_token[name].append(statistics.median(times[1:]))
                time.sleep(IDLE_S)
    same = all(t == tokens_of["onnxruntime"] for t in tokens_of.values())
    return {"tokens": tokens, "same_tokens": same,
            **{f"{k}_total_ms": 1e3 * statistics.median(v) for k, v in totals.items()},
            **{f"{k}_per_token_ms": 1e3 * statistics.median(v) for k, v in per_token.items()}}


def _torch_call(module, x):
    with torch.inference_mode():
        return module(torch.from_numpy(x))


def _geomean(values) -> float:
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(MODELS), action="append")
    parser.add_argument("--lengths", type=int, default=50, help="how many sequence lengths (log-spaced)")
    parser.add_argument("--specialised", type=int, default=6, help="lengths with a specialised module too")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--decode", type=int, default=128, help="GPT-2 small decodes this many tokens (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(torch.get_num_threads())
    from tilegrad.target import host

    target = host()
    results = [measure(name, args.lengths, args.specialised, args.rounds, args.repeats)
               for name in (args.only or sorted(MODELS))]
    decoded = decode(args.decode, args.rounds) if args.decode else None
    if args.json:
        json.dump({"cpu": target.model, "isa": target.isa, "models": results, "decode": decoded}, sys.stdout,
                  indent=1)
        print()
        return 0
    print(f"CPU: {target.model} ({target.isa})")
    for r in results:
        auto = r["automatic"]
        slow = sorted(auto["first_calls_ms"].values())
        print(f"\n{r['model']}: compiled once in {r['compile_s']:.1f} s, first call {r['first_call_ms']:.1f} ms; "
              f"without dynamic=, {len(slow)} lengths in a shuffled order cost {auto['compiles']} compiles "
              f"(bounds {auto['bounds']}), first calls median {statistics.median(slow):.1f} ms, the slowest "
              f"{', '.join(f'{v / 1e3:.1f} s' for v in slow[-auto['compiles']:]) if auto['compiles'] else '-'}")
        print(f"{'seq':>5} {'dynamic':>9} {'auto':>9} {'special.':>9} {'ORT':>9} {'torch':>9} {'spec/dyn':>9} "
              f"{'ORT/dyn':>8} {'err':>8}")
        for row in r["rows"]:
            spec = row.get("specialised_ms")
            print(f"{row['seq']:>5} {row['dynamic_ms']:>9.2f} {row['automatic_ms']:>9.2f} {spec or float('nan'):>9.2f} "
                  f"{row['onnxruntime_ms']:>9.2f} {row['torch_ms']:>9.2f} "
                  f"{(spec or float('nan')) / row['dynamic_ms']:>9.2f} "
                  f"{row['onnxruntime_ms'] / row['dynamic_ms']:>8.2f} {row['max_rel_error']:>8.1e}")
        print(f"geomean ORT/dynamic {_geomean(x['onnxruntime_ms'] / x['dynamic_ms'] for x in r['rows']):.2f}, "
              f"ORT/automatic {_geomean(x['onnxruntime_ms'] / x['automatic_ms'] for x in r['rows']):.2f}, "
              f"specialised/dynamic {_geomean(x.get('specialised_ms', 0) / x['dynamic_ms'] for x in r['rows']):.2f}")
    if decoded:
        print(f"\nGPT-2 small, greedy decoding of {decoded['tokens']} tokens after a 16-token prompt (KV cache):")
        for name in ("tilegrad", "onnxruntime", "torch"):
            print(f"  {name:<12} total {decoded[f'{name}_total_ms']:8.1f} ms, per token "
                  f"{decoded[f'{name}_per_token_ms']:6.2f} ms")
        print(f"  ORT/tilegrad total {decoded['onnxruntime_total_ms'] / decoded['tilegrad_total_ms']:.2f}; tokens "
              f"{'agree' if decoded['same_tokens'] else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
