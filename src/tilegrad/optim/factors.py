"""The Kronecker factors of each preconditioned layer's Fisher block, collected by hooks during the user's own
forward and backward passes: A = aᵀa / rows over the layer's inputs, G = gᵀg / rows over its output gradients.

Why hooks: THOR is used in an ordinary PyTorch loop, so the statistics must come from the passes the user runs.
A convolution's input rows are its im2col patches (`torch.nn.functional.unfold`), so its weight, viewed as
(out, in·kh·kw), acts on them like a Linear layer's. An Embedding's input rows are one-hot, so its A is diagonal
(token counts) and is kept as a vector. Output gradients are multiplied by the batch size: a mean-reduced loss
divides them by it, and G should describe one sample's gradient.
"""

from __future__ import annotations

import dataclasses
import logging

import torch
import torch.nn.functional as F
from torch import nn

log = logging.getLogger(__name__)


@dataclasses.dataclass(eq=False)
class Layer:
    """A preconditioned layer: its name (for messages), module and weight."""
    name: str
    module: nn.Module

    @property
    def weight(self) -> nn.Parameter:
        return self.module.weight


def _unsupported(module: nn.Module) -> str | None:
    """Why `module` is left to SGD-momentum, or None when THOR preconditions it."""
    if isinstance(module, nn.Conv2d):
        if module.groups != 1:
            return f"grouped convolution (groups={module.groups})"
        if module.padding_mode != "zeros" or isinstance(module.padding, str):
            return f"padding {module.padding!r} in mode {module.padding_mode!r}"
        return None
    if isinstance(module, (nn.Linear, nn.Embedding)):
        return None
    return "not a Linear, Conv2d or Embedding layer"


def find_layers(model: nn.Module) -> list[Layer]:
    """The layers THOR preconditions: every Linear, Conv2d (ungrouped, zero padding) and Embedding whose weight
    is trained."""
    layers = []
    for name, module in model.named_modules():
        if not isinstance(module, (nn.Linear, nn.Conv2d, nn.Embedding)) or not module.weight.requires_grad:
            continue
        reason = _unsupported(module)
        if reason:
            log.debug("THOR leaves %s to SGD-momentum: %s", name, reason)
        else:
            layers.append(Layer(name or type(module).__name__, module))
    return layers


def input_rows(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The rows a of the layer's input the weight multiplies: features, im2col patches, or token indices."""
    if isinstance(module, nn.Conv2d):
        patches = F.unfold(x, module.kernel_size, dilation=module.dilation, padding=module.padding,
                           stride=module.stride)                         # (N, C·kh·kw, positions)
        return patches.transpose(1, 2).reshape(-1, patches.shape[1])
    if isinstance(module, nn.Embedding):
        return x.reshape(-1)
    return x.reshape(-1, x.shape[-1])


def output_rows(module: nn.Module, g: torch.Tensor) -> torch.Tensor:
    """The rows of the gradient of the layer's output, one per input row."""
    if isinstance(module, nn.Conv2d):
        return g.movedim(1, -1).reshape(-1, g.shape[1])
    return g.reshape(-1, g.shape[-1])


def covariance(module: nn.Module, rows: torch.Tensor) -> torch.Tensor:
    """Σ rows rowᵀ (not yet divided by the row count); an Embedding's inputs give their counts (the diagonal)."""
    if isinstance(module, nn.Embedding) and rows.dtype in (torch.int32, torch.int64):
        return torch.bincount(rows, minlength=module.num_embeddings).to(module.weight.dtype)
    rows = rows.detach().to(module.weight.dtype)
    return rows.T @ rows


class _Sum:
    """A running Σ rows rowᵀ and its row count."""

    def __init__(self) -> None:
        self.total: torch.Tensor | None = None
        self.rows = 0

    def add(self, module: nn.Module, rows: torch.Tensor) -> None:
        part = covariance(module, rows)
        self.total = part if self.total is None else self.total + part
        self.rows += rows.shape[0]

    def mean(self) -> torch.Tensor:
        return self.total / self.rows


class FactorCollector:
    """Forward and backward hooks on `layers` that sum A and G while `collecting` holds the layer.

    Only passes with gradients enabled count (evaluation under `torch.no_grad()` does not); several passes
    before one step (gradient accumulation) are averaged.
    """

    def __init__(self, layers: list[Layer]) -> None:
        self.collecting: set[Layer] = set()
        self._a: dict[Layer, _Sum] = {}
        self._g: dict[Layer, _Sum] = {}
        self._handles = [layer.module.register_forward_hook(self._forward_hook(layer)) for layer in layers]

    def _forward_hook(self, layer: Layer):
        def hook(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
            if layer not in self.collecting or not torch.is_grad_enabled() or not output.requires_grad:
                return
            self._a.setdefault(layer, _Sum()).add(module, input_rows(module, args[0].detach()))
            batch = output.shape[0]
            output.register_hook(
                lambda g: self._g.setdefault(layer, _Sum()).add(module, output_rows(module, g) * batch))
        return hook

    def take(self, layer: Layer) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The averaged (A, G) gathered since the last take, or None when a pass is missing; resets the sums."""
        a, g = self._a.pop(layer, None), self._g.pop(layer, None)
        if a is None or g is None:
            return None
        return a.mean(), g.mean()

    def remove(self) -> None:
        """Take the hooks off the model."""
        for handle in self._handles:
            handle.remove()
