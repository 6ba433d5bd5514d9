"""examples/generate.py: a GPT-2 and a LLaMA-style decoder exported as prefill and step models with dynamic
lengths, compiled once each; greedy decoding gives ONNX Runtime's tokens and builds nothing after the first
call."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tilegrad import metrics

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "generate.py"


def _example():
    spec = importlib.util.spec_from_file_location("generate_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_decoding_with_a_kv_cache_matches_onnx_runtime_and_never_compiles(tmp_path, name):
    example = _example()
    positions = 48
    model = example.MODELS[name](2, 64, 4, positions, vocab=300)
    contenders = example.runtimes(*example.export(model, tmp_path, positions), model, positions)
    prompt = np.random.default_rng(0).integers(0, 300, (1, 5))
    example.generate(*contenders["tilegrad"], prompt, 1)  # each library's first call
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    tokens, _ = example.generate(*contenders["tilegrad"], prompt, 40)
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built
    assert tokens == example.generate(*contenders["onnxruntime"], prompt, 40)[0]
    assert tokens == example.generate(*contenders["torch"], prompt, 40)[0]
