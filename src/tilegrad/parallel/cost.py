"""The cost of a strategy: compute from an operator's FLOPs and the device's throughput, memory traffic from the
bytes it moves and the device's bandwidth, communication as alpha + beta x bytes per collective (ring volumes),
memory per device (parameters with their gradients and optimizer state, and the activations kept for the
backward pass).

A training step is priced as forward + backward + the optimizer step: each operator's forward and backward
(twice the forward FLOPs, plus the bytes of `traffic.operator_bytes` over the bandwidth) plus a fixed
overhead per operator, each
redistribution twice (its adjoint moves as many bytes), one AllReduce of each parameter's gradient over the
devices holding replicas, and the optimizer's update of each parameter block (`traffic.optimizer_bytes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import TilegradError
from . import ops
from .gemm import GemmRates, products, training_seconds
from .layout import Layout
from .redistribution import Redistribution, plan, step_shapes
from .traffic import (
    fresh_bytes,
    operator_bytes,
    optimizer_bytes,
    optimizer_fresh_bytes,
    optimizer_states,
)

GEMM_KINDS = ("matmul", "batch_matmul", "linear")  # priced by `Machine.gemm` where measured


@dataclass(frozen=True)
class Link:
    """One collective's cost on a group of n devices moving `volume` bytes per device: alpha x (n - 1) + beta x
    volume (ring algorithms: n - 1 rounds)."""
    alpha: float
    beta: float

    def seconds(self, n: int, volume: float) -> float:
        return self.alpha * (n - 1) + self.beta * volume


def ring_volume(kind: str, n: int, nbytes: float) -> float:
    """Bytes each device sends for a collective over n devices on a tensor of `nbytes` (the larger side)."""
    share = nbytes * (n - 1) / n
    return 2 * share if kind == "all_reduce" else share


@dataclass(frozen=True)
class Machine:
    """A device's throughput, memory bandwidth, the links between devices and the memory cap per device.

    `flops` (FLOP/s) and `bandwidth` (bytes/s) are what one device (one process) gets; `gemm`, where measured,
    gives matrix products their throughput by shape; `fresh_seconds_per_byte` is the page-fault cost of a fresh
    large tensor (`traffic.FRESH_THRESHOLD_BYTES`); `op_seconds` is the fixed cost of one operator's forward and
    backward (framework overhead: Python, autograd, dispatch). `links` price
    collectives within the innermost level; `outer` lists (devices spanned, links) for wider groups, innermost
    first (a server of 8, a rack of servers, ...: a group whose ranks span more than a level's devices uses the
    next level's links). `optimizer` names the update (`traffic.OPTIMIZER_PASSES`); `shard_optimizer` shards its
    state and update over a parameter block's replicas (ZeRO-1)."""
    flops: float
    links: dict[str, Link] = field(hash=False)
    memory_bytes: float = math.inf
    element_bytes: int = 4
    optimizer: str = "adam"
    inner_devices: int = 0
    outer: tuple[tuple[float, dict[str, Link]], ...] = field(default=(), hash=False)
    bandwidth: float = math.inf
    op_seconds: float = 0.0
    shard_optimizer: bool = False
    gemm: GemmRates | None = None
    fresh_seconds_per_byte: float = 0.0

    @property
    def optimizer_states(self) -> int:
        return optimizer_states(self.optimizer)

    def collective_seconds(self, kind: str, n: int, nbytes: float, span: int = 1) -> float:
        if kind == "split" or n == 1:
            return 0.0
        links = self.links
        if self.inner_devices and span > self.inner_devices:
            links = next((lk for size, lk in self.outer if span <= size), self.outer[-1][1])
        if kind not in links:
            raise TilegradError(f"cost: no link figures for collective {kind!r}; calibrate or give them")
        return links[kind].seconds(n, ring_volume(kind, n, nbytes))


def span(device_matrix: tuple[int, ...], axes) -> int:
    """How many consecutive ranks a group over `axes` reaches across (ranks are row-major)."""
    out = 1
    for a in axes:
        out = max(out, math.prod(device_matrix[a:]))
    return out


def redistribution_seconds(machine: Machine, redist: Redistribution, shape: tuple[int, ...]) -> float:
    total = 0.0
    for step, (before, after) in zip(redist.steps, step_shapes(redist, shape)):
        larger = max(math.prod(before), math.prod(after)) * machine.element_bytes
        total += machine.collective_seconds(step.kind, redist.group_size(step), larger,
                                            span(redist.device_matrix, step.axes))
    return total


@lru_cache(maxsize=1 << 16)
def _plan(source: Layout, target: Layout) -> Redistribution:
    return plan(source.canonical(), target.canonical())


def edge_seconds(machine: Machine, source: Layout, target: Layout, shape: tuple[int, ...]) -> float:
    """Forward and backward cost of turning a producer's output layout into a consumer's input layout."""
    if source == target:
        return 0.0
    redist = _plan(source, target)
    return 2.0 * redistribution_seconds(machine, redist, shape) if redist.steps else 0.0


@dataclass(frozen=True)
class NodeCost:
    compute: float
    communication: float
    parameter_bytes: float
    activation_bytes: float

    @property
    def seconds(self) -> float:
        return self.compute + self.communication


def operator_seconds(machine: Machine, op: ops.Operator, strategy: ops.Strategy, devices: int) -> float:
    """One device's forward and backward of `op` under `strategy`: each pass its arithmetic time plus its memory
    traffic time plus the page faults of its fresh large tensors, and the fixed per-operator overhead.

    A sum, not a roofline's max: timed op by op, the sum came closer to the measured times than the max (the
    figures are in docs/parallel.md, "Benchmark")."""
    ins, out = op.layouts(strategy, devices)
    local_in = tuple(lay.local_shape(s) for lay, s in zip(ins, op.shapes))
    local_out = out.local_shape(op.output_shape)
    if machine.gemm is not None and op.kind in GEMM_KINDS:
        arithmetic = training_seconds(machine.gemm, *products(op.kind, local_in[0], local_in[1]))
    else:
        flops = op.flops / math.prod(op.cuts(strategy, devices).values())
        arithmetic = (flops / machine.flops, 2.0 * flops / machine.flops)
    moved = operator_bytes(op, local_in, local_out, machine.element_bytes)
    fresh = fresh_bytes(op, local_in, local_out, machine.element_bytes)
    return sum(a + m / machine.bandwidth + f * machine.fresh_seconds_per_byte
               for a, m, f in zip(arithmetic, moved, fresh)) + machine.op_seconds


def optimizer_seconds(machine: Machine, elements: int, shards: int) -> float:
    """The optimizer's update of a parameter block of `elements` (its 1/shards slice under ZeRO): its passes
    over memory and the page faults of its temporaries."""
    eb = machine.element_bytes
    return (optimizer_bytes(machine.optimizer, elements, eb, shards) / machine.bandwidth
            + optimizer_fresh_bytes(machine.optimizer, elements, eb, shards) * machine.fresh_seconds_per_byte)


def node_cost(machine: Machine, op: ops.Operator, strategy: ops.Strategy, devices: int,
              parameter_inputs: tuple[int, ...]) -> NodeCost:
    """Compute (the operator and the optimizer's update of its parameter blocks), the gradient AllReduce of the
    parameter inputs over their replicas, and the memory per device."""
    ins, out = op.layouts(strategy, devices)
    compute = operator_seconds(machine, op, strategy, devices)
    sync, param_bytes = 0.0, 0.0
    for i in parameter_inputs:
        elements = math.prod(ins[i].local_shape(op.shapes[i]))
        local = elements * machine.element_bytes
        shards = ins[i].replication if machine.shard_optimizer else 1
        compute += optimizer_seconds(machine, elements, shards)
        param_bytes += local * (2 + machine.optimizer_states / shards)
        canonical = ins[i].canonical()
        used = {a for axes in canonical.tensor_map for a in axes}
        replicas = [a for a in range(len(canonical.device_matrix)) if a not in used]
        sync += machine.collective_seconds("all_reduce", ins[i].replication, local,
                                           span(canonical.device_matrix, replicas))
    activation = math.prod(out.local_shape(op.output_shape)) * machine.element_bytes
    return NodeCost(compute, sync, param_bytes, activation)
