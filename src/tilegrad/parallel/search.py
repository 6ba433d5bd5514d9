"""Choosing a strategy per operator: the two modes MindSpore documents.

- `search`: over all operators, by dynamic programming with operator and edge elimination (OptCNN, MindSpore
  1.x's `dynamic_programming` mode). The graph's operators are nodes with a cost per candidate strategy; values
  passed between them are edges with a cost per pair (the redistribution). Parallel edges are added up (edge
  elimination); an operator with one neighbour folds into it, one with two becomes an edge between them
  (operator elimination), remembering its best choice per neighbour choice; what is left is chosen directly and
  the eliminated choices read back in reverse. An operator with three or more neighbours that nothing reduces is
  fixed at its best choice given its neighbours (rare: residual blocks reduce fully).
- `propagate`: sharding propagation from a few annotated operators; each neighbour of a decided operator takes
  the strategy that costs least with the decided ones (redistribution first).

A memory cap per device is met by pricing memory (seconds per byte, raised until the plan fits).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from ..errors import TilegradError
from . import ops
from .cost import Machine, NodeCost, edge_seconds, node_cost
from .train_graph import TrainGraph
from .layout import Layout


@dataclass(frozen=True)
class Plan:
    strategies: tuple[ops.Strategy, ...]
    step_seconds: float
    compute_seconds: float
    communication_seconds: float
    memory_bytes: float
    fits: bool


class Problem:
    """One graph's candidates and their costs on `devices` devices of `machine`; repeated layers share tables."""

    def __init__(self, graph: TrainGraph, devices: int, machine: Machine, use_all: bool = True):
        self.graph, self.devices, self.machine = graph, devices, machine
        self._params = [tuple(k for k, v in enumerate(n.inputs) if v in graph.parameters) for n in graph.nodes]
        consumed = graph.consumers()
        self._final = [n.output not in consumed for n in graph.nodes]
        tables: dict = {}
        self.candidates, self.compute, self.sync, self.memory = [], [], [], []
        for i, n in enumerate(graph.nodes):
            key = (_signature(n.op), self._params[i], self._final[i])
            if key not in tables:
                candidates = n.op.strategies(devices, use_all)
                costs = [self.node_cost(i, s) for s in candidates]
                tables[key] = (candidates, np.array([c.compute for c in costs]),
                               np.array([c.communication for c in costs]),
                               np.array([c.parameter_bytes + c.activation_bytes for c in costs]))
            for table, value in zip((self.candidates, self.compute, self.sync, self.memory), tables[key]):
                table.append(value)
        self.time = [c + s for c, s in zip(self.compute, self.sync)]
        edge_tables: dict = {}
        self.edges = []
        for u, v, k in graph.edges():
            key = (_signature(graph.nodes[u].op), _signature(graph.nodes[v].op), k)
            if key not in edge_tables:
                edge_tables[key] = self._edge_table(u, v, k)
            self.edges.append((u, v, edge_tables[key]))

    def node_cost(self, i: int, strategy: ops.Strategy) -> NodeCost:
        op = self.graph.nodes[i].op
        cost = node_cost(self.machine, op, strategy, self.devices, self._params[i])
        if self._final[i]:  # a final output of partial sums is reduced once
            _, out = op.layouts(strategy, self.devices)
            whole = Layout(out.device_matrix, out.tensor_map)
            reduce = edge_seconds(self.machine, out, whole, op.output_shape) / 2
            cost = NodeCost(cost.compute, cost.communication + reduce, cost.parameter_bytes, cost.activation_bytes)
        return cost

    def _edge_table(self, u: int, v: int, k: int) -> np.ndarray:
        pu, pv = self.graph.nodes[u].op, self.graph.nodes[v].op
        outs = [pu.layouts(s, self.devices)[1] for s in self.candidates[u]]
        ins = [pv.layouts(s, self.devices)[0][k] for s in self.candidates[v]]
        return np.array([[edge_seconds(self.machine, o, i, pu.output_shape) for i in ins] for o in outs])

    def evaluate(self, strategies: tuple[ops.Strategy, ...]) -> Plan:
        """Step time and memory per device of one strategy per operator (any valid strategies)."""
        g, m = self.graph, self.machine
        costs = [self.node_cost(i, s) for i, s in enumerate(strategies)]
        comm = sum(c.communication for c in costs)
        for u, v, k in g.edges():
            out = g.nodes[u].op.layouts(strategies[u], self.devices)[1]
            need = g.nodes[v].op.layouts(strategies[v], self.devices)[0][k]
            comm += edge_seconds(m, out, need, g.nodes[u].op.output_shape)
        compute = sum(c.compute for c in costs)
        memory = sum(c.parameter_bytes + c.activation_bytes for c in costs)
        return Plan(tuple(strategies), compute + comm, compute, comm, memory, memory <= m.memory_bytes)

    def plan_of(self, choice: list[int]) -> Plan:
        """The plan of one candidate index per operator, priced from the tables."""
        compute = sum(float(t[c]) for t, c in zip(self.compute, choice))
        comm = sum(float(t[c]) for t, c in zip(self.sync, choice))
        comm += sum(float(m[choice[u], choice[v]]) for u, v, m in self.edges)
        memory = sum(float(t[c]) for t, c in zip(self.memory, choice))
        return Plan(tuple(self.candidates[i][c] for i, c in enumerate(choice)), compute + comm, compute, comm,
                    memory, memory <= self.machine.memory_bytes)


def _signature(op: ops.Operator) -> ops.Operator:
    """The operator without its name: identical layers share cost tables."""
    return replace(op, name="")


