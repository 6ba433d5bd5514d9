"""Rewriting a graph node by node: the one tool every pass uses to build its output graph.

A `GraphEditor` walks the nodes of a graph in order. For each node a pass either keeps it (`keep`, which
re-emits it over the substituted inputs), or emits new nodes (`op`, type-checked as they are added) and maps the
old outputs onto new values (`replace`). `finish` drops what nothing reads any more, keeps the graph outputs'
names, and verifies the result.
"""

from __future__ import annotations

import dataclasses

from ..ir.graph import Graph, GraphBuilder, Node, Value, rename_values


class GraphEditor(GraphBuilder):
    """A GraphBuilder seeded with a graph's inputs, whose names it keeps reserved."""

    def __init__(self, g: Graph):
        super().__init__()
        self.graph = g
        self._inputs = list(g.inputs)
        self._subst: dict[int, Value] = {}
        for v in g.inputs:
            self._fresh(v.name)
        for n in g.nodes:
            self._fresh(n.name)
            for v in n.outputs + n.inputs:
                self._fresh(v.name)

    @property
    def nodes(self) -> list[Node]:
        """The nodes emitted so far, in order."""
        return self._nodes

    def get(self, v: Value) -> Value:
        """What `v` of the old graph is in the new one."""
        return self._subst.get(id(v), v)

    def inputs_of(self, node: Node) -> tuple[Value, ...]:
        return tuple(self.get(v) for v in node.inputs)

    def replace(self, old: Value, new: Value) -> None:
        if old.type != new.type:
            raise ValueError(f"replacing {old.name!r} ({old.type}) by {new.name!r} ({new.type}) changes its type")
        self._subst[id(old)] = new

    def keep(self, node: Node) -> Node:
        """Re-emit `node` unchanged but for its (substituted) inputs."""
        inputs = self.inputs_of(node)
        kept = node if inputs == node.inputs else dataclasses.replace(node, inputs=inputs)
        self._nodes.append(kept)
        return kept

    def add_node(self, node: Node) -> None:
        """Append a node built elsewhere (its output names must be fresh)."""
        self._nodes.append(node)

    def finish(self) -> Graph:
        outputs = list(self.get(v) for v in self.graph.outputs)
        renamed: dict[int, Value] = {}
        for k, (old, new) in enumerate(zip(self.graph.outputs, outputs)):
            if new is old or new.name == old.name:
                continue
            if any(new is v for v in self.graph.inputs) or id(new) in renamed or new.is_constant:
                # an input, a constant or another output's value: a copy keeps this output's own name
                copy = Value(old.name, new.type)
                self._nodes.append(Node(old.name, "identity", (new,), (copy,), {}))
                outputs[k] = copy
            else:
                renamed[id(new)] = dataclasses.replace(new, name=old.name)
        nodes = _live(self._nodes, tuple(outputs))
        if renamed:
            nodes = [rename_values(n, renamed) for n in nodes]
        outputs = tuple(renamed.get(id(v), v) for v in outputs)
        g = Graph(self.graph.inputs, outputs, tuple(nodes))
        g.verify()
        return g


def _live(nodes: list[Node], outputs: tuple[Value, ...]) -> list[Node]:
    """The nodes some output depends on, in their order (dead-code elimination)."""
    needed = {id(v) for v in outputs}
    keep = []
    for n in reversed(nodes):
        if any(id(v) in needed for v in n.outputs):
            keep.append(n)
            needed.update(id(v) for v in n.inputs)
    return keep[::-1]


def map_nodes(g: Graph, rewrite) -> Graph:
    """Rebuild `g`, calling `rewrite(editor, node)` on each node: it returns the node's new outputs (a Value or a
    tuple of them) or None to keep the node as it is."""
    ed = GraphEditor(g)
    for node in g.nodes:
        new = rewrite(ed, node)
        if new is None:
            ed.keep(node)
            continue
        news = new if isinstance(new, tuple) else (new,)
        for old, v in zip(node.outputs, news):
            ed.replace(old, v)
    return ed.finish()
