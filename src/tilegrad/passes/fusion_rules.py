"""What a fused kernel can be: the one definition of a buildable group, read by both fusion strategies.

The rule-based pass (`fuse.py`) grows groups greedily and asks these facts merge by merge; the stitching explorer
(`stitch.py`) proposes whole patterns and asks `refusal` about each. A pattern is buildable when the fused-kernel
lowering (`ir/ops/fused.py` composing the members' computes, `schedule/defaults.py` scheduling them) gives a kernel
that neither recomputes a reduction nor writes more than one value (but for a normalised product's pre-norm
value, below):
- one value leaves the kernel (read outside or returned), and it is the last member's;
- an opaque op stands alone;
- at most one conv or matmul (out-fusable), nothing of the pattern above it, and only element-wise ops of its
  output's shape downstream of it (the epilogue computed on its register tile; a residual's producers are free;
  the element type may change: an int8 product's dequantize -> bias or residual add -> quantize);
- or, for a product that declares whole output rows (`rows`: the packed GEMM), its epilogue (element-wise ops and
  views over whole rows of N columns) followed by a row-wise normalisation: reductions over the last axis alone
  and what follows them on the same rows (layer norm, RMS norm, softmax over N). The kernel computes a block of
  whole rows of the product into a local buffer and normalises them there (`schedule/rules_row_epilogue.py`);
  one value of the epilogue may then leave the kernel too, as its second output (a pre-norm residual sum read
  again later), if it has the output's shape (the two share the row blocks);
- a reduction read inside the pattern works row by row (its op declares `rows`), and everything downstream of it
  keeps the same rows, so the default schedule computes it once per row block and reuses it (a sub-root);
- no path leaves the pattern and re-enters it (the kernel would have to run both before and after the outside op);
- at most MAX_FUSED_DEPTH ops in a chain and MAX_FUSED_SIZE ops in the output's expression, reads counted;
- no overlap-add (OVERLAP_ADDS) under a transpose that moves its last axis (`transposes_an_overlap_add`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..ir.graph import Graph, Node, Value
from ..ir.registry import BROADCAST, ELEMWISE, INJECTIVE, OPAQUE, OUT_FUSABLE, REDUCTION, TensorType, lookup

POINTWISE = (ELEMWISE, BROADCAST)
OVERLAP_ADDS = {"col2im"}  # ops whose every output element sums several runs of their input's last axis
OVERLAP_RUN = 8  # the shortest such run worth a kernel of its own: an AVX2 vector (DCGAN's 3-channel image is not)
HORIZONTAL_MAX_ELEMENTS = 1 << 12  # outputs up to this size are small enough that a kernel call dominates
MAX_FUSED_DEPTH = 32  # the longest chain of ops in one group
MAX_FUSED_SIZE = 512  # the most ops in the expression of one node's output, each read of a producer counted


def fusion_kind(n: Node) -> str:
    """The node's kind for fusion: INJECTIVE (element-wise, broadcast, injective), OUT_FUSABLE, REDUCTION or
    OPAQUE."""
    kind = lookup(n.op).kind
    return INJECTIVE if kind in (ELEMWISE, BROADCAST, INJECTIVE) else kind


def row_shape(node: Node) -> tuple[int, ...] | None:
    """The leading axes a row-wise node keeps (its op's declared `rows`), or None."""
    rows = lookup(node.op).rows
    return None if rows is None else rows(node.inputs[0].shape if node.inputs else (), **node.attrs)


def fits_rows(v: Value, rows: tuple[int, ...]) -> bool:
    return v.shape[:len(rows)] == rows


class GraphIndex:
    """Producers and consumers of a graph's values by node position, for the walks fusion makes."""

    def __init__(self, g: Graph):
        self.g = g
        self.producer = {id(v): i for i, n in enumerate(g.nodes) for v in n.outputs}
        self.consumers: dict[int, list[int]] = {}
        for i, n in enumerate(g.nodes):
            for v in n.inputs:
                self.consumers.setdefault(id(v), []).append(i)
        self.graph_outputs = {id(v) for v in g.outputs}

    def producers_of(self, i: int) -> list[int]:
        """Positions of the nodes node i reads, once each, in order."""
        return list(dict.fromkeys(self.producer[id(v)] for v in self.g.nodes[i].inputs if id(v) in self.producer))

    def readers_of(self, i: int) -> list[int]:
        """Positions of the nodes reading node i's outputs, once each, ascending."""
        return sorted({c for v in self.g.nodes[i].outputs for c in self.consumers.get(id(v), [])})

    def escaping(self, members: Iterable[int]) -> list[Value]:
        """The values of the nodes `members` that are read outside them or returned by the graph, in order."""
        inside = set(members)
        return [v for i in sorted(inside) for v in self.g.nodes[i].outputs
                if id(v) in self.graph_outputs or any(c not in inside for c in self.consumers.get(id(v), []))]

    def reenters(self, members: frozenset[int]) -> bool:
        """Whether some path leaves `members` and comes back into them (nodes after the last member cannot lead
        back, so the walk stops there)."""
        last = max(members)
        stack = [c for i in members for c in self.readers_of(i) if c not in members]
        seen: set[int] = set()
        while stack:
            i = stack.pop()
            if i in seen or i > last:
                continue
            seen.add(i)
            for c in self.readers_of(i):
                if c in members:
                    return True
                stack.append(c)
        return False


def refusal(ix: GraphIndex, members: frozenset[int]) -> str | None:
    """Why the nodes `members` cannot be one fused kernel, naming the node and op; None when they can."""
    if len(members) == 1:
        return None
    nodes = {i: ix.g.nodes[i] for i in sorted(members)}
    kinds = {i: fusion_kind(n) for i, n in nodes.items()}
    for i, kind in kinds.items():
        if kind == OPAQUE:
            return f"{_name(nodes[i])} is opaque and stands alone"
    if ix.reenters(members):
        return "a path leaves the pattern and re-enters it (cyclic)"
    anchors = [i for i, kind in kinds.items() if kind == OUT_FUSABLE]
    epilogue, normalised = _product_regions(ix, nodes, kinds, anchors[0]) if anchors else (set(), set())
    out = ix.escaping(members)
    last = max(members)
    leaks = [v for v in out if ix.producer[id(v)] != last]
    if len(leaks) == len(out) or leaks and not (normalised and len(leaks) == 1 and ix.producer[id(leaks[0])]
                                                in epilogue and leaks[0].shape == out[-1].shape):
        names = ", ".join(f"{v.name!r}" for v in leaks)
        return f"{names or 'no value'} would leave the kernel besides the output of {_name(nodes[last])}"
    if anchors:
        reason = _epilogue_refusal(ix, nodes, anchors, epilogue, normalised)
        if reason:
            return reason
    reason = _row_refusal(ix, nodes, kinds)
    if reason:
        return reason
    moved = next((n for n in nodes.values() if transposes_an_overlap_add(ix.g, ix.consumers, nodes.values(), n)),
                 None)
    if moved is not None:
        return f"{_name(moved)} moves the last axis of an overlap-add in the pattern"
    return _size_refusal(ix, nodes)


def transposes_an_overlap_add(g: Graph, consumers: dict[int, list[int]], members: Iterable[Node], n: Node) -> bool:
    """Whether `n` is a transpose that moves the last axis (a run of at least OVERLAP_RUN) of an overlap-add among
    `members` (a group it would join) for good: the element-wise ops and transposes that alone read it after
    (`consumers`: value id -> reader positions in `g`) do not move it back. Fused, the kernel's loops then run in
    the moved order, and the overlap-add's runs of its last axis, vectors on their own, are read one element at a
    time; apart, each kernel runs in its own order (docs/benchmarks.md, "Machine F, thirty-ninth session"). Moved
    back (a chain of transposed convolutions with a batch norm in NCHW between them), the fused kernel's loops
    keep the run innermost."""
    members = list(members)
    if n.op != "transpose" or not any(m.op in OVERLAP_ADDS for m in members):  # (col2im's shapes are static)
        return False
    if not _reads_an_overlap_add(n, members) or n.inputs[0].shape[-1] < OVERLAP_RUN:
        return False
    rank = len(n.inputs[0].shape)
    axis = _moved(n, rank - 1)  # where the run's axis is in n's output
    v = n.outputs[0]
    while len(consumers.get(id(v), [])) == 1 and id(v) not in {id(o) for o in g.outputs}:
        reader = g.nodes[consumers[id(v)][0]]
        if reader.op == "transpose":
            axis = _moved(reader, axis)
        elif not (fusion_kind(reader) == INJECTIVE and lookup(reader.op).kind in POINTWISE
                  and reader.outputs[0].shape == v.shape):
            break
        v = reader.outputs[0]
    return axis != len(v.shape) - 1


def _reads_an_overlap_add(n: Node, members: Iterable[Node]) -> bool:
    """Whether `n` reads an overlap-add among `members` through element-wise ops of its shape alone, so that its
    input's last axis is the overlap-add's run."""
    made_by = {id(o): m for m in members for o in m.outputs}
    v = n.inputs[0]
    while id(v) in made_by:
        p = made_by[id(v)]
        if p.op in OVERLAP_ADDS:
            return True
        same = [i for i in p.inputs if i.shape == v.shape]
        if lookup(p.op).kind not in POINTWISE or not same:
            return False
        v = same[0]
    return False


def _moved(n: Node, axis: int) -> int:
    """Where transpose `n` puts its input's `axis`."""
    rank = len(n.inputs[0].shape)
    perm = n.attrs.get("perm")
    perm = list(reversed(range(rank))) if perm is None else list(perm)
    return perm.index(axis)


def _product_regions(ix: GraphIndex, nodes: dict[int, Node], kinds: dict[int, str],
                     first: int) -> tuple[set[int], set[int]]:
    """The product `first` with its epilogue (the members downstream of it that read no reduction), and its
    normalisation (the reductions reading the epilogue and the members downstream of them)."""
    epilogue, normalised = {first}, set()
    for i in nodes:  # ascending: producers first
        inner = [p for p in ix.producers_of(i) if p in nodes]
        if i == first or not any(p in epilogue or p in normalised for p in inner):
            continue
        if kinds[i] == REDUCTION or any(p in normalised for p in inner):
            normalised.add(i)
        else:
            epilogue.add(i)
    return epilogue, normalised


def _epilogue_refusal(ix: GraphIndex, nodes: dict[int, Node], anchors: list[int], epilogue: set[int],
                      normalised: set[int]) -> str | None:
    first = anchors[0]
    if len(anchors) > 1:
        return f"{_name(nodes[anchors[1]])} is a second conv/matmul after {_name(nodes[first])}"
    if any(p in nodes for p in ix.producers_of(first)):
        return f"nothing fuses into {_name(nodes[first])} from above (its input would be recomputed per tap)"
    if normalised:
        return _normalisation_refusal(ix, nodes, first, epilogue, normalised)
    anchor_shape = nodes[first].outputs[0].shape
    for i in sorted(epilogue - {first}):  # the other operands' producers (a residual) are free
        n = nodes[i]
        if lookup(n.op).kind not in POINTWISE or any(o.shape != anchor_shape for o in n.outputs):
            return f"{_name(n)} is not an element-wise epilogue of {_name(nodes[first])}'s shape"
    return None


def _normalisation_refusal(ix: GraphIndex, nodes: dict[int, Node], first: int, epilogue: set[int],
                           normalised: set[int]) -> str | None:
    """A product followed by a row-wise normalisation must give whole rows: the product declares them, its
    epilogue keeps them (element-wise ops and views with the product's elements and N columns), the reductions
    reduce the N columns alone, and the kernel's output is whole rows (its rows are then `_row_refusal`'s)."""
    anchor = nodes[first]
    if row_shape(anchor) is None or len(anchor.outputs[0].shape) != 2:
        return (f"{_name(nodes[min(normalised)])} normalises rows of {_name(anchor)}, which does not give whole "
                f"rows of a 2-D product")
    whole = anchor.outputs[0].type
    for i in sorted(epilogue - {first}):
        n = nodes[i]
        op = lookup(n.op)
        if not (op.kind in POINTWISE or op.view) or not all(_whole_rows(o, whole) for o in n.outputs):
            return f"{_name(n)} is not an element-wise epilogue of {_name(anchor)}'s rows"
    for i in sorted(normalised):
        n = nodes[i]
        if fusion_kind(n) == REDUCTION and any(p in epilogue for p in ix.producers_of(i)) and (
                not _whole_rows(n.inputs[0], whole) or row_shape(n) != n.inputs[0].shape[:-1]):
            return (f"{_name(n)} does not reduce the {whole.shape[1]} columns of {_name(anchor)}'s rows alone, "
                    f"so a block of whole rows cannot hold what it reads")
    last = nodes[max(nodes)]
    if max(nodes) not in normalised or not all(_whole_rows(o, whole) for o in last.outputs):
        return f"{_name(last)} does not give whole rows of {_name(anchor)}'s output, which the row blocks write"
    return None


def _whole_rows(v: Value, product: TensorType) -> bool:
    """Whether `v` holds the product's elements as rows of its N columns (any leading shape)."""
    return v.type.dtype == product.dtype and v.shape[-1:] == product.shape[-1:] and \
        math.prod(v.shape) == math.prod(product.shape)


def _row_refusal(ix: GraphIndex, nodes: dict[int, Node], kinds: dict[int, str]) -> str | None:
    """A reduction read inside the pattern must be a sub-root: row-wise, every op downstream of it on its rows."""
    rows: tuple[int, ...] | None = None
    downstream: set[int] = set()
    for i, n in nodes.items():  # ascending: producers first
        upstream = [p for p in ix.producers_of(i) if p in nodes and (p in downstream or kinds[p] == REDUCTION)]
        if not upstream:
            continue
        downstream.add(i)
        for p in upstream:
            if kinds[p] == REDUCTION:
                r = row_shape(nodes[p])
                if r is None:
                    return (f"{_name(nodes[p])} reduces whole rows away; reading it from {_name(n)} would "
                            f"recompute it per element")
                if rows is not None and r != rows:
                    return f"{_name(nodes[p])} works on rows {r}, another reduction here on {rows}"
                rows = r
        if kinds[i] == REDUCTION and row_shape(n) != rows:
            return f"{_name(n)} reduces other rows than the reduction it reads ({rows})"
        if kinds[i] != REDUCTION and lookup(n.op).kind not in POINTWISE:
            return f"{_name(n)} is not element-wise, so it cannot follow a reduction in one row loop"
        if not all(fits_rows(o, rows) for o in n.outputs):
            return f"{_name(n)} does not keep the rows {rows}"
    return None


def _size_refusal(ix: GraphIndex, nodes: dict[int, Node]) -> str | None:
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    for i, n in nodes.items():
        inner = [ix.producer[id(v)] for v in n.inputs if ix.producer.get(id(v)) in nodes]
        depth[i] = 1 + max((depth[p] for p in inner), default=0)
        size[i] = 1 + sum(size[p] for p in inner)
        if depth[i] > MAX_FUSED_DEPTH:
            return f"the chain ending at {_name(n)} is longer than {MAX_FUSED_DEPTH} ops"
        if size[i] > MAX_FUSED_SIZE:
            return f"the expression of {_name(n)} has more than {MAX_FUSED_SIZE} ops (reads counted)"
    return None


def _name(n: Node) -> str:
    return f"{n.name!r} ({n.op})"
