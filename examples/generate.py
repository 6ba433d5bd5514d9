"""Greedy decoding with a KV cache: a GPT-2 or a LLaMA-style decoder from transformers (random weights) exported
as two ONNX models with dynamic dimensions, each compiled once by tilegrad, then a generate loop that never compiles
again.

    python examples/generate.py                     # a 4-layer GPT-2, a 16-token prompt, 32 new tokens
    python examples/generate.py --small --tokens 128   # GPT-2 small's configuration (124M parameters)
    python examples/generate.py --model llama       # a 4-layer LLaMA (RMSNorm, rotary positions, SwiGLU,
                                                    # grouped-query attention: 8 heads share 4 keys and values)

The prefill model takes the prompt (`ids[1, seq]`) and returns the last position's logits and every layer's keys
and values; the step model takes one token and the cache (`past_k{i}[1, heads, past, d]`; a LLaMA's heads are its
key-value heads, fewer than its query heads) and returns the logits and the cache one longer. Both come from
torch.export with `Dim`s, as `torch.onnx.export(..., dynamo=True)` writes them, and are compiled with
`tilegrad.compile(path, dynamic={"seq": ...})` and `{"past": ...}`: one library each for every prompt length and
every cache length within the bounds. The same loop runs on ONNX Runtime and on PyTorch (the model's own cache),
and the tokens are checked to agree; each runtime's per-token latency is printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


SIZES = {"small": (12, 768, 12), "default": (4, 256, 8)}  # layers, width, heads


def gpt2(layers: int, width: int, heads: int, positions: int, vocab: int = 50257):
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=heads, n_positions=positions,
                                     vocab_size=vocab)
    return _eager(transformers.GPT2LMHeadModel, config)


def llama(layers: int, width: int, heads: int, positions: int, vocab: int = 32000):
    """A LLaMA-style decoder of that size: an MLP of 8/3 the width (SwiGLU), half as many key-value heads as
    query heads."""
    import transformers

    config = transformers.LlamaConfig(hidden_size=width, intermediate_size=8 * width // 3, num_hidden_layers=layers,
                                      num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                                      max_position_embeddings=positions, vocab_size=vocab)
    return _eager(transformers.LlamaForCausalLM, config)


MODELS = {"gpt2": gpt2, "llama": llama}


def _eager(model_class, config):
    config._attn_implementation = "eager"  # the SDPA path asks is_causal of a symbolic length, which export refuses
    torch.manual_seed(0)
    return model_class(config).eval()


class Prefill(torch.nn.Module):
    """ids -> (logits of the last position, k0, v0, k1, v1, ...)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        out = self.model(input_ids=ids, use_cache=True)
        return (out.logits[:, -1], *_flat(out.cache))