def search(problem: Problem) -> Plan:
    """The cheapest strategies found by elimination; under the machine's memory cap if any plan found fits."""
    best = problem.plan_of(solve(problem.time, problem.edges))
    price = 0.0
    while not best.fits and price < 1e6:
        price = price * 10 if price else best.step_seconds / best.memory_bytes
        tried = problem.plan_of(solve([t + price * m for t, m in zip(problem.time, problem.memory)], problem.edges))
        if tried.fits or tried.memory_bytes < best.memory_bytes:
            best = tried
    return best


def solve(costs: list[np.ndarray], edges: list[tuple[int, int, np.ndarray]]) -> list[int]:
    """Minimise sum of node costs[i][choice i] + edge matrices[choice u, choice v] by elimination."""
    cost = [c.astype(float) for c in costs]
    adj: list[dict[int, np.ndarray]] = [{} for _ in cost]

    def link(u, v, m):
        adj[u][v] = adj[u][v] + m if v in adj[u] else m
        adj[v][u] = adj[u][v].T

    def unlink(v):
        for u in adj[v]:
            del adj[u][v]
        adj[v] = {}

    for u, v, m in edges:
        if u != v:
            link(u, v, m)
    alive = set(range(len(cost)))
    records: list[tuple] = []
    pending = deque(range(len(cost)))
    while True:
        while pending:
            v = pending.popleft()
            if v not in alive or not 1 <= len(adj[v]) <= 2:
                continue
            nbrs = list(adj[v])
            if len(nbrs) == 1:
                u = nbrs[0]
                table = cost[v][:, None] + adj[v][u]
                cost[u] = cost[u] + table.min(0)
                records.append(("leaf", v, u, table.argmin(0)))
            else:
                u, w = nbrs
                table = adj[u][v][:, :, None] + cost[v][None, :, None] + adj[v][w][None, :, :]
                records.append(("series", v, u, w, table.argmin(1)))
                unlink(v)
                link(u, w, table.min(1))
            unlink(v)
            alive.discard(v)
            pending.extend(nbrs)
        stuck = [v for v in alive if adj[v]]
        if not stuck:
            break
        v = max(stuck, key=lambda x: len(adj[x]))
        score = cost[v] + sum((adj[v][u] + cost[u][None, :]).min(1) for u in adj[v])
        chosen = int(score.argmin())
        for u in list(adj[v]):
            cost[u] = cost[u] + adj[v][u][chosen]
            pending.append(u)
        records.append(("fixed", v, chosen))
        unlink(v)
        alive.discard(v)
    choice = [-1] * len(cost)
    for v in alive:
        choice[v] = int(cost[v].argmin())
    for rec in reversed(records):
        if rec[0] == "leaf":
            _, v, u, arg = rec
            choice[v] = int(arg[choice[u]])
        elif rec[0] == "series":
            _, v, u, w, arg = rec
            choice[v] = int(arg[choice[u], choice[w]])
        else:
            choice[rec[1]] = rec[2]
    return choice


def propagate(problem: Problem, annotations: dict[str, ops.Strategy]) -> Plan:
    """Strategies spread from the annotated operators (by name), each operator taking the candidate with the least
    redistribution to its decided neighbours (compute breaks ties); operators no annotation reaches get their
    cheapest candidate alone."""
    g = problem.graph
    chosen: dict[int, int] = {}
    for name, strategy in annotations.items():
        i = g.index(name)
        g.nodes[i].op.cuts(strategy, problem.devices)
        if strategy not in problem.candidates[i]:
            cost = problem.node_cost(i, strategy)
            problem.candidates[i] = problem.candidates[i] + [strategy]
            problem.compute[i] = np.append(problem.compute[i], cost.compute)
            problem.sync[i] = np.append(problem.sync[i], cost.communication)
            problem.time[i] = np.append(problem.time[i], cost.seconds)
            problem.memory[i] = np.append(problem.memory[i], cost.parameter_bytes + cost.activation_bytes)
            problem.edges = [(u, v, problem._edge_table(u, v, _input_index(g, u, v)) if i in (u, v) else m)
                             for u, v, m in problem.edges]
        chosen[i] = problem.candidates[i].index(strategy)
    nbrs: list[list[tuple[int, np.ndarray]]] = [[] for _ in g.nodes]
    for u, v, m in problem.edges:
        nbrs[u].append((v, m))
        nbrs[v].append((u, m.T))
    queue = deque(chosen)
    while queue:
        v = queue.popleft()
        for u, _ in nbrs[v]:
            if u in chosen:
                continue
            comm = sum(m[:, chosen[w]] for w, m in nbrs[u] if w in chosen)
            chosen[u] = int(np.lexsort((problem.time[u], comm))[0])
            queue.append(u)
    choice = [chosen.get(i, int(problem.time[i].argmin())) for i in range(len(g.nodes))]
    return problem.plan_of(choice)


def _input_index(g: TrainGraph, u: int, v: int) -> int:
    return g.nodes[v].inputs.index(g.nodes[u].output)


def data_parallel(problem: Problem) -> Plan:
    """Every operator's first input cut along its first dimension over all devices, parameters replicated."""
    out = []
    for n in problem.graph.nodes:
        op = n.op
        lead = op.inputs[0][0]
        if op.size(lead) % problem.devices:
            raise TilegradError(f"{op.kind} '{op.name}': batch dimension of size {op.size(lead)} does not divide "
                                f"{problem.devices} devices; data parallel needs it to")
        out.append(op.strategy({lead: problem.devices}))
    return problem.evaluate(tuple(out))


