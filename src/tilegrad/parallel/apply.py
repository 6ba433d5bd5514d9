"""A strategy executed on torch.distributed: each rank runs the captured program on its blocks.

Per rank: every parameter is cut to the block its consumer's layout gives this rank (a leaf tensor the optimizer
updates); every operator's inputs are redistributed from their producers' layouts (collectives with adjoint
backwards, `collectives.py`) and the traced call computes the local result. The loss is a sum over the output's
elements, each rank adding its block divided by the number of ranks holding it, so the ranks' losses add up to
the serial loss; a parameter block's gradient is then the sum over the ranks holding copies of it
(`sync_gradients`). An element-wise optimizer (SGD, Adam) on the blocks then takes the serial step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..errors import TilegradError
from . import ops
from .capture import Captured
from .collectives import Groups, redistribute
from .layout import Layout
from .redistribution import plan


class ShardedProgram:
    def __init__(self, captured: Captured, strategies: tuple[ops.Strategy, ...], devices: int,
                 parameters: dict[str, torch.Tensor]):
        g = captured.graph
        if len(strategies) != len(g.nodes):
            raise TilegradError(f"sharded program: {len(strategies)} strategies for {len(g.nodes)} operators")
        self.captured, self.devices, self.rank = captured, devices, dist.get_rank()
        self.layouts = [n.op.layouts(s, devices) for n, s in zip(g.nodes, strategies)]
        self.groups = Groups(Layout.replicated(0, devices).canonical().device_matrix)
        self.parameters: dict[str, torch.Tensor] = {}
        self.parameter_layouts: dict[str, Layout] = {}
        for i, n in enumerate(g.nodes):
            for k, v in enumerate(n.inputs):
                if v not in g.parameters:
                    continue
                layout = self.layouts[i][0][k]
                if v in self.parameter_layouts:
                    raise TilegradError(f"sharded program: parameter {v!r} is read by several operators "
                                        f"({n.op.kind} {n.op.name!r} among them); give each use its own")
                block = parameters[v].detach()[layout.local_index(tuple(parameters[v].shape), self.rank)]
                self.parameters[v] = block.clone().requires_grad_(True)
                self.parameter_layouts[v] = layout

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, Layout]:
        """This rank's block of the output and its layout (partial sums reduced)."""
        g, cap = self.captured.graph, self.captured
        full = dict(zip(cap.inputs, inputs))
        env: dict[str, tuple[torch.Tensor, Layout]] = {}
        for i, n in enumerate(g.nodes):
            need, out = self.layouts[i]
            blocks = []
            for k, v in enumerate(n.inputs):
                if v in self.parameters:
                    blocks.append(self.parameters[v])
                elif v in full:
                    blocks.append(full[v][need[k].local_index(tuple(full[v].shape), self.rank)])
                else:
                    block, have = env[v]
                    blocks.append(redistribute(plan(have.canonical(), need[k].canonical()), block, self.groups))
            env[n.output] = (cap.kernels[n.output](*blocks), out)
        block, layout = env[cap.output]
        whole = Layout(layout.device_matrix, layout.tensor_map)
        return redistribute(plan(layout.canonical(), whole.canonical()), block, self.groups), whole

    def local_loss(self, weights: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
        """sum(output * weights) over this rank's block, divided by the ranks holding each element: the ranks'
        losses add up to the serial sum(output * weights)."""
        block, layout = self.forward(*inputs)
        mine = weights[layout.local_index(tuple(weights.shape), self.rank)]
        return (block * mine).sum() / layout.replication

    def sync_gradients(self) -> None:
        """Add up the gradients of each parameter block over the ranks holding copies of it."""
        for name, p in self.parameters.items():
            layout = self.parameter_layouts[name].canonical()
            used = {a for axes in layout.tensor_map for a in axes}
            replicas = tuple(a for a in range(len(layout.device_matrix)) if a not in used)
            if replicas and p.grad is not None:
                pg, _ = self.groups.of(replicas)
                dist.all_reduce(p.grad, group=pg)

    def gathered(self, blocks: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-parameter blocks (the parameters, their gradients) gathered whole on every rank, for checks and
        checkpoints."""
        out = {}
        for name, block in blocks.items():
            layout = self.parameter_layouts[name]
            whole = Layout.replicated(layout.ndim, self.devices)
            with torch.no_grad():
                out[name] = redistribute(plan(layout.canonical(), whole.canonical()), block.detach(), self.groups)
        return out
