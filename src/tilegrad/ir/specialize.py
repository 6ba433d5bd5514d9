"""A node of a graph over dynamic dimensions made concrete at values of them.

Tuning over a distribution of shapes times a kernel of the dynamic module at several values of its dimensions:
each value's task is the node with every shape, attribute and nested graph (a fused node's body) evaluated there,
so its computation is the symbolic one's specialisation (`te/specialize.py` does the same for tensors) and a
schedule tuned on it replays on the symbolic kernel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ..te import expr as E
from ..te.dims import evaluate, is_symbolic_array
from .graph import Graph, Node, Value
from .registry import TensorType


def specialize_node(node: Node, values: Mapping[str, int]) -> Node:
    """`node` with its dynamic dimensions (by variable name, `te.dims`) fixed at `values`."""
    return _Specializer(values).node(node)


class _Specializer:
    def __init__(self, values: Mapping[str, int]):
        self.values = dict(values)
        self.made: dict[int, object] = {}  # id of a value, node or graph -> its specialisation (sharing kept)

    def node(self, n: Node) -> Node:
        return self._once(n, lambda: Node(n.name, n.op, tuple(map(self.value, n.inputs)),
                                          tuple(map(self.value, n.outputs)), self.attr(n.attrs)))

    def value(self, v: Value) -> Value:
        def make():
            shape = tuple(evaluate(d, self.values) if isinstance(d, E.Expr) else d for d in v.shape)
            data = self.attr(v.data) if is_symbolic_array(v.data) else v.data
            return dataclasses.replace(v, type=TensorType(shape, v.dtype), data=data)

        return self._once(v, make)

    def graph(self, g: Graph) -> Graph:
        return self._once(g, lambda: Graph(tuple(map(self.value, g.inputs)), tuple(map(self.value, g.outputs)),
                                           tuple(map(self.node, g.nodes))))

    def attr(self, a):
        if isinstance(a, E.Expr):
            return evaluate(a, self.values)
        if isinstance(a, Value):
            return self.value(a)
        if isinstance(a, Node):
            return self.node(a)
        if isinstance(a, Graph):
            return self.graph(a)
        if is_symbolic_array(a):
            return np.array([self.attr(x) for x in a.reshape(-1)], np.int64).reshape(a.shape)
        if isinstance(a, dict):
            return {k: self.attr(x) for k, x in a.items()}
        if isinstance(a, tuple) and hasattr(a, "_fields"):  # a NamedTuple
            return type(a)(*(self.attr(x) for x in a))
        if isinstance(a, (tuple, list)):
            return type(a)(self.attr(x) for x in a)
        return a

    def _once(self, key, make):
        made = self.made.get(id(key))
        if made is None:
            made = self.made[id(key)] = make()
        return made
