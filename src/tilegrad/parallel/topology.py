"""Clusters beyond this machine, simulated: a two-level topology (servers of devices, racks of servers, and the
core between racks, each level with its own alpha and beta) and the seed's GPT-3 mapping (§3.1.10): data parallel
across racks, pipeline across the servers of a rack, operator-level parallel within a server.

The step of a pipeline of p stages and m micro-batches takes (m + p - 1) stage-slots (GPipe and 1F1B alike: the
bubble is (p - 1) / (m + p - 1)); they differ in memory: GPipe keeps all m micro-batches' activations, 1F1B at
most p. Stages are equal slices of the layers (a transformer's layers are alike).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import TilegradError
from .cost import Link, Machine
from .train_graph import TrainGraph
from .search import Plan, Problem, data_parallel, search

SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Topology:
    """Devices of `flops` FLOP/s and `bandwidth` bytes/s of memory each, in servers of `devices_per_server` and
    racks of `servers_per_rack`, with the links of each level."""
    flops: float
    server: dict[str, Link] = field(hash=False)
    rack: dict[str, Link] = field(hash=False)
    core: dict[str, Link] = field(hash=False)
    devices_per_server: int = 8
    servers_per_rack: int = 8
    memory_bytes: float = math.inf
    bandwidth: float = math.inf

    @property
    def devices_per_rack(self) -> int:
        return self.devices_per_server * self.servers_per_rack

    def machine(self) -> Machine:
        """The cost model for a group of devices laid out server by server, rack by rack."""
        return Machine(self.flops, self.server, self.memory_bytes, inner_devices=self.devices_per_server,
                       outer=((self.devices_per_rack, self.rack), (math.inf, self.core)), bandwidth=self.bandwidth)


def uniform_links(alpha: float, beta: float) -> dict[str, Link]:
    return {k: Link(alpha, beta) for k in ("all_gather", "all_to_all", "reduce_scatter", "all_reduce")}


@dataclass(frozen=True)
class ClusterPlan:
    devices: int
    data_parallel: int
    pipeline_stages: int
    operator_parallel: int
    micro_batches: int
    schedule: str
    step_seconds: float
    bubble_fraction: float
    memory_bytes: float
    fits: bool
    operator_plan: Plan


def bubble_fraction(stages: int, micro_batches: int) -> float:
    return (stages - 1) / (micro_batches + stages - 1)


def plan_cluster(build: Callable[[int], TrainGraph], batch: int, devices: int, topology: Topology,
                 stages: int = 1, micro_batches: int = 1, schedule: str = "1f1b") -> ClusterPlan:
    """The GPT-3 mapping of a model (`build(batch)` gives its graph for a batch) on `devices` devices: operator
    parallel over min(devices / stages, one server), `stages` pipeline stages across servers, data parallel over
    what is left; predicted step time and memory per device."""
    if schedule not in SCHEDULES:
        raise TilegradError(f"plan_cluster: schedule {schedule!r} is not one of {SCHEDULES}")
    if devices % stages:
        raise TilegradError(f"plan_cluster: {stages} pipeline stages do not divide {devices} devices")
    per_stage = devices // stages
    op_parallel = min(per_stage, topology.devices_per_server)
    replicas = per_stage // op_parallel
    if stages > 1 and stages * op_parallel > topology.devices_per_rack:
        raise TilegradError(f"plan_cluster: {stages} stages of {op_parallel} devices do not fit a rack of "
                            f"{topology.devices_per_rack}; use fewer stages")
    if batch % (replicas * micro_batches):
        raise TilegradError(f"plan_cluster: batch {batch} does not split into {replicas} replicas x "
                            f"{micro_batches} micro-batches")
    micro = batch // replicas // micro_batches
    machine = topology.machine()
    problem = Problem(build(micro), op_parallel, machine)
    op_plan = search(problem) if op_parallel > 1 else data_parallel(problem)
    sync = sum(float(t[problem.candidates[i].index(s)]) for i, (t, s) in
               enumerate(zip(problem.sync, op_plan.strategies)))
    per_micro = (op_plan.step_seconds - sync) / stages
    boundary = _boundary_bytes(problem.graph, op_plan, op_parallel, machine.element_bytes)
    hop = topology.rack["all_gather"].seconds(2, boundary) if stages > 1 else 0.0
    slots = micro_batches + stages - 1
    params = _parameter_bytes(problem, op_plan) / stages
    step = slots * (per_micro + 2 * hop) + sync / stages
    if replicas > 1:  # gradients of this device's parameter blocks, added up across the replicas
        gradient = params / (2 + machine.optimizer_states)
        level = topology.core if devices > topology.devices_per_rack else topology.rack
        step += level["all_reduce"].seconds(replicas, 2 * gradient * (replicas - 1) / replicas)
    activations = (op_plan.memory_bytes - _parameter_bytes(problem, op_plan)) / stages
    in_flight = micro_batches if schedule == "gpipe" else min(stages, micro_batches)
    memory = params + activations * in_flight
    return ClusterPlan(devices, replicas, stages, op_parallel, micro_batches, schedule, step,
                       bubble_fraction(stages, micro_batches), memory, memory <= topology.memory_bytes, op_plan)


def _parameter_bytes(problem: Problem, plan: Plan) -> float:
    total = 0.0
    for i, s in enumerate(plan.strategies):
        total += problem.node_cost(i, s).parameter_bytes
    return total


def _boundary_bytes(g: TrainGraph, plan: Plan, devices: int, element_bytes: int) -> float:
    """The largest activation a stage hands on, per device: a stage boundary falls between layers."""
    largest = 0.0
    for node, s in zip(g.nodes, plan.strategies):
        out = node.op.layouts(s, devices)[1]
        largest = max(largest, math.prod(out.local_shape(node.op.output_shape)) * element_bytes)
    return largest
