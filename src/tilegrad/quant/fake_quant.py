"""Fake quantization for quantization-aware training: (3.22) forward, quantize then dequantize in float, and the
straight-through estimator (3.23) backward, the gradient passed where x lies in the range [s (q_min - z),
s (q_max - z)] and zero outside. With a learnable scale (LSQ, Esser et al. 2020) the scale gets the gradient of
(3.22) with the rounding passed straight through, scaled by 1 / sqrt(n q_max) as LSQ prescribes.

Weights: per-channel symmetric int8 on [-127, 127] (axis 0). Activations: per-tensor asymmetric uint8 whose range
is an exponential moving average of each training batch's min and max (the first batch sets it)."""

from __future__ import annotations

import torch

WEIGHT_Q = (-127, 127)
ACTIVATION_Q = (0, 255)


class FakeQuantize(torch.autograd.Function):
    """(3.22) and (3.23): x_out = s (clip(round(x / s + z), q_min, q_max) - z); dL/dx = dL/dx_out inside the
    range, 0 outside. `scale` and `zero` broadcast against x; they get no gradient."""

    @staticmethod
    def forward(ctx, x, scale, zero, q_min: int, q_max: int):
        q = torch.clamp(torch.round(x / scale + zero), q_min, q_max)
        ctx.save_for_backward((x >= scale * (q_min - zero)) & (x <= scale * (q_max - zero)))
        return scale * (q - zero)

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside, None, None, None, None


class LearnedScaleFakeQuantize(torch.autograd.Function):
    """(3.22) with LSQ's gradient for the scale: d x_out / d s = round(x / s + z) - z - x / s inside the range,
    q_min - z below it and q_max - z above it, summed over the elements the scale covers, times `grad_scale`."""

    @staticmethod
    def forward(ctx, x, scale, zero, q_min: int, q_max: int, grad_scale: float):
        v = x / scale + zero
        q = torch.clamp(torch.round(v), q_min, q_max)
        ctx.save_for_backward(v, q, scale, zero)
        ctx.grad_scale = grad_scale
        return scale * (q - zero)

    @staticmethod
    def backward(ctx, grad):
        v, q, scale, zero = ctx.saved_tensors
        inside = (q == torch.round(v)).to(grad.dtype)  # not clipped
        d_scale = torch.where(inside.bool(), q - v, q - zero)  # round(v) - v inside; the bound minus z outside
        d_scale = _sum_to(grad * d_scale * ctx.grad_scale, scale.shape)
        return grad * inside, d_scale, None, None, None, None


def _sum_to(t: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """`t` summed over what broadcasting `shape` (a scalar, or of t's rank) against it spread."""
    if len(shape) == 0:
        return t.sum()
    dims = [d for d, n in enumerate(shape) if n == 1 and t.shape[d] != 1]
    return t.sum(dim=dims, keepdim=True) if dims else t


class WeightQuantizer(torch.nn.Module):
    """Per-output-channel symmetric int8: scale max|w_c| / 127, or learned (LSQ) from that start."""

    def __init__(self, channels: int, learnable: bool):
        super().__init__()
        self.learnable = learnable
        self.scale = torch.nn.Parameter(torch.zeros(channels), requires_grad=learnable)
        self.register_buffer("initialized", torch.tensor(False))

    def scale_for(self, w: torch.Tensor) -> torch.Tensor:
        """The per-channel scales for `w` (max|w_c| / 127, or the learned ones)."""
        bound = w.detach().abs().flatten(1).max(dim=1).values.clamp_min(1e-8) / WEIGHT_Q[1]
        if not self.learnable:
            self.scale.data.copy_(bound)
        elif not self.initialized:
            self.scale.data.copy_(bound)
            self.initialized.fill_(True)
        return self.scale.abs().clamp_min(1e-8)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        scale = self.scale_for(w).reshape([-1] + [1] * (w.dim() - 1))
        zero = torch.zeros_like(scale)
        if self.learnable:
            grad_scale = 1.0 / (w[0].numel() * WEIGHT_Q[1]) ** 0.5
            return LearnedScaleFakeQuantize.apply(w, scale, zero, *WEIGHT_Q, grad_scale)
        return FakeQuantize.apply(w, scale, zero, *WEIGHT_Q)


class ActivationQuantizer(torch.nn.Module):
    """Per-tensor asymmetric uint8 over an EMA of the batches' ranges (widened to hold 0); with `learnable`, the
    scale is learned (LSQ) from the first batch's range and the zero point stays where that range put it."""

    def __init__(self, momentum: float, learnable: bool):
        super().__init__()
        self.momentum, self.learnable = momentum, learnable
        self.register_buffer("lo", torch.tensor(0.0))
        self.register_buffer("hi", torch.tensor(0.0))
        self.register_buffer("initialized", torch.tensor(False))
        self.scale = torch.nn.Parameter(torch.tensor(1.0), requires_grad=learnable)
        self.register_buffer("zero", torch.tensor(0.0))

    def _observe(self, x: torch.Tensor) -> None:
        lo, hi = x.detach().min().clamp_max(0.0), x.detach().max().clamp_min(0.0)
        if not self.initialized:
            self.lo.copy_(lo)
            self.hi.copy_(hi)
            self.initialized.fill_(True)
        elif self.learnable:
            return  # the scale is learned from here on
        else:
            self.lo.lerp_(lo, self.momentum)
            self.hi.lerp_(hi, self.momentum)
        self._set_params()

    def _set_params(self) -> None:
        scale = ((self.hi - self.lo) / (ACTIVATION_Q[1] - ACTIVATION_Q[0])).clamp_min(1e-8)
        self.scale.data.copy_(scale)
        self.zero.copy_(torch.clamp(torch.round(ACTIVATION_Q[0] - self.lo / scale), *ACTIVATION_Q))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self._observe(x)
        scale = self.scale.abs().clamp_min(1e-8)
        if self.learnable:
            grad_scale = 1.0 / (x.numel() * ACTIVATION_Q[1]) ** 0.5
            return LearnedScaleFakeQuantize.apply(x, scale, self.zero, *ACTIVATION_Q, grad_scale)
        return FakeQuantize.apply(x, scale, self.zero, *ACTIVATION_Q)
