"""Optimizer-state sharding (MindSpore §3.1.7, weight sharding; ZeRO stage 1) on torch.distributed.

In data parallelism every rank runs the same optimizer update on the same state, which wastes (N-1)/N of the
state memory and the update time. `ShardedOptimizer` flattens the parameters into one vector (padded with zeros to
a multiple of N, so no parameter shape needs to divide by N), and gives rank r the r-th slice. A step
reduce-scatters the flat gradient (each rank receives the sum of its slice over all ranks, divided by N: the
data-parallel mean), lets an ordinary torch optimizer update the slice (so its state, Adam's two moments, exists
only for that slice), then all-gathers the updated slices into every rank's parameters.

The inner optimizer must be element-wise (SGD, Adam, AdamW, ...): one that reads a whole parameter, such as LAMB's
trust ratio, would see only a slice.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist
from torch import nn

from ..errors import OptimizerError


class ShardedOptimizer:
    """`optimizer_class(**options)` run on this rank's slice of the flattened parameters."""

    def __init__(self, params: Iterable[nn.Parameter], optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
                 *, group: dist.ProcessGroup | None = None, **options):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise OptimizerError("ShardedOptimizer: no parameters that require gradients")
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) != 1:
            raise OptimizerError(f"ShardedOptimizer: parameters of several dtypes {sorted(map(str, dtypes))}; "
                                 f"shard each dtype with its own optimizer")
        self.group = group
        self.world_size, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.numel = sum(p.numel() for p in self.params)
        self.shard_numel = -(-self.numel // self.world_size)
        start = self.rank * self.shard_numel
        flat = self._flatten([p.detach() for p in self.params])
        self.shard = nn.Parameter(flat[start:start + self.shard_numel].clone())
        self.optimizer = optimizer_class([self.shard], **options)

    def _flatten(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        flat = torch.cat([t.reshape(-1) for t in tensors])
        return nn.functional.pad(flat, (0, self.shard_numel * self.world_size - self.numel))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """Average the gradients across ranks, update this rank's slice, and gather the parameters everywhere."""
        missing = [i for i, p in enumerate(self.params) if p.grad is None]
        if missing:
            raise OptimizerError(f"ShardedOptimizer.step: parameters {missing} (by position) have no gradient on rank "
                                 f"{self.rank}; every rank must run backward through every parameter")
        grad = self._flatten([p.grad for p in self.params])
        shard_grad = torch.empty(self.shard_numel, dtype=grad.dtype, device=grad.device)
        dist.reduce_scatter_single(shard_grad, grad, group=self.group)
        self.shard.grad = shard_grad.div_(self.world_size)
        self.optimizer.step()
        flat = torch.empty(self.shard_numel * self.world_size, dtype=grad.dtype, device=grad.device)
        dist.all_gather_single(flat, self.shard.detach(), group=self.group)
        offset = 0
        for p in self.params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()

    def state_bytes(self) -> int:
        """Bytes of this rank's optimizer state held per element (moments), not the scalar step counters."""
        return optimizer_state_bytes(self.optimizer)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of an optimizer's per-element state tensors (Adam's moments; scalar step counters are left out)."""
    return sum(t.nbytes for state in optimizer.state.values() for t in state.values()
               if isinstance(t, torch.Tensor) and t.dim() > 0)
