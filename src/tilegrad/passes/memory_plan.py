"""The static memory plan of a compiled graph: where each intermediate value lives in one workspace.

Intermediate values share workspace blocks: a view (reshape) is its input's memory; an element-wise kernel
writes over an input it reads for the last time (in place); otherwise a value takes the first free block that
fits (lifetime-based first fit). A reshape into a graph output lets its producer write the output directly.
Sizes are exact integers; `check_fits` refuses a graph whose buffers cannot exist on this machine before any
kernel is built.
"""

from __future__ import annotations

import dataclasses
import math
import os

from ..dtype import itemsize
from ..errors import MemoryLimitError
from ..ir.graph import Graph, Node, Value
from ..ir.registry import BROADCAST, ELEMWISE, lookup
from ..te.dims import upper_shape

ALIGN = 64


def nbytes(v: Value) -> int:
    """The bytes of `v`, exactly (a Python integer: no product of dimensions wraps around), at its dynamic
    dimensions' upper bounds: the memory plan holds the largest call."""
    return math.prod(upper_shape(v.shape)) * itemsize(v.dtype)


@dataclasses.dataclass
class MemoryPlan:
    offsets: dict[int, int]  # id(value) -> byte offset in the workspace
    views: dict[int, Value]  # id(value) -> the value whose memory it is (a reshape needs no copy)
    workspace_bytes: int
    unshared_bytes: int  # what the intermediates would take without reuse
    in_outputs: dict = dataclasses.field(default_factory=dict)  # id(value) -> the graph output it is written as
    elided: frozenset = frozenset()  # id(node) of those reshapes into a graph output: no kernel

    def kernel_nodes(self, g: Graph) -> list[Node]:
        """The nodes that run a kernel: all but the views."""
        return [n for n in g.nodes
                if id(n) not in self.elided and not any(id(v) in self.views for v in n.outputs)]


def plan_memory(g: Graph, intermediates: list[Value]) -> MemoryPlan:
    """Intermediate values share workspace blocks: a view (reshape) is its input's memory; an element-wise
    kernel writes over an input it reads for the last time (in place); otherwise a value takes the first free
    block that fits (first fit by lifetime: a block is free once the last reader of every value in it has run)."""
    outputs = {id(v) for v in g.outputs}
    in_outputs, elided = _output_views(g)
    views: dict[int, Value] = {}
    wanted = {id(v) for v in intermediates} - set(in_outputs)
    intermediates = [v for v in intermediates if id(v) in wanted]
    for n in g.nodes:
        v = n.inputs[0] if n.inputs else None
        if lookup(n.op).view and id(n.outputs[0]) not in outputs and v is not None:
            views[id(n.outputs[0])] = views.get(id(v), v)
    block_of = {vid: vid for vid in wanted}  # id(value) -> a value in the same block (follow to the owner)
    for vid, root in views.items():
        if vid in wanted:
            block_of[vid] = id(root) if id(root) in wanted else None

    def owner(vid: int) -> int | None:
        while vid is not None and block_of[vid] != vid:
            vid = block_of[vid]
        return vid

    last_use: dict[int, int] = {}
    for t, n in enumerate(g.nodes):
        for v in n.inputs:
            if id(v) in block_of and owner(id(v)) is not None:
                last_use[owner(id(v))] = t
    sizes = {id(v): _padded(v) for v in intermediates}
    for t, n in enumerate(g.nodes):  # in place: the output takes over an input block whose last reader this is
        out = n.outputs[0]
        if len(n.outputs) != 1 or id(out) not in wanted or id(out) in views or not _in_place_ok(n):
            continue
        for v in n.inputs:
            blk = owner(id(v)) if id(v) in block_of else None
            if blk is not None and v.type == out.type and last_use.get(blk) == t and sizes[blk] >= sizes[id(out)]:
                block_of[id(out)] = blk
                last_use[blk] = last_use.pop(id(out), t)
                break
    defined = {}
    for t, n in enumerate(g.nodes):
        for v in n.outputs:
            if block_of.get(id(v)) == id(v):
                defined[id(v)] = t
    free: list[tuple[int, int]] = []  # (offset, size)
    live: list[tuple[int, int, int]] = []  # (last use, offset, size)
    block_offset: dict[int, int] = {}
    top = 0
    for t in range(len(g.nodes)):
        for _, off, size in [x for x in live if x[0] < t]:
            free.append((off, size))
        live = [x for x in live if x[0] >= t]
        for blk in [b for b, d in defined.items() if d == t]:
            size = sizes[blk]
            slot = next((i for i, (_, s) in enumerate(free) if s >= size), None)
            if slot is None:
                off, top = top, top + size
            else:
                off, s = free.pop(slot)
                if s > size:
                    free.append((off + size, s - size))
            block_offset[blk] = off
            live.append((last_use.get(blk, t), off, size))
    offsets = {vid: block_offset[owner(vid)] for vid in block_of if owner(vid) is not None}
    return MemoryPlan(offsets, views, top, sum(sizes.values()), in_outputs, frozenset(elided))


