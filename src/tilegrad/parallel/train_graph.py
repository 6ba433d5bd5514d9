"""The parallel planner's view of a model it trains: operators (`ops.Operator`) joined by named values, some of
them parameters. Its own classes (`TrainGraph`, `TrainNode`), not the compiler's `ir.Graph`: the planner needs
each operator's sharding rules and parameters, not a kernel's.

Built with `TrainGraphBuilder`, by hand or from a torch.fx capture (`capture.py`); `models.py` holds the graphs the
tests and the benchmark plan (an MLP, a GPT-2-like stack, a wide classifier).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import TilegradError
from . import ops


@dataclass(frozen=True)
class TrainNode:
    op: ops.Operator
    inputs: tuple[str, ...]
    output: str


@dataclass(frozen=True)
class TrainGraph:
    nodes: tuple[TrainNode, ...]
    shapes: dict[str, tuple[int, ...]] = field(hash=False)
    parameters: frozenset[str]

    def producer(self) -> dict[str, int]:
        return {n.output: i for i, n in enumerate(self.nodes)}

    def consumers(self) -> dict[str, list[tuple[int, int]]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for i, n in enumerate(self.nodes):
            for k, v in enumerate(n.inputs):
                out.setdefault(v, []).append((i, k))
        return out

    def edges(self) -> list[tuple[int, int, int]]:
        """(producer, consumer, consumer's input index) for every value passed between operators."""
        prod = self.producer()
        return [(prod[v], i, k) for i, n in enumerate(self.nodes) for k, v in enumerate(n.inputs) if v in prod]

    def index(self, name: str) -> int:
        for i, n in enumerate(self.nodes):
            if n.op.name == name:
                return i
        raise TilegradError(f"graph: no operator named {name!r}")

    @property
    def parameter_count(self) -> int:
        total = 0
        for p in self.parameters:
            count = 1
            for n in self.shapes[p]:
                count *= n
            total += count
        return total


class TrainGraphBuilder:
    def __init__(self):
        self.nodes: list[TrainNode] = []
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.parameters: set[str] = set()

    def input(self, name: str, shape: tuple[int, ...]) -> str:
        self.shapes[name] = tuple(shape)
        return name

    def parameter(self, name: str, shape: tuple[int, ...]) -> str:
        self.parameters.add(name)
        return self.input(name, shape)

    def add(self, factory: Callable[..., ops.Operator], name: str, *values: str, **attrs) -> str:
        """An operator from `factory(name, *input shapes, **attrs)`; its output value is named after it."""
        if name in self.shapes:
            raise TilegradError(f"graph: operator {name!r} would redefine the value of that name")
        missing = [v for v in values if v not in self.shapes]
        if missing:
            raise TilegradError(f"graph: operator {name!r} reads undefined values {missing}")
        op = factory(name, *(self.shapes[v] for v in values), **attrs)
        self.nodes.append(TrainNode(op, tuple(values), name))
        self.shapes[name] = op.output_shape
        return name

    def build(self) -> TrainGraph:
        return TrainGraph(tuple(self.nodes), dict(self.shapes), frozenset(self.parameters))
