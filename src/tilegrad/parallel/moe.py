"""Mixture of experts (MindSpore §3.1.5) with one expert per rank, tokens dispatched and combined by AllToAll.

A gate scores each token against every expert; top-k routing (k = 1 or 2) sends the token to its k best experts,
each of which takes at most `capacity` tokens from one rank (first choices in token order first, then second
choices; a token past capacity is dropped from that expert). Routing is a pair of tensors, as in GShard: `dispatch`
[tokens, experts, capacity], one where a token takes a slot, and `combine`, the same weighted by the gate. The
single-process `MoE` applies every expert to its slots; `DistributedMoE` holds only this rank's expert and moves
the slots with `dist.all_to_all_single` there and back, each move differentiable, so gradients reach the remote
expert, the gate and the tokens. Both share `route`, so they route identically and differ only in the
communication.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from ..errors import ShapeError, TilegradError


@dataclass(frozen=True)
class Routing:
    """Which slot of which expert each token takes (`dispatch`, 0/1) and with what weight (`combine`)."""

    dispatch: torch.Tensor  # [tokens, experts, capacity]
    combine: torch.Tensor  # [tokens, experts, capacity], differentiable in the gate's scores


def route(logits: torch.Tensor, k: int, capacity: int) -> Routing:
    """Top-k routing of tokens with gate scores `logits` [tokens, experts] into slots of `capacity` per expert.

    With k = 2 the two weights are renormalised to sum to one (GShard); with k = 1 the weight is the softmax
    probability, which keeps a gradient to the gate.
    """
    if k not in (1, 2) or k > logits.shape[1] or capacity < 1:
        raise TilegradError(f"MoE routing: k must be 1 or 2 (and at most the {logits.shape[1]} experts), capacity "
                            f"at least 1; got k={k}, capacity={capacity}")
    probs = logits.softmax(dim=-1)
    weights, experts = probs.topk(k, dim=-1)  # [tokens, k]
    if k == 2:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    num_experts = logits.shape[1]
    taken = torch.zeros(num_experts, dtype=torch.int64)
    dispatch = torch.zeros(logits.shape[0], num_experts, capacity, dtype=logits.dtype, device=logits.device)
    for choice in range(k):  # every first choice is seated before any second choice
        for token, expert in enumerate(experts[:, choice].tolist()):
            if taken[expert] < capacity:
                dispatch[token, expert, taken[expert]] = 1.0
                taken[expert] += 1
    choice_weight = torch.zeros_like(probs).scatter(1, experts, weights)  # [tokens, experts]
    return Routing(dispatch, dispatch * choice_weight.unsqueeze(-1))


def _slots(x: torch.Tensor, routing: Routing) -> torch.Tensor:
    """The tokens placed in their experts' slots: [experts, capacity, features], zeros where a slot is empty."""
    return torch.einsum("tec,td->ecd", routing.dispatch, x)


def _combined(expert_out: torch.Tensor, routing: Routing) -> torch.Tensor:
    """Each token's experts' outputs summed with the gate's weights: [tokens, features]."""
    return torch.einsum("tec,ecd->td", routing.combine, expert_out)


class MoE(nn.Module):
    """All experts on this process: the reference `DistributedMoE` must equal."""

    def __init__(self, gate: nn.Module, experts: list[nn.Module], *, k: int = 1, capacity: int):
        super().__init__()
        self.gate, self.experts, self.k, self.capacity = gate, nn.ModuleList(experts), k, capacity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        routing = route(self.gate(x), self.k, self.capacity)
        slots = _slots(x, routing)
        return _combined(torch.stack([e(s) for e, s in zip(self.experts, slots)]), routing)


class _AllToAll(torch.autograd.Function):
    """`dist.all_to_all_single` over equal blocks of dim 0; its gradient is the same exchange in reverse."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        return _exchange(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _exchange(grad, ctx.group), None


def _exchange(x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """Block i of dim 0 to rank i, block i of the result from rank i; contiguous both ways, since the collective
    reads and writes flat memory (a gradient may arrive with any strides)."""
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dist.all_to_all_single(out, x.contiguous(), group=group)
    return out


class DistributedMoE(nn.Module):
    """This rank's tokens through an MoE whose expert e lives on rank e of `group` (one expert per rank).

    The gate is replicated: every rank holds the same gate and routes its own tokens; its gradient on a rank comes
    from that rank's tokens only, so data-parallel training all-reduces it like any replicated parameter.
    """

    def __init__(self, gate: nn.Module, expert: nn.Module, *, k: int = 1, capacity: int,
                 group: dist.ProcessGroup | None = None):
        super().__init__()
        self.gate, self.expert, self.k, self.capacity, self.group = gate, expert, k, capacity, group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.gate(x)
        world = dist.get_world_size(self.group)
        if logits.shape[1] != world:
            raise ShapeError(f"DistributedMoE: the gate scores {logits.shape[1]} experts but the group has {world} "
                             f"ranks; place one expert per rank")
        routing = route(logits, self.k, self.capacity)
        received = _AllToAll.apply(_slots(x, routing), self.group)  # [source rank, capacity, features]
        out = self.expert(received.reshape(-1, x.shape[1])).reshape(world, self.capacity, -1)
        return _combined(_AllToAll.apply(out, self.group), routing)
