"""Rule-based operator fusion (TVM's op kinds): groups of nodes become one `fused` node, one kernel.

Nodes are visited in topological order; each tries to join the groups of its producers:
- injective chains (element-wise, broadcast, reshape, transpose, ...) fuse; the producers are inlined;
- a conv or matmul (out-fusable) takes element-wise epilogues of its output's shape (bias, residual add,
  activation; of any element type, so an int8 product's dequantize -> add -> quantize), computed on its register
  tile before the store; nothing fuses into it from above;
- a reduction takes its injective producers, and, when it reduces trailing axes, element-wise consumers and
  further reductions over the same rows (softmax, layer norm and their expanded forms become one kernel that runs
  row by row, as FusionStitching stitches memory-bound chains);
- opaque ops stand alone.
A merge that would make a cycle between groups (A -> B -> C with A -> C, B left out) is refused, and so is one that
would put a chain of more than MAX_FUSED_DEPTH ops in a group (the kernel's compute is one expression that deep,
and the walks over it recurse) or more than MAX_FUSED_SIZE ops in one output's expression, counting each read
(inlining copies a producer into each of its reads: a chain of `x * x` doubles at every step). A value read
outside its group must be the group's output; a group that ends up with an intermediate read from outside is
sealed there (it takes no more consumers) and fusion runs again. Finally small independent element-wise groups next to each other merge
horizontally into one kernel with several outputs (each saves a parallel region).

These rules are the fuse pass's "rules" strategy, the default; the pass option `fusion` = "stitch" runs the
stitching explorer (passes/stitch.py) instead. Both read what a kernel can be from passes/fusion_rules.py and
build their nodes with `emit_fused`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from ..errors import TilegradError
from ..ir.graph import Graph, Node, Value
from ..ir.registry import INJECTIVE, OPAQUE, OUT_FUSABLE, REDUCTION, lookup
from ..te.dims import upper_shape
from .editor import GraphEditor
from .fusion_rules import (HORIZONTAL_MAX_ELEMENTS, MAX_FUSED_DEPTH, MAX_FUSED_SIZE, POINTWISE, fits_rows,
                           fusion_kind, row_shape, transposes_an_overlap_add)
from .context import PassContext


@dataclasses.dataclass
class Group:
    nodes: list[int]  # positions in the graph, ascending
    kind: str  # INJECTIVE, OUT_FUSABLE, REDUCTION or OPAQUE
    rows: tuple[int, ...] | None = None  # a reduction group's row shape (None: no row stitching)


class _Fusion:
    def __init__(self, g: Graph, sealed: set[int]):
        self.g = g
        self.sealed = sealed  # positions of nodes whose group may not grow towards its consumers
        self.pos = {id(n): i for i, n in enumerate(g.nodes)}
        self.producer = {id(v): i for i, n in enumerate(g.nodes) for v in n.outputs}
        self.consumers: dict[int, list[int]] = {}
        for i, n in enumerate(g.nodes):
            for v in n.inputs:
                self.consumers.setdefault(id(v), []).append(i)
        self.graph_outputs = {id(v) for v in g.outputs}
        self.group_of: list[int] = list(range(len(g.nodes)))
        self.depth = [1] * len(g.nodes)  # the longest chain of ops in its group that ends at each node
        self.size = [1] * len(g.nodes)  # the ops of each node's expression within its group, reads counted
        self.groups: dict[int, Group] = {i: Group([i], fusion_kind(n)) for i, n in enumerate(g.nodes)}
        for i, n in enumerate(g.nodes):
            if self.groups[i].kind == REDUCTION:
                self.groups[i].rows = row_shape(n)

    def run(self) -> None:
        for i, n in enumerate(self.g.nodes):
            for v in n.inputs:
                p = self.producer.get(id(v))
                if p is None:
                    continue
                gp, gn = self.group_of[p], self.group_of[i]
                small = self.depth[p] < MAX_FUSED_DEPTH and self.size[i] + self.size[p] <= MAX_FUSED_SIZE
                if gp != gn and small and self._can_merge(gp, gn, n, v) and not self._would_cycle(gp, gn):
                    self._merge(gp, gn, n)
                if self.group_of[p] == self.group_of[i]:
                    self.depth[i] = max(self.depth[i], self.depth[p] + 1)
                    self.size[i] += self.size[p]

    # --- the rules -----------------------------------------------------------------------------------------

    def _single_reader(self, v: Value) -> bool:
        return id(v) not in self.graph_outputs and len(set(self.consumers.get(id(v), []))) == 1

    def _pointwise_readers(self, v: Value) -> bool:
        """Whether every reader of `v` is element-wise of v's shape (so all of them may join v's group)."""
        return all(lookup(self.g.nodes[c].op).kind in POINTWISE and self.g.nodes[c].outputs[0].shape == v.shape
                   for c in self.consumers.get(id(v), []))

    def _can_merge(self, gp: int, gn: int, n: Node, v: Value) -> bool:
        P, G = self.groups[gp], self.groups[gn]
        if any(i in self.sealed for i in P.nodes):
            return False
        P, G = self.groups[gp], self.groups[gn]
        nkind = lookup(n.op).kind
        if OPAQUE in (P.kind, G.kind) or nkind in (OUT_FUSABLE, OPAQUE):
            return False
        if P.kind == OUT_FUSABLE:  # an epilogue: element-wise ops of the anchor's shape (GELU reads it twice)
            return (nkind in POINTWISE and G.kind == INJECTIVE and id(v) not in self.graph_outputs
                    and all(o.shape == v.shape for o in n.outputs) and self._pointwise_readers(v))
        if P.kind == REDUCTION:
            if P.rows is None or not all(fits_rows(o, P.rows) for o in n.outputs):
                return False
            if nkind == REDUCTION:
                return row_shape(n) == P.rows and (G.kind != REDUCTION or G.rows == P.rows)
            return nkind in POINTWISE and (G.kind == INJECTIVE or G.rows == P.rows)
        # P is an injective group: it inlines into whatever reads it, if nothing else does.
        if not self._single_reader(v) or transposes_an_overlap_add(self.g, self.consumers,
                                                                   [self.g.nodes[i] for i in P.nodes], n):
            return False
        if G.kind == OUT_FUSABLE:
            return False
        return not (G.kind == REDUCTION and G.rows is not None and not all(fits_rows(o, G.rows) for o in n.outputs))

    def _would_cycle(self, gp: int, gn: int) -> bool:
        """Whether some path leaves group gp and enters group gn through another group."""
        last = max(self.groups[gn].nodes)
        stack = [self.group_of[c] for i in self.groups[gp].nodes for v in self.g.nodes[i].outputs
                 for c in self.consumers.get(id(v), [])]
        seen = {gp, gn}
        while stack:
            g = stack.pop()
            if g in seen:
                continue
            seen.add(g)
            group = self.groups[g]
            if min(group.nodes) > last:
                continue
            for i in group.nodes:
                for v in self.g.nodes[i].outputs:
                    for c in self.consumers.get(id(v), []):
                        if self.group_of[c] == gn:
                            return True
                        stack.append(self.group_of[c])
        return False

    def _merge(self, gp: int, gn: int, n: Node) -> None:
        P, G = self.groups.pop(gp), self.groups[gn]
        for i in P.nodes:
            self.group_of[i] = gn
        G.nodes = sorted(G.nodes + P.nodes)
        if P.kind == OUT_FUSABLE or G.kind == OUT_FUSABLE:
            G.kind = OUT_FUSABLE
        elif REDUCTION in (P.kind, G.kind):
            G.rows = G.rows if G.kind == REDUCTION else P.rows
            G.kind = REDUCTION

    # --- results -------------------------------------------------------------------------------------------

    def escaping(self, gid: int) -> list[Value]:
        """The values of a group read outside it (or returned by the graph), in order."""
        members = set(self.groups[gid].nodes)
        out = []
        for i in self.groups[gid].nodes:
            for v in self.g.nodes[i].outputs:
                if id(v) in self.graph_outputs or any(c not in members for c in self.consumers.get(id(v), [])):
                    out.append(v)
        return out

    def group_order(self) -> list[int]:
        """Groups in a topological order of the group graph (ties by first node)."""
        preds: dict[int, set[int]] = {gid: set() for gid in self.groups}
        for gid, grp in self.groups.items():
            for i in grp.nodes:
                for v in self.g.nodes[i].inputs:
                    p = self.producer.get(id(v))
                    if p is not None and self.group_of[p] != gid:
                        preds[gid].add(self.group_of[p])
        ready = sorted((min(self.groups[g].nodes), g) for g, ps in preds.items() if not ps)
        order, done = [], set()
        import heapq

        heapq.heapify(ready)
        succs: dict[int, list[int]] = {g: [] for g in self.groups}
        for g, ps in preds.items():
            for p in ps:
                succs[p].append(g)
        while ready:
            _, g = heapq.heappop(ready)
            order.append(g)
            done.add(g)
            for s in succs[g]:
                preds[s].discard(g)
                if not preds[s] and s not in done:
                    heapq.heappush(ready, (min(self.groups[s].nodes), s))
        if len(order) != len(self.groups):
            raise AssertionError("fusion made a cycle between groups")
        return order


def _horizontal(f: _Fusion, order: list[int]) -> list[list[int]]:
    """Adjacent small independent injective groups, batched into one kernel; other groups alone."""
    batches: list[list[int]] = []
    for gid in order:
        prev = batches[-1] if batches else None
        if prev is not None and _small(f, gid) and all(_small(f, p) for p in prev) \
                and not any(_reads(f, gid, p) for p in prev):
            prev.append(gid)
        else:
            batches.append([gid])
    return batches


def _small(f: _Fusion, gid: int) -> bool:
    """Whether group gid is an injective kernel whose outputs are small enough to batch. A group of views
    alone (a reshape) runs no kernel, and batched it would become a copy."""
    nodes = [f.g.nodes[i] for i in f.groups[gid].nodes]
    return f.groups[gid].kind == INJECTIVE and not all(lookup(n.op).view for n in nodes) and all(
        math.prod(upper_shape(v.shape)) <= HORIZONTAL_MAX_ELEMENTS for v in f.escaping(gid))


def _reads(f: _Fusion, gid: int, other: int) -> bool:
    """Whether group gid reads a value of group other (in topological order, the only possible dependence
    between neighbours)."""
    return any(f.group_of[f.producer[id(v)]] == other for i in f.groups[gid].nodes for v in f.g.nodes[i].inputs
               if id(v) in f.producer)


def _label(nodes: list[Node]) -> str:
    return "+".join(n.op for n in nodes)


# options["fusion"] -> the function that fuses: "rules" here, "stitch" the explorer (passes/stitch.py)
STRATEGIES: dict[str, Callable[[Graph, PassContext], Graph]] = {}


def strategy(name: str):
    """Register a fusion strategy, chosen by the pass option `fusion`."""
    def add(fn):
        STRATEGIES[name] = fn
        return fn
    return add


def fuse(g: Graph, ctx: PassContext) -> Graph:
    """Group nodes into fused kernels: by their ops' fusion kinds, or by the stitching explorer's best plan."""
    name = ctx.options.get("fusion", "rules")
    if name not in STRATEGIES:
        raise TilegradError(f"fusion strategy {name!r} is not known; choose one of {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name](g, ctx)


@strategy("rules")
def _fuse_by_rules(g: Graph, ctx: PassContext) -> Graph:
    sealed: set[int] = set()
    while True:
        f = _Fusion(g, sealed)
        f.run()
        leaks = {f.producer[id(v)] for gid in f.groups for v in f.escaping(gid)[:-1]}
        if not leaks:
            break
        sealed |= leaks
    order = f.group_order()
    batches = _horizontal(f, order) if ctx.options.get("horizontal_fusion", True) else [[g_] for g_ in order]
    ed = GraphEditor(g)
    for batch in batches:
        positions = sorted(i for gid in batch for i in f.groups[gid].nodes)
        nodes = [g.nodes[i] for i in positions]
        if len(nodes) == 1:
            ed.keep(nodes[0])
            continue
        outputs = [v for gid in batch for v in f.escaping(gid)]
        name = emit_fused(ed, nodes, outputs, len(batch))
        kind = "horizontal" if len(batch) > 1 else f.groups[batch[0]].kind
        ctx.note(f"{name} ({kind}): {_label(nodes)}")
    return ed.finish()


def emit_fused(ed: GraphEditor, nodes: list[Node], outputs: list[Value], parts: int) -> str:
    """Add the `fused` node running `nodes` (ascending, `parts` independent groups packed together) that gives
    `outputs`, route their readers to it, and return its name."""
    body = _body(nodes, outputs)
    root = nodes[-1].name if parts == 1 else f"{nodes[0].name}_h{parts}"
    new = ed.op("fused", *[ed.get(v) for v in body.inputs], name=ed._fresh(f"fused_{root}"), body=body)
    news = new if isinstance(new, tuple) else (new,)
    for old, v in zip(outputs, news):
        ed.replace(old, v)
    return ed.nodes[-1].name


def _body(nodes: list[Node], outputs: list[Value]) -> Graph:
    """The group as a graph over the values it reads from outside."""
    made = {id(v) for n in nodes for v in n.outputs}
    inputs: dict[int, Value] = {}
    for n in nodes:
        for v in n.inputs:
            if id(v) not in made:
                inputs.setdefault(id(v), v)
    return Graph(tuple(inputs.values()), tuple(outputs), tuple(nodes))
