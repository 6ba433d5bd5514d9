"""Small Hugging Face BERT, GPT-2 and ViT configurations fused by the stitching explorer: the same outputs as ONNX
Runtime, and no more kernels than the rule-based fusion."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
import transformers

from tilegrad.api import compile_with_report
from tilegrad.frontend.onnx import import_onnx
from tilegrad.passes import optimize
from tilegrad.passes.memory_plan import kernel_count


class _LastHidden(torch.nn.Module):
    """The model's last hidden state from one keyword input (what the exporter traces)."""

    def __init__(self, model, key: str):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        return self.model(**{self.key: x}).last_hidden_state


def _bert():
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100, max_position_embeddings=32)
    return _LastHidden(transformers.BertModel(config), "input_ids"), torch.randint(0, 100, (1, 12))


def _gpt2():
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=100, n_positions=32,
                                     bos_token_id=0, eos_token_id=0)
    return _LastHidden(transformers.GPT2Model(config), "input_ids"), torch.randint(0, 100, (1, 12))


def _vit():
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    intermediate_size=64, image_size=16, patch_size=8)
    return _LastHidden(transformers.ViTModel(config), "pixel_values"), torch.randn(1, 3, 16, 16)


@pytest.mark.slow
@pytest.mark.parametrize("make", [_bert, _gpt2, _vit], ids=["bert", "gpt2", "vit"])
def test_small_transformers_stitched_match_onnx_runtime(make):
    torch.manual_seed(0)
    model, x = make()
    model.eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), f, dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
    proto = f.getvalue()
    want = ort.InferenceSession(proto).run(["y"], {"x": x.numpy()})[0]
    stitched = compile_with_report(proto, fusion="stitch")
    got = stitched.module(x=x.numpy())
    np.testing.assert_allclose(got[0] if isinstance(got, list) else got, want, rtol=1e-4, atol=1e-4)
    rules, _ = optimize(import_onnx(proto), 2)
    assert stitched.kernels <= kernel_count(rules)
    assert any("(chosen)" in note for r in stitched.report.records for note in r.notes)


def test_an_unknown_fusion_strategy_is_refused_before_compiling():
    from tilegrad.errors import TilegradError

    model, x = _bert()
    with pytest.raises(TilegradError, match="fusion must be one of rules, stitch, got 'fastest'"):
        compile_with_report(model, (x,), fusion="fastest")
