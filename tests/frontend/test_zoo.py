"""The model zoo's fast subset: public architectures (shrunken configurations, random weights) exported to ONNX
match ONNX Runtime, and one goes through torch.compile's tilegrad backend. The whole zoo, at full size, is
`benchmarks/zoo.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("zoo", Path(__file__).resolve().parents[2] / "benchmarks" / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

# One of each family: encoder and decoder text models, vision transformers, CNNs (ConvNeXt once crashed the
# layout pass), audio; and from zoo_vision, multi-branch concatenation (GoogLeNet), channel shuffle (ShuffleNet
# v2) and a dilated backbone with ASPP and bilinear upsampling (DeepLabV3).
SUBSET = ["distilbert", "t5_encoder", "opt", "vit", "resnet", "mobilenet_v2", "convnext", "wav2vec2",
          "googlenet", "shufflenet_v2", "deeplabv3_resnet50"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_tiny_architecture_matches_onnxruntime(name):
    row = zoo.measure(name, "tiny", rounds=0, repeats=1, paths=("onnx",))
    assert row["error"] is None, row["error"]
    assert row["correct"], f"{name}: relative error {row['max_rel_err']:.2e}"


@pytest.mark.slow
def test_tiny_cnn_compiles_through_torch_compile_and_matches_eager():
    """MobileNet v3 (hard swish, squeeze-excitation): one graph, compiled by tilegrad, no eager fallback."""
    row = zoo.measure("mobilenet_v3_large", "tiny", rounds=0, repeats=1, paths=("torch_compile",))
    assert row["torch_compile_error"] is None, row["torch_compile_error"]
    assert row["torch_compile_compiled"] and row["torch_compile_graph_breaks"] == 0
    assert row["torch_compile_correct"]


@pytest.mark.slow
def test_tiny_distilbert_with_a_padding_mask_compiles_whole_through_torch_compile():
    """DistilBERT with an attention mask: transformers looks the mask up with several index tensors
    (`mask[batch, kv]`, vmapped), which lowers; every node of the captured graph is compiled."""
    import torch
    import transformers

    from tilegrad import metrics

    config = transformers.DistilBertConfig(dim=64, hidden_dim=128, n_layers=2, n_heads=4, vocab_size=1000)
    torch.manual_seed(0)
    model = transformers.DistilBertModel(config).eval()
    ids, mask = torch.randint(0, 1000, (2, 16)), torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    torch._dynamo.reset()
    metrics.reset()
    try:
        with torch.no_grad():
            want = model(ids, attention_mask=mask).last_hidden_state
            got = torch.compile(model, backend="tilegrad")(ids, attention_mask=mask).last_hidden_state
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert metrics.counters["torch_backend.nodes_compiled"] == metrics.counters["torch_backend.nodes"] > 0
