"""THOR (Trace-based Hardware-driven layer-ORiented natural gradient), a PyTorch optimizer.

Each Linear, Conv2d and Embedding weight W is stepped along the natural gradient of its Kronecker-factored Fisher
block, (G + λI)⁻¹ ∇W (A + λI)⁻¹, which is (A + λI)⁻¹ ⊗ (G + λI)⁻¹ vec(∇W) written without the Kronecker product.
The inverses are refreshed every `frequency` steps (or at SPNGD's adaptive per-layer interval) and, per layer,
only when the trace rule says the curvature moved; in between the stale inverses are used. Every other parameter
takes SGD with momentum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..errors import OptimizerError
from .blocks import damped_inverse
from .factors import FactorCollector, Layer, find_layers
from .interval import next_interval
from .trace_rule import Decision, damped_trace, decide, thresholds_of, trace_change


def default_decay_filter(name: str, param: nn.Parameter) -> bool:
    """Weight decay for weight matrices and kernels only: biases and normalisation scales and shifts (the
    one-dimensional parameters) are excluded."""
    return param.dim() > 1


class THOR(torch.optim.Optimizer):
    """THOR over `model`'s parameters, used like any `torch.optim` optimizer (zero_grad, backward, step).

    `damping` is λ, a number or a per-step sequence (`get_thor_damping`); `frequency` the global interval, in
    steps, between curvature refreshes; `thresholds` the trace rule's (w1, w2) or a preset name ("THOR",
    "THOR_stop", "THOR_NT"); `split_dim` the block size b of the factors (None: no splitting; see
    `choose_thor_block_size`); `decay_filter(name, param)` picks the parameters weight decay applies to;
    `adaptive_interval` (None: off) is the relative Frobenius tolerance under which SPNGD's rule calls two
    refreshes' factors similar and adapts each layer's interval, starting from `frequency`; `half_precision`
    runs the two preconditioning matmuls in float16; `kl_clip` (None: off) bounds the step's predicted change
    of the model's output distribution, lr² Σ ⟨preconditioned ∇W, ∇W⟩, by shrinking the preconditioned
    directions (K-FAC's KL clipping, Ba et al. 2017; not in MindSpore's THOR): stale inverses with a small
    damping can otherwise take steps that diverge.
    """

    def __init__(self, model: nn.Module, lr: float, damping: float | Sequence[float] = 0.03, momentum: float = 0.9,
                 weight_decay: float = 0.0, frequency: int = 1, thresholds: tuple[float, float] | str = "THOR",
                 split_dim: int | None = None,
                 decay_filter: Callable[[str, nn.Parameter], bool] = default_decay_filter,
                 adaptive_interval: float | None = None, half_precision: bool = False,
                 kl_clip: float | None = 0.001) -> None:
        if lr <= 0 or momentum < 0 or weight_decay < 0:
            raise OptimizerError(f"THOR needs lr > 0, momentum >= 0 and weight_decay >= 0; got lr={lr}, "
                                 f"momentum={momentum}, weight_decay={weight_decay}")
        if frequency < 1:
            raise OptimizerError(f"THOR's frequency is a number of steps >= 1, got {frequency}")
        if kl_clip is not None and kl_clip <= 0:
            raise OptimizerError(f"THOR's kl_clip must be positive (or None), got {kl_clip}")
        if adaptive_interval is not None and adaptive_interval <= 0:
            raise OptimizerError(f"THOR's adaptive_interval tolerance must be positive (or None), got "
                                 f"{adaptive_interval}")
        if split_dim is not None and split_dim < 1:
            raise OptimizerError(f"THOR's split_dim must be at least 1 (or None), got {split_dim}")
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        super().__init__([p for _, p in named], {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})
        self.damping = damping
        self.frequency = frequency
        self.adaptive_interval = adaptive_interval
        self.thresholds = thresholds_of(thresholds)
        self.split_dim = split_dim
        self.half_precision = half_precision
        self.kl_clip = kl_clip
        self._decays = {p: decay_filter(name, p) for name, p in named}
        self.layers = find_layers(model)
        self._layer_of = {layer.weight: layer for layer in self.layers}
        self._collector = FactorCollector(self.layers)
        self._steps = 0
        self._arm_collector()

    def damping_at(self, step: int) -> float:
        """λ for `step`: the number, or the sequence's entry (its last one past its end)."""
        if isinstance(self.damping, (int, float)):
            return float(self.damping)
        return float(self.damping[min(step, len(self.damping) - 1)])

    def _due(self, layer: Layer) -> bool:
        """Whether `layer` refreshes at the coming step: not frozen, and its interval has run out."""
        state = self.state[layer.weight]
        return not state.get("frozen", False) and self._steps >= state.get("due", 0)

    def _arm_collector(self) -> None:
        """Collect statistics during the passes before the next step for the layers it refreshes."""
        self._collector.collecting = {layer for layer in self.layers if self._due(layer)}

    def _refresh(self, layer: Layer, damping: float) -> None:
        """Apply the trace rule to the statistics the last passes gathered for `layer`."""
        state = self.state[layer.weight]
        interval = state.get("interval", self.frequency)
        factors = self._collector.take(layer)
        if factors is not None and self.adaptive_interval is not None:
            history = state.setdefault("history", [])
            interval = next_interval(interval, history, factors, self.adaptive_interval)
            history[:] = (history + [factors])[-2:]
        state["interval"], state["due"] = interval, self._steps + interval
        if factors is None:
            return
        a, g = factors
        trace = damped_trace(a, g, damping)
        decision = Decision.UPDATE if "trace" not in state else decide(trace_change(trace, state["trace"]),
                                                                        self.thresholds)
        state["decisions"] = state.get("decisions", 0) + 1
        if decision is Decision.UPDATE:
            state["a_inv"] = damped_inverse(a, damping, self.split_dim, layer.name)
            state["g_inv"] = damped_inverse(g, damping, self.split_dim, layer.name)
            state["trace"] = trace
            state["updates"] = state.get("updates", 0) + 1
        elif decision is Decision.FREEZE:
            state["frozen"] = True

    def _precondition(self, layer: Layer, grad: torch.Tensor) -> torch.Tensor:
        """(G + λI)⁻¹ ∇W (A + λI)⁻¹ with the stored inverses."""
        state = self.state[layer.weight]
        a_inv, g_inv = state["a_inv"], state["g_inv"]
        dtype = torch.float16 if self.half_precision else grad.dtype
        if isinstance(layer.module, nn.Embedding):   # W is (tokens, features): A acts on the left, diagonally
            out = (a_inv[:, None] * grad).to(dtype) @ g_inv.to(dtype)
            return out.to(grad.dtype)
        matrix = grad.reshape(grad.shape[0], -1).to(dtype)
        out = g_inv.to(dtype) @ matrix @ a_inv.to(dtype)
        return out.to(grad.dtype).reshape(grad.shape)

    def _kl_scale(self, lr: float, preconditioned: dict[nn.Parameter, torch.Tensor]) -> float:
        """min(1, sqrt(kl_clip / (lr² Σ ⟨d, ∇W⟩))) over the preconditioned directions; 1 without clipping."""
        if self.kl_clip is None:
            return 1.0
        predicted = lr ** 2 * sum(float((d * p.grad).sum()) for p, d in preconditioned.items())
        return min(1.0, (self.kl_clip / predicted) ** 0.5) if predicted > 0 else 1.0

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        damping = self.damping_at(self._steps)
        for layer in self.layers:
            if self._due(layer):
                self._refresh(layer, damping)
        for group in self.param_groups:
            directions = {p: p.grad for p in group["params"] if p.grad is not None}
            preconditioned = {p: self._precondition(self._layer_of[p], g) for p, g in directions.items()
                              if p in self._layer_of and "a_inv" in self.state[p]}
            directions.update(preconditioned)
            scale = self._kl_scale(group["lr"], preconditioned)
            for p, direction in directions.items():
                if p in preconditioned:
                    direction = scale * direction
                if group["weight_decay"] and self._decays.get(p, False):
                    direction = direction + group["weight_decay"] * p
                state = self.state[p]
                if group["momentum"]:
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = direction.clone()
                    else:
                        state["momentum_buffer"].mul_(group["momentum"]).add_(direction)
                    direction = state["momentum_buffer"]
                p.add_(direction, alpha=-group["lr"])
        self._steps += 1
        self._arm_collector()
        return loss

    def state_dict(self) -> dict:
        out = super().state_dict()
        out["thor_steps"] = self._steps
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        self._steps = int(state_dict.pop("thor_steps", 0))
        super().load_state_dict(state_dict)
        self._arm_collector()

    def remove_hooks(self) -> None:
        """Take THOR's hooks off the model (when the optimizer is no longer used)."""
        self._collector.remove()