def _output_views(g: Graph) -> tuple[dict[int, Value], set[int]]:
    """A reshape whose output is a graph output, of a value only it reads: the producer writes the graph output's
    buffer directly (seen as that shape) and the reshape runs no kernel."""
    outputs = [id(v) for v in g.outputs]
    producers = g.producers()
    consumers = g.consumers()
    views, elided = {}, set()
    for n in g.nodes:
        v = n.inputs[0] if n.inputs else None
        if (lookup(n.op).view and v is not None and outputs.count(id(n.outputs[0])) == 1 and id(v) not in outputs
                and id(v) in producers and not lookup(producers[id(v)].op).view and len(consumers[id(v)]) == 1):
            views[id(v)] = n.outputs[0]
            elided.add(id(n))
    return views, elided


def intermediates_of(g: Graph) -> list[Value]:
    """The values the workspace holds: node outputs that are not graph outputs."""
    graph_io = {id(v) for v in g.inputs} | {id(v) for v in g.outputs} | {id(w) for w in g.constants}
    return [v for n in g.nodes for v in n.outputs if id(v) not in graph_io]


def kernel_count(g: Graph) -> int:
    """How many kernels the compiled graph runs (views run none)."""
    return len(plan_memory(g, intermediates_of(g)).kernel_nodes(g))


def _padded(v: Value) -> int:
    return -(-nbytes(v) // ALIGN) * ALIGN


def _in_place_ok(n: Node) -> bool:
    """Whether each output element depends only on the same element of its full-shape inputs, so the output
    may overwrite one of them: element-wise ops, and fused groups of them."""
    if n.op == "fused":
        return all(lookup(m.op).kind in (ELEMWISE, BROADCAST) for m in n.attrs["body"].nodes)
    return lookup(n.op).kind in (ELEMWISE, BROADCAST)


def check_fits(g: Graph, plan: MemoryPlan, limit: int | None = None) -> None:
    """Raise MemoryLimitError if a tensor of `g`, or its weights, inputs, outputs and workspace together, need
    more than `limit` bytes (default: this machine's physical memory), so a model too large to run (or whose
    sizes overflow 64-bit indices) is refused at compile time instead of writing out of bounds at run time."""
    limit = _physical_memory() if limit is None else limit
    values = [*g.inputs, *g.outputs, *g.constants, *_node_values(g.nodes)]
    largest = max(values, key=nbytes, default=None)
    if largest is not None and nbytes(largest) > limit:
        raise MemoryLimitError(f"value {largest.name!r} of shape {largest.shape} {largest.dtype} needs "
                               f"{_size(nbytes(largest))}, more than this machine's memory ({_size(limit)}); "
                               f"compile it with smaller input shapes")
    io = {id(v): v for v in [*g.inputs, *g.outputs, *g.constants]}
    total = plan.workspace_bytes + sum(nbytes(v) for v in io.values())
    if total > limit:
        raise MemoryLimitError(f"the model needs {_size(total)} (workspace {_size(plan.workspace_bytes)}, inputs, "
                               f"outputs and weights {_size(total - plan.workspace_bytes)}), more than this "
                               f"machine's memory ({_size(limit)}); compile it with smaller input shapes")


def _node_values(nodes) -> list[Value]:
    """Every value the nodes compute, those inside fused bodies included."""
    out = []
    for n in nodes:
        out += n.outputs
        if n.op == "fused":
            out += _node_values(n.attrs["body"].nodes)
    return out


def _physical_memory() -> int:
    """Bytes of physical memory; the largest 64-bit signed size where the system does not say."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    return total if 0 < total < 2**63 else 2**63 - 1


def _size(n: int) -> str:
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"
