"""Small models, where a call lasts tens to hundreds of microseconds and per-call overhead decides: tilegrad
against ONNX Runtime per call (issue 41, item 3).

Two models with random weights, built here (nothing is downloaded) and exported to ONNX (opset 17):
  gpt2_2x256   GPT-2's structure (transformers' GPT2Model: pre-norm blocks, causal attention, tanh GELU, no cache,
               no LM head), 2 layers, width 256, 4 heads, at several fixed sequence lengths, each compiled once
  vad_lstm     a streaming voice-activity detector: a chunk of 512 samples, a strided convolutional front end,
               a 2-layer LSTM of hidden 128 over the chunk's frames whose state (h, c) goes in and comes out, and
               a linear + sigmoid speech probability
Both runtimes use the same number of threads (`--threads`, default 2) and the same inputs; outputs are checked
against ONNX Runtime's before timing. Each round times tilegrad, then ONNX Runtime (a median over `--calls`
calls after a warm-up), with a pause between them so that the other's thread pool goes idle; figures are medians
over rounds. Run:

    python benchmarks/small_models.py                    # table
    python benchmarks/small_models.py --json             # [{"model", "seq", "tilegrad_us", "onnxruntime_us",
                                                         #   "ratio", "compile_s", "max_abs_err", "kernels"}]
    python benchmarks/small_models.py --only vad_lstm --rounds 7
    python benchmarks/small_models.py --lengths 17,64,255

"ratio" is ONNX Runtime's time over tilegrad's: above 1 tilegrad is faster.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import sys
import time
import warnings

import numpy as np
import torch
from torch import nn

from timing import median_time  # benchmarks/timing.py, beside this script

IDLE_S = 0.5
TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}


# -- models ------------------------------------------------------------------------------------------------------


class Gpt2Block(nn.Module):
    """GPT-2's block: pre-norm causal self-attention and a tanh-GELU MLP, each with a residual."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        x = x + self.c_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    """GPT-2 without its LM head (transformers' GPT2Model, no cache): token and position embeddings, the blocks,
    a final layer norm."""

    def __init__(self, layers: int = 2, d: int = 256, heads: int = 4, vocab: int = 50257, positions: int = 1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(positions, d)
        self.h = nn.Sequential(*[Gpt2Block(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids):
        return self.ln_f(self.h(self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))))


def gpt2(seq: int):
    g = torch.Generator().manual_seed(0)
    return Gpt2(), {"ids": torch.randint(0, 50257, (1, seq), generator=g)}


class VadLstm(nn.Module):
    """A chunk of audio and the LSTM state in; the speech probability and the next state out."""

    def __init__(self, hidden: int = 128, layers: int = 2):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(1, 64, 64, stride=32), nn.ReLU(),
                                   nn.Conv1d(64, 64, 3, stride=2, padding=1), nn.ReLU())
        self.lstm = nn.LSTM(64, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, audio, h, c):
        frames = self.front(audio.unsqueeze(1)).transpose(1, 2)
        out, (h, c) = self.lstm(frames, (h, c))
        return torch.sigmoid(self.head(out[:, -1])), h, c


def vad_lstm(_seq: int):
    g = torch.Generator().manual_seed(0)
    return VadLstm(), {"audio": torch.randn(1, 512, generator=g), "h": torch.randn(2, 1, 128, generator=g) * 0.1,
                       "c": torch.randn(2, 1, 128, generator=g) * 0.1}


MODELS = {"gpt2_2x256": gpt2, "vad_lstm": vad_lstm}
SEQUENCED = {"gpt2_2x256"}


def _export(module: nn.Module, feeds: dict) -> bytes:
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), tuple(feeds.values()), f, dynamo=False, opset_version=17,
                          input_names=list(feeds))
    return f.getvalue()


# -- measurement ---------------------------------------------------------------------------------------------------


def measure(name: str, seq: int | None, threads: int, rounds: int, calls: int) -> dict:
    """One row: the model at `seq`, compiled once, checked against ONNX Runtime, then timed interleaved."""
    import onnxruntime as ort

    import tilegrad
    from tilegrad import config

    torch.manual_seed(0)
    module, tensors = MODELS[name](seq)
    model = _export(module, tensors)
    feeds = {k: v.numpy() for k, v in tensors.items()}
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    with config.override(num_threads=threads):
        start = time.perf_counter()
        compiled = tilegrad.compile(model)
        got = compiled(**feeds)
        compile_s = time.perf_counter() - start
    got = got if isinstance(got, list) else [got]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, **TOLERANCE, err_msg=f"{name} (seq {seq}) differs from ONNX Runtime")
    times = {"tilegrad": [], "onnxruntime": []}
    for _ in range(rounds):
        times["tilegrad"].append(median_time(lambda: compiled(**feeds), calls))
        time.sleep(IDLE_S)
        times["onnxruntime"].append(median_time(lambda: session.run(None, feeds), calls))
        time.sleep(IDLE_S)
    ours, theirs = (statistics.median(times[k]) * 1e6 for k in ("tilegrad", "onnxruntime"))
    return {"model": name, "seq": seq, "tilegrad_us": round(ours, 1), "onnxruntime_us": round(theirs, 1),
            "ratio": round(theirs / ours, 3), "compile_s": round(compile_s, 2),
            "max_abs_err": float(max(np.max(np.abs(g - w)) for g, w in zip(got, want))),
            "kernels": len(compiled.spec.kernels)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default=None, help="comma-separated model names: " + ", ".join(MODELS))
    parser.add_argument("--lengths", default="17,64,255", help="comma-separated sequence lengths of the GPT-2")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per runtime per round")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(MODELS)
    lengths = [int(n) for n in args.lengths.split(",")]
    rows = []
    for name in names:
        for seq in lengths if name in SEQUENCED else [None]:
            rows.append(measure(name, seq, args.threads, args.rounds, args.calls))
            if not args.json:
                print(f"  measured {name} {seq or ''}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"threads: {args.threads}; medians of {args.rounds} interleaved rounds of {args.calls} calls; ratio is "
          f"ONNX Runtime time / tilegrad time")
    print(f"{'model':<12}{'seq':>5}{'tilegrad us':>13}{'ORT us':>10}{'ratio':>8}{'kernels':>9}{'compile s':>11}"
          f"{'max abs err':>13}")
    for r in rows:
        print(f"{r['model']:<12}{r['seq'] or '':>5}{r['tilegrad_us']:>13.1f}{r['onnxruntime_us']:>10.1f}"
              f"{r['ratio']:>7.2f}x{r['kernels']:>9}{r['compile_s']:>11.1f}{r['max_abs_err']:>13.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
