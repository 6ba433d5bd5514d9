"""Pipeline parallelism (MindSpore §3.1.4): a model split into stages, one per process, fed by micro-batches.

`split_stages` cuts an `nn.Sequential` (a stage index per layer) or a torch.fx-captured model (a stage index per
top-level submodule) into stage modules that share the original parameters. `PipelineStage.train_step` runs one
stage's part of a training step under a schedule from `schedules.py`: a forward receives its input activation from
the previous stage and sends its output to the next (`dist.isend`/`dist.recv`); a backward receives the gradient of
its output from the next stage and sends the gradient of its input back. Gradients accumulate in the parameters'
`.grad` over the micro-batches, each micro-batch's loss scaled by 1/num_micro, so the step equals one
single-process step on the whole batch when the loss is a mean. The stage also counts what it holds between a
forward and its backward (micro-batches in flight, and the bytes of the activations autograd saves plus the
stage's outputs), which is how 1F1B's lower peak is measured rather than assumed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import torch
import torch.distributed as dist
from torch import nn
from torch.fx import GraphModule
from torch.fx.passes.split_module import split_module

from ..errors import ShapeError, TilegradError
from .schedules import FORWARD, schedule_for

_MAX_RANK = 8
_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def split_stages(model: nn.Module, assignment: Sequence[int] | Mapping[str, int]) -> list[nn.Module]:
    """The model's stages in order, each a module sharing the model's parameters.

    For an `nn.Sequential`, `assignment` gives each layer's stage; for a `torch.fx.GraphModule`, it maps each
    top-level submodule name to its stage (nodes that call no module go with the stage before them). Stages must
    be contiguous and numbered 0, 1, ...; every stage boundary must carry one tensor.
    """
    if isinstance(model, nn.Sequential):
        return _split_sequential(model, list(assignment))
    if isinstance(model, GraphModule):
        return _split_graph(model, dict(assignment))
    raise TilegradError(f"split_stages: expected an nn.Sequential or a torch.fx.GraphModule, got "
                        f"{type(model).__name__}; capture the model with torch.fx.symbolic_trace first")


def _check_contiguous(stages: Sequence[int], what: str) -> None:
    if not stages or stages[0] != 0 or any(b - a not in (0, 1) for a, b in pairwise(stages)):
        raise TilegradError(f"split_stages: stages must start at 0 and rise by at most 1 along the {what}, "
                            f"got {list(stages)}")


def _split_sequential(model: nn.Sequential, assignment: list[int]) -> list[nn.Module]:
    names = list(model._modules)
    if len(assignment) != len(names):
        raise TilegradError(f"split_stages: {len(names)} layers but {len(assignment)} stage indices")
    _check_contiguous(assignment, "layers")
    stages: list[OrderedDict] = [OrderedDict() for _ in range(assignment[-1] + 1)]
    for name, s in zip(names, assignment):
        stages[s][name] = model._modules[name]
    return [nn.Sequential(layers) for layers in stages]


def _split_graph(gm: GraphModule, assignment: dict[str, int]) -> list[nn.Module]:
    stage_of: dict[torch.fx.Node, int] = {}
    current = 0
    for node in gm.graph.nodes:
        if node.op == "call_module":
            top = node.target.split(".")[0]
            if top not in assignment:
                raise TilegradError(f"split_stages: node {node.name!r} calls submodule {top!r}, which has no stage")
            current = assignment[top]
        stage_of[node] = current
    _check_contiguous([s for n, s in stage_of.items() if n.op not in ("placeholder", "output")] or [0], "graph")
    split = split_module(gm, gm, lambda node: stage_of[node])
    calls = [n for n in split.graph.nodes if n.op == "call_module"]
    for prev, call in zip([None] + calls, calls):
        expected = prev if prev is not None else next(iter(split.graph.nodes))
        if len(call.args) != 1 or call.args[0] is not expected:
            raise TilegradError(f"split_stages: stage {call.target!r} takes {len(call.args)} inputs "
                                f"({[str(a) for a in call.args]}); a pipeline boundary must carry one tensor, the "
                                f"previous stage's output; move the cut")
    return [getattr(split, call.target) for call in calls]


@dataclass(frozen=True)
class ActivationStats:
    """What a stage held between forwards and their backwards during one step, at its peak."""

    peak_in_flight: int  # micro-batches forwarded and not yet backwarded
    peak_bytes: int  # bytes of saved activations and stage outputs those micro-batches held


class PipelineStage:
    """One stage of a pipeline on this process; stage i is rank i of `group` (default: the world)."""

    def __init__(self, module: nn.Module, stage: int, num_stages: int, *, group: dist.ProcessGroup | None = None):
        size = dist.get_world_size(group)
        if size != num_stages or dist.get_rank(group) != stage:
            raise TilegradError(f"PipelineStage: stage {stage} of {num_stages} must run on rank {stage} of a group of "
                                f"{num_stages}, but this is rank {dist.get_rank(group)} of {size}")
        self.module, self.stage, self.num_stages, self.group = module, stage, num_stages, group
        self.device = next(module.parameters(), torch.empty(0)).device  # where received activations go
        self.last_stats = ActivationStats(0, 0)

    def _peer(self, stage: int) -> int:
        return stage if self.group is None else dist.get_global_rank(self.group, stage)

    def train_step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, *,
                   loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], num_micro: int,
                   schedule: str = "1f1b") -> torch.Tensor | None:
        """Forward and backward one batch in `num_micro` micro-batches; the loss on the last stage, else None.

        The first stage reads `inputs`, the last `targets` (others may pass None). Gradients are added to `.grad`.
        """
        first, last = self.stage == 0, self.stage == self.num_stages - 1
        micro_inputs = _chunks(inputs, num_micro, "inputs") if first else None
        micro_targets = _chunks(targets, num_micro, "targets") if last else None
        param_storages = {p.untyped_storage().data_ptr() for p in self.module.parameters()}
        held: dict[int, tuple[torch.Tensor, torch.Tensor, int]] = {}
        pending: list[tuple[dist.Work, torch.Tensor]] = []
        total_loss = torch.zeros((), device=self.device)
        peak_in_flight = peak_bytes = 0
        for action in schedule_for(schedule, self.num_stages, num_micro, self.stage):
            m = action.micro
            if action.kind == FORWARD:
                x = micro_inputs[m] if first else self._recv_activation(m).requires_grad_()
                y, nbytes = _forward_counting(self.module, x, param_storages)
                if last:
                    y = loss_fn(y, micro_targets[m]) / num_micro
                    total_loss += y.detach()
                else:
                    pending += self._send_activation(y.detach(), m)
                held[m] = (x, y, nbytes)
                peak_in_flight = max(peak_in_flight, len(held))
                peak_bytes = max(peak_bytes, sum(b for _, _, b in held.values()))
            else:
                x, y, _ = held.pop(m)
                if last:
                    y.backward()
                else:
                    grad = torch.empty(y.shape, dtype=y.dtype, device=y.device)  # contiguous, whatever y's strides
                    dist.recv(grad, self._peer(self.stage + 1), tag=2 * m + 1)
                    torch.autograd.backward(y, grad)
                if not first:
                    grad = x.grad.contiguous()
                    pending.append((dist.isend(grad, self._peer(self.stage - 1), tag=2 * m + 1), grad))
        for work, _ in pending:
            work.wait()
        self.last_stats = ActivationStats(peak_in_flight, peak_bytes)
        return total_loss if last else None

    def _send_activation(self, y: torch.Tensor, m: int) -> list[tuple[dist.Work, torch.Tensor]]:
        if y.dtype not in _DTYPES or y.dim() > _MAX_RANK:
            raise ShapeError(f"pipeline stage {self.stage}: output {tuple(y.shape)} {y.dtype} cannot cross a stage "
                             f"boundary; supported: floating dtypes {_DTYPES} of rank <= {_MAX_RANK}")
        header = torch.zeros(_MAX_RANK + 2, dtype=torch.int64, device=y.device)
        header[0], header[1] = y.dim(), _DTYPES.index(y.dtype)
        header[2:2 + y.dim()] = torch.tensor(y.shape, dtype=torch.int64)
        to = self._peer(self.stage + 1)
        y = y.contiguous()
        return [(dist.isend(header, to, tag=2 * m), header), (dist.isend(y, to, tag=2 * m), y)]

    def _recv_activation(self, m: int) -> torch.Tensor:
        header = torch.empty(_MAX_RANK + 2, dtype=torch.int64, device=self.device)
        frm = self._peer(self.stage - 1)
        dist.recv(header, frm, tag=2 * m)
        ndim, dtype = int(header[0]), _DTYPES[int(header[1])]
        x = torch.empty(header[2:2 + ndim].tolist(), dtype=dtype, device=self.device)
        dist.recv(x, frm, tag=2 * m)
        return x


def _chunks(t: torch.Tensor | None, num_micro: int, what: str) -> tuple[torch.Tensor, ...]:
    if t is None or t.shape[0] % num_micro:
        got = "None" if t is None else f"a batch of {t.shape[0]}"
        raise ShapeError(f"pipeline: {what} must be a batch divisible into {num_micro} micro-batches, got {got}")
    return t.chunk(num_micro)


def _forward_counting(module: nn.Module, x: torch.Tensor, param_storages: set[int]) -> tuple[torch.Tensor, int]:
    """The module's output and the bytes a stage holds for its backward: the activations autograd saved
    (parameters excluded) and the output itself, each tensor counted once."""
    seen: set[tuple[int, int]] = set()

    def count(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in param_storages:
            seen.add((t.data_ptr(), t.nbytes))
        return t

    with torch.autograd.graph.saved_tensors_hooks(count, lambda t: t):
        y = module(x)
    count(y)
    return y, sum(nbytes for _, nbytes in seen)
