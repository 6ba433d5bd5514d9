"""Quantization-aware training: `prepare_qat` puts fake quantization into a PyTorch module, the user trains it with
their own loop, and `convert` writes the QDQ ONNX model with the learned ranges and compiles it.

Each Conv2d and Linear fake-quantizes its input (asymmetric uint8, EMA ranges) and its weight (per-channel
symmetric int8); bias is not quantized. A Conv2d directly followed by a BatchNorm2d (in a Sequential) trains as one
layer with the BatchNorm folded in, as it will run (Jacob et al. 2018): the batch's mean and variance come from a
float convolution, the folded weight w gamma / sigma_B is fake-quantized, and the folded bias beta - gamma mu_B /
sigma_B added; in eval mode the running statistics fold in instead."""

from __future__ import annotations

import copy
import io

import onnx
import torch
from onnx import numpy_helper

from ..errors import TilegradError
from .fake_quant import ACTIVATION_Q, ActivationQuantizer, WeightQuantizer
from .report import NoiseSum, Report, TensorError
from .scheme import QParams, quantize


class QatLayer(torch.nn.Module):
    """A Conv2d or Linear with fake-quantized input and weight; `exporting` swaps the autograd functions for
    torch's fake_quantize ops, which torch.onnx.export writes as QuantizeLinear -> DequantizeLinear."""

    def __init__(self, layer: torch.nn.Module, momentum: float, learnable: bool):
        super().__init__()
        self.layer = layer
        self.input_quant = ActivationQuantizer(momentum, learnable)
        self.weight_quant = WeightQuantizer(layer.weight.shape[0], learnable)
        self.exporting = False

    def folded(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The weight and bias the layer applies (a Conv2d+BatchNorm2d folds them)."""
        return self.layer.weight, self.layer.bias

    def apply_layer(self, x, w, b):
        if isinstance(self.layer, torch.nn.Linear):
            return torch.nn.functional.linear(x, w, b)
        c = self.layer
        return torch.nn.functional.conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups)

    def forward(self, x):
        if self.exporting:
            return self._exported(x)
        w, b = self.folded(x)
        return self.apply_layer(self.input_quant(x), self.weight_quant(w), b)

    def _exported(self, x):
        """The layer as torch.onnx.export traces it: weight, bias, scales and zero points as constants (not ops
        on parameters), so that each weight's QuantizeLinear folds into an int8 initializer."""
        q = self.input_quant
        x = torch.fake_quantize_per_tensor_affine(x, _constant(q.scale.abs().clamp_min(1e-8)),
                                                  _constant(q.zero.to(torch.int32)), *ACTIVATION_Q)
        w, b = self.folded(x)
        scale = self.weight_quant.scale_for(w).detach()
        bound = (scale * 127).reshape([-1] + [1] * (w.dim() - 1))
        w = torch.maximum(torch.minimum(w, bound), -bound)  # [-127, 127]: torch exports only [-128, 127]
        w = torch.fake_quantize_per_channel_affine(_constant(w), _constant(scale),
                                                   torch.zeros(scale.shape, dtype=torch.int32), 0, -128, 127)
        return self.apply_layer(x, w, None if b is None else _constant(b))


def _constant(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values as a new tensor, which a trace records as a constant rather than as the ops that made it."""
    return torch.from_numpy(t.detach().cpu().numpy().copy())


class QatConvBn(QatLayer):
    """Conv2d followed by BatchNorm2d, trained with the BatchNorm folded into the fake-quantized weight."""

    def __init__(self, conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d, momentum: float, learnable: bool):
        super().__init__(conv, momentum, learnable)
        self.bn = bn

    def folded(self, x):
        bn, conv = self.bn, self.layer
        if self.training:
            with torch.no_grad():
                y = self.apply_layer(x, conv.weight, conv.bias)
            mean, var = y.mean(dim=(0, 2, 3)), y.var(dim=(0, 2, 3), unbiased=False)
            with torch.no_grad():
                n = y.numel() / y.shape[1]
                bn.running_mean.lerp_(mean, bn.momentum)
                bn.running_var.lerp_(var * n / max(n - 1, 1), bn.momentum)
                bn.num_batches_tracked += 1
        else:
            mean, var = bn.running_mean, bn.running_var
        inv_std = bn.weight / torch.sqrt(var + bn.eps)
        bias = conv.bias if conv.bias is not None else torch.zeros_like(mean)
        return conv.weight * inv_std.reshape(-1, 1, 1, 1), bn.bias + (bias - mean) * inv_std


def prepare_qat(module: torch.nn.Module, *, learnable: bool = False, momentum: float = 0.1) -> torch.nn.Module:
    """A copy of `module` with fake quantization in each Conv2d and Linear (a Conv2d followed by a BatchNorm2d
    becomes one layer with the BatchNorm folded in). `momentum` weighs each batch in the EMA of activation ranges;
    `learnable` learns the scales as LSQ does. Train it as usual, then `convert` it."""
    out = copy.deepcopy(module)
    _replace(out, momentum, learnable)
    if not any(isinstance(m, QatLayer) for m in out.modules()):
        raise TilegradError(f"{type(module).__name__} has no Conv2d or Linear to quantize")
    return out


def _replace(parent: torch.nn.Module, momentum: float, learnable: bool) -> None:
    children = list(parent.named_children())
    for k, (name, child) in enumerate(children):
        after = children[k + 1][1] if k + 1 < len(children) else None
        if isinstance(child, torch.nn.Conv2d) and isinstance(parent, torch.nn.Sequential) \
                and isinstance(after, torch.nn.BatchNorm2d):
            setattr(parent, name, QatConvBn(child, after, momentum, learnable))
            setattr(parent, children[k + 1][0], torch.nn.Identity())
            children[k + 1] = (children[k + 1][0], torch.nn.Identity())
        elif isinstance(child, (torch.nn.Conv2d, torch.nn.Linear)):
            setattr(parent, name, QatLayer(child, momentum, learnable))
        elif not isinstance(child, QatLayer):
            _replace(child, momentum, learnable)


def export_qdq(qat_module: torch.nn.Module, example_input: torch.Tensor, opset: int = 17) -> onnx.ModelProto:
    """The QDQ ONNX model of a trained QAT module: torch.onnx.export (the TorchScript exporter, which writes torch's
    fake_quantize ops as QuantizeLinear -> DequantizeLinear) of the module in eval mode, then each QuantizeLinear of
    a constant weight replaced by the int8 weight it computes, as onnxruntime.quantization stores weights."""
    m = copy.deepcopy(qat_module).eval()
    for layer in m.modules():
        if isinstance(layer, QatLayer):
            layer.exporting = True
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(m, (example_input,), f, input_names=["input"], output_names=["output"],
                          opset_version=opset, dynamo=False)
    return fold_weight_quantization(onnx.load_from_string(f.getvalue()))


def fold_weight_quantization(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each QuantizeLinear whose inputs are all constants replaced by the quantized initializer."""
    g = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            constants[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    keep, folded = [], []
    for n in g.node:
        if n.op_type == "QuantizeLinear" and all(i in constants for i in n.input if i):
            x, scale, zero = (constants[i] for i in n.input)
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1) if scale.ndim else None
            q = quantize(x, QParams(scale, zero, str(zero.dtype), axis))
            folded.append(numpy_helper.from_array(q, n.output[0]))
            constants[n.output[0]] = q
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(folded)
    used = {i for n in g.node for i in n.input}
    live = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(live)
    return model


def weight_report(qat_module: torch.nn.Module) -> Report:
    """SQNR of each QAT layer's (folded) weight against its fake-quantized form, in eval mode."""
    rows = Report()
    for name, layer in qat_module.named_modules():
        if isinstance(layer, QatLayer):
            with torch.no_grad():
                w, _ = layer.folded(None)  # eval mode: a BatchNorm folds its running statistics
                w_hat = layer.weight_quant(w)
            noise = NoiseSum()
            noise.add(w.detach().numpy(), w_hat.detach().numpy())
            rows.append(TensorError(name or "layer", "weight", "int8", float(layer.weight_quant.scale.max()),
                                    noise.sqnr_db))
    return rows


def convert(qat_module: torch.nn.Module, example_input: torch.Tensor):
    """The int8 Module and QDQ ONNX model of a trained QAT module (a tilegrad.quant.Quantization), compiled for
    the shape of `example_input`; the model's input is named "input" and its output "output". Its report gives
    each layer's weight SQNR."""
    from ..api import compile as compile_model
    from .ptq import Quantization

    qat_module.eval()
    model = export_qdq(qat_module, example_input)
    return Quantization(compile_model(model), model, weight_report(qat_module))
