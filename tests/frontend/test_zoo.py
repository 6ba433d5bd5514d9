"""The model zoo's fast subset: public architectures (shrunken configurations, random weights) exported to ONNX
match ONNX Runtime. The whole zoo, at full size, is `benchmarks/zoo.py`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("zoo", Path(__file__).resolve().parents[2] / "benchmarks" / "zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)

# One of each family that imports today: encoder and decoder text models, vision transformers, CNNs (ConvNeXt
# once crashed the layout pass), audio.
SUBSET = ["distilbert", "t5_encoder", "opt", "vit", "resnet", "mobilenet_v2", "convnext", "wav2vec2"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SUBSET)
def test_tiny_architecture_matches_onnxruntime(name):
    row = zoo.measure(name, "tiny", rounds=0, repeats=1)
    assert row["error"] is None, row["error"]
    assert row["correct"], f"{name}: relative error {row['max_rel_err']:.2e}"
