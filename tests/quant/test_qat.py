"""Quantization-aware training: the straight-through estimator and LSQ's gradient against their definitions,
EMA ranges, BatchNorm folding, and digits models fine-tuned with fake quantization then converted to int8."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tilegrad.quant import convert, prepare_qat
from tilegrad.quant.fake_quant import (
    ActivationQuantizer,
    FakeQuantize,
    LearnedScaleFakeQuantize,
    WeightQuantizer,
)
from tilegrad.quant.qat import QatConvBn, QatLayer

from .conftest import BATCH, accuracy, batched, predict, train

ort = pytest.importorskip("onnxruntime")


def test_fake_quantize_forward_is_3_22_and_its_gradient_is_the_ste_3_23():
    s, z = 0.1, 3.0  # uint8: the range is [s (0 - z), s (255 - z)] = [-0.3, 25.2]
    x = torch.tensor([-1.0, -0.3, -0.26, 0.04, 0.05, 12.3456, 25.2, 30.0], requires_grad=True)
    y = FakeQuantize.apply(x, torch.tensor(s), torch.tensor(z), 0, 255)
    want = s * (np.clip(np.round(x.detach().numpy() / s + z), 0, 255) - z)  # np.round: half to even, as torch
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-6)
    upstream = torch.arange(1.0, 9.0)
    y.backward(upstream)
    inside = (x.detach() >= -0.3 - 1e-6) & (x.detach() <= 25.2 + 1e-6)
    assert torch.equal(x.grad, upstream * inside)
    assert x.grad.tolist() == [0, 2, 3, 4, 5, 6, 7, 0]


def test_lsq_scale_gradient_is_its_definition():
    s, z, g = 0.5, 0.0, 0.25
    x = torch.tensor([0.3, 0.8, -0.2, 100.0, -100.0])
    scale = torch.tensor(s, requires_grad=True)
    LearnedScaleFakeQuantize.apply(x, scale, torch.tensor(z), -127, 127, g).sum().backward()
    v = x.numpy() / s
    inside = np.abs(np.round(v)) <= 127
    per_element = np.where(inside, np.round(v) - v, np.where(v > 0, 127, -127))
    assert scale.grad.item() == pytest.approx(g * per_element.sum(), rel=1e-5)


def test_weight_scales_are_per_channel_max_over_127():
    w = torch.tensor([[1.0, -2.0], [0.5, 0.25]])
    q = WeightQuantizer(2, learnable=False)
    out = q(w)
    assert torch.allclose(q.scale, torch.tensor([2 / 127, 0.5 / 127]))
    assert torch.allclose(out, torch.round(w / q.scale[:, None]) * q.scale[:, None])


def test_activation_ranges_are_an_ema_of_the_batches():
    q = ActivationQuantizer(momentum=0.25, learnable=False).train()
    q(torch.tensor([-1.0, 3.0]))  # the first batch sets the range
    q(torch.tensor([1.0, 7.0]))  # then: 0.75 old + 0.25 new; lo is widened to 0 for each batch
    assert q.lo.item() == pytest.approx(0.75 * -1.0 + 0.25 * 0.0) and q.hi.item() == pytest.approx(4.0)
    assert q.scale.item() == pytest.approx(4.75 / 255) and q.zero.item() == round(0.75 / (4.75 / 255))


def test_conv_bn_folding_gives_batchnorm_outputs_in_training_and_eval():
    torch.manual_seed(0)
    conv, bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)
    bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.data.uniform_(0.5, 2)
    x = torch.randn(8, 3, 6, 6)
    layer = QatConvBn(copy.deepcopy(conv), copy.deepcopy(bn), momentum=0.1, learnable=False)
    with torch.no_grad():
        want_eval = bn.eval()(conv(x))
        got_eval = layer.eval().apply_layer(x, *layer.folded(x))
        want_train = bn.train()(conv(x))
        got_train = layer.train().apply_layer(x, *layer.folded(x))
    torch.testing.assert_close(got_eval, want_eval, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got_train, want_train, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(layer.bn.running_mean, bn.running_mean)  # both updated once by the batch


def test_prepare_qat_folds_conv_bn_pairs_and_wraps_linear(trained):
    qat = prepare_qat(trained["cnn"])
    layers = [m for m in qat.modules() if isinstance(m, QatLayer)]
    assert [type(m) for m in layers] == [QatConvBn, QatConvBn, QatLayer]
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in qat if not isinstance(m, QatLayer))
    assert any(isinstance(m, torch.nn.Conv2d) for m in trained["cnn"])  # the original is left as it was


@pytest.mark.parametrize("name, learnable", [("cnn", False), ("mlp", True)])
def test_qat_is_within_half_a_point_of_float32_and_runs_in_onnx_runtime(name, learnable, trained, digits):
    (x, y), (xt, yt) = digits
    with torch.no_grad():
        float_accuracy = accuracy(trained[name](torch.from_numpy(xt)).numpy(), yt)
    qat = train(prepare_qat(trained[name], learnable=learnable), x, y, epochs=1, lr=1e-3)
    q = convert(qat, torch.from_numpy(xt[:BATCH]))
    assert accuracy(predict(q.module, xt), yt) >= float_accuracy - 0.5
    ops = [n.op_type for n in q.model.graph.node]
    assert "QuantizeLinear" in ops and ops.count("DequantizeLinear") == 2 * 3  # each layer's input and weight
    exact = ort.SessionOptions()
    exact.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(q.model.SerializeToString(), exact, providers=["CPUExecutionProvider"])
    # the logits are float: an input of the last layer rounded one step the other way (a tie in float32 order of
    # operations) moves them by that step times a weight
    last = [m for m in qat.modules() if isinstance(m, QatLayer)][-1]
    step = last.input_quant.scale.item() * last.layer.weight.abs().max().item()
    for b in batched(xt):
        np.testing.assert_allclose(q.module(b), session.run(None, {"input": b})[0], rtol=0, atol=2 * step)
