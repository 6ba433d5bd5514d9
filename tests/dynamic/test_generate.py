"""examples/generate.py: a GPT-2 and a LLaMA-style decoder exported as prefill and step models with dynamic
lengths, compiled once each, and the same modules through torch.compile(backend="tilegrad", dynamic=True);
greedy decoding gives ONNX Runtime's tokens and builds nothing after the first call."""

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tilegrad import metrics
from tilegrad.torch_backend import EagerFallbackWarning

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "generate.py"


def _example():
    spec = importlib.util.spec_from_file_location("generate_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_decoding_with_a_kv_cache_matches_onnx_runtime_and_never_compiles(tmp_path, name):
    torch._dynamo.reset()  # the modules' forward code is shared between the models: dynamo's caches start empty
    metrics.reset()
    example = _example()
    positions = 48
    model = example.MODELS[name](2, 64, 4, positions, vocab=300)
    contenders = example.runtimes(*example.export(model, tmp_path, positions), model, positions)
    prompt = np.random.default_rng(0).integers(0, 300, (1, 5))
    for compiled in ("tilegrad", "torch.compile"):
        example.generate(*contenders[compiled], prompt, 1)  # each library's first call (dynamo's: its compile)
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerFallbackWarning)
        tokens, _ = example.generate(*contenders["tilegrad"], prompt, 40)
        assert tokens == example.generate(*contenders["torch.compile"], prompt, 40)[0]
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built
    assert metrics.counters["torch_backend.compiled"] == 2 and not metrics.counters["torch_backend.eager"]
    assert tokens == example.generate(*contenders["onnxruntime"], prompt, 40)[0]
    assert tokens == example.generate(*contenders["torch"], prompt, 40)[0]
