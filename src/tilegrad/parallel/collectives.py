"""Redistribution on torch.distributed: each step of a `Redistribution` as a collective over the process groups of
its device-matrix axes, wrapped in autograd Functions whose backward is the adjoint collective (AllGather <->
ReduceScatter, AllReduce <-> AllReduce, AllToAll <-> AllToAll with the dimensions swapped), so a sharded program
trains through them.

Groups are made on first use by every rank in the same order (the program is the same on every rank), as
`torch.distributed.new_group` requires.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .redistribution import Redistribution, Step, all_groups, group


class Groups:
    """The process groups of one device matrix, by axes, for this rank."""

    def __init__(self, device_matrix: tuple[int, ...]):
        self.device_matrix = device_matrix
        self._made: dict[tuple[int, ...], tuple] = {}

    def of(self, axes: tuple[int, ...]) -> tuple:
        """(process group, members in step order) of this rank's group over `axes`."""
        if axes not in self._made:
            mine = group(self.device_matrix, axes, dist.get_rank())
            handle = None
            for members in all_groups(self.device_matrix, axes):
                made = dist.new_group(sorted(members))
                if dist.get_rank() in members:
                    handle = made
            self._made[axes] = (handle, mine)
        return self._made[axes]


def _by_group_rank(members: list[int], items: list) -> list:
    """Reorder `items` (in step order) into the group's rank order (sorted global ranks), or back."""
    order = sorted(members)
    return [items[members.index(q)] for q in order]


def _from_group_rank(members: list[int], items: list) -> list:
    order = sorted(members)
    return [items[order.index(q)] for q in members]


def _gather(x, pg, members, dim):
    parts = [torch.empty_like(x) for _ in members]
    dist.all_gather(parts, x.contiguous(), group=pg)
    return torch.cat(_from_group_rank(members, parts), dim)


def _reduce_scatter(x, pg, members, dim):
    chunks = [c.contiguous() for c in x.chunk(len(members), dim)]
    out = torch.empty_like(chunks[0])
    dist.reduce_scatter(out, _by_group_rank(members, chunks), group=pg)
    return out


def _all_to_all(x, pg, members, gather_dim, split_dim):
    chunks = [c.contiguous() for c in x.chunk(len(members), split_dim)]
    received = [torch.empty_like(c) for c in chunks]
    dist.all_to_all(received, _by_group_rank(members, chunks), group=pg)
    return torch.cat(_from_group_rank(members, received), gather_dim)


class AllGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, pg, members, dim):
        ctx.args = (pg, members, dim)
        return _gather(x, pg, members, dim)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter(grad, *ctx.args), None, None, None


class ReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, pg, members, dim):
        ctx.args = (pg, members, dim)
        return _reduce_scatter(x, pg, members, dim)

    @staticmethod
    def backward(ctx, grad):
        return _gather(grad, *ctx.args), None, None, None


class AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, pg):
        ctx.pg = pg
        out = x.clone()
        dist.all_reduce(out, group=pg)
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.clone()
        dist.all_reduce(out, group=ctx.pg)
        return out, None


class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, pg, members, gather_dim, split_dim):
        ctx.args = (pg, members, split_dim, gather_dim)
        return _all_to_all(x, pg, members, gather_dim, split_dim)

    @staticmethod
    def backward(ctx, grad):
        return _all_to_all(grad, *ctx.args), None, None, None, None


def run_step(step: Step, x: torch.Tensor, groups: Groups) -> torch.Tensor:
    pg, members = groups.of(step.axes)
    if step.kind == "split":
        return x.chunk(len(members), step.dim)[members.index(dist.get_rank())]
    if step.kind == "all_gather":
        return AllGather.apply(x, pg, members, step.dim)
    if step.kind == "reduce_scatter":
        return ReduceScatter.apply(x, pg, members, step.dim)
    if step.kind == "all_reduce":
        return AllReduce.apply(x, pg)
    return AllToAll.apply(x, pg, members, step.dim, step.split_dim)


def redistribute(redist: Redistribution, x: torch.Tensor, groups: Groups) -> torch.Tensor:
    """This rank's block under `redist.target`, from its block under `redist.source`; differentiable."""
    for step in redist.steps:
        x = run_step(step, x, groups)
    return x