class Step(torch.nn.Module):
    """(one token, k0, v0, ...) -> (its logits, the cache one position longer)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, *past):
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer in range(len(past) // 2):
            cache.update(past[2 * layer], past[2 * layer + 1], layer)
        out = self.model(input_ids=ids, cache=cache, use_cache=True)
        return (out.logits[:, -1], *_flat(out.cache))


def _flat(cache) -> list:
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


def export(model, directory: Path, positions: int) -> tuple[Path, Path]:
    """The prefill and step models as ONNX files in `directory` (sequence and cache lengths dynamic)."""
    from torch.export import Dim

    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    shape = (1, heads, 3, config.hidden_size // config.num_attention_heads)
    past = tuple(torch.zeros(shape) for _ in range(2 * config.num_hidden_layers))
    prefill, step = directory / "prefill.onnx", directory / "step.onnx"
    seq, cached = Dim("seq", min=2, max=positions), Dim("past", min=1, max=positions - 1)
    torch.onnx.export(Prefill(model), (torch.zeros((1, 4), dtype=torch.int64),), dynamic_shapes={"ids": {1: seq}},
                      dynamo=True, verbose=False).save(str(prefill))
    torch.onnx.export(Step(model), (torch.zeros((1, 1), dtype=torch.int64), *past),
                      dynamic_shapes={"ids": None, "past": tuple({2: cached} for _ in past)},
                      dynamo=True, verbose=False).save(str(step))
    return prefill, step


def generate(prefill, step, prompt: np.ndarray, tokens: int) -> tuple[list[int], list[float]]:
    """Greedy decoding of `tokens` tokens after `prompt` with two callables (name -> array feeds, returning the
    outputs in order); returns the tokens and the seconds each step took (the first: the prefill)."""
    out, times = [], []
    start = time.perf_counter()
    logits, *cache = prefill({"ids": prompt})
    times.append(time.perf_counter() - start)
    for _ in range(tokens):
        token = int(np.argmax(logits[0]))
        out.append(token)
        start = time.perf_counter()
        logits, *cache = step({"ids": np.array([[token]], np.int64),
                               **{f"past_{k}": c for k, c in enumerate(cache)}})
        times.append(time.perf_counter() - start)
    return out, times


def runtimes(prefill_path: Path, step_path: Path, model, positions: int) -> dict:
    """name -> (prefill, step) callables of each runtime. "torch.compile" is tilegrad as torch.compile's backend
    with dynamic=True: dynamo's graphs of the two modules, each compiled by tilegrad at its first call with
    dynamic dimensions."""
    import onnxruntime as ort

    import tilegrad

    compiled = (tilegrad.compile(prefill_path, dynamic={"seq": (2, positions)}),
                tilegrad.compile(step_path, dynamic={"past": (1, positions - 1)}))
    sessions = (ort.InferenceSession(str(prefill_path)), ort.InferenceSession(str(step_path)))
    eager = (Prefill(model), Step(model))
    dynamo = tuple(torch.compile(m, backend="tilegrad", dynamic=True) for m in (Prefill(model), Step(model)))
    return {
        "tilegrad": tuple(lambda feeds, m=m: m(**feeds) for m in compiled),
        "torch.compile": tuple(lambda feeds, m=m: _torch(m, feeds) for m in dynamo),
        "onnxruntime": tuple(lambda feeds, s=s: s.run(None, feeds) for s in sessions),
        "torch": tuple(lambda feeds, m=m: _torch(m, feeds) for m in eager),
    }


def _torch(module, feeds: dict) -> list[np.ndarray]:
    with torch.inference_mode():
        return [t.numpy() for t in module(*(torch.from_numpy(a) for a in feeds.values()))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="gpt2")
    parser.add_argument("--small", action="store_true", help="GPT-2 small's size (default: 4 layers of 256)")
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    parser.add_argument("--tokens", type=int, default=32, help="tokens to generate")
    args = parser.parse_args(argv)
    positions = max(64, args.prompt + args.tokens + 1)
    model = MODELS[args.model](*SIZES["small" if args.small else "default"], positions)
    prompt = np.random.default_rng(0).integers(0, model.config.vocab_size, (1, args.prompt))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        paths = export(model, Path(tmp), positions)
        print(f"exported prefill and step in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        contenders = runtimes(*paths, model, positions)
        print(f"compiled (tilegrad: one library each, dynamic lengths) in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        generate(*contenders["torch.compile"], prompt, 1)  # dynamo captures and tilegrad compiles at the first call
        print(f"compiled through torch.compile(backend='tilegrad', dynamic=True) in "
              f"{time.perf_counter() - start:.1f} s")
        for fns in contenders.values():  # each runtime's first call (pages touched, pools started) before timing
            generate(*fns, prompt, 1)
        results = {name: generate(*fns, prompt, args.tokens) for name, fns in contenders.items()}
    reference = results["onnxruntime"][0]
    print(f"{'runtime':<14} {'prefill ms':>10} {'per token ms':>12} {'total ms':>9}  tokens")
    for name, (tokens, times) in results.items():
        agree = "same as ONNX Runtime" if tokens == reference else f"DIFFER: {tokens[:8]}..."
        print(f"{name:<14} {1e3 * times[0]:>10.2f} {1e3 * statistics.median(times[1:]):>12.2f} "
              f"{1e3 * sum(times):>9.1f}  {agree}")
    return 0 if all(t == reference for t, _ in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
