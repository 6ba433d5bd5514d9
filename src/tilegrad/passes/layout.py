"""Alter the layout of convolution chains to NCHW[x]c (TVM's alter-op-layout), x being the vector width.

After `conv_algorithm`, each constant-weight convolution is a `blocked_conv` that computes its output in blocks of
channels and copies it out to NCHW, and a depthwise `conv` reads NCHW with strided vectors. Kept blocked from one
layer to the next (ir/ops/layout.py), activations need no copy-out, and depthwise convolutions and pools vectorise
across a block of channels. This pass:

1. plans, in graph order, which nodes run blocked: the seeds are `blocked_conv` (a grouped one where its groups
   line up with the node's block; groups of k in and k out inside one vector as `lane_group_conv_nchwc`, whose
   k rotations waste no multiply-add: te/nn/lane_groups.py), `winograd_conv` (as `winograd_conv_nchwc`, which
   reads either layout) and
   depthwise `conv` (groups = C = O) with constant weights; the layout then
   flows to element-wise and broadcasting ops of a blocked input (their other operands being constants, re-laid
   out here, or NCHW values of the same channels), to max, average and global average pooling, and to a concat
   along channels whose parts are all whole blocks;
2. rewrites them, repacking the weights and biases once, and inserts the transforms only where an NCHW value meets
   a blocked consumer (`layout_to_blocked`) or a blocked value an NCHW consumer or a graph output
   (`layout_from_blocked`). Each value gets at most one transform each way (per block), and a value that is
   already blocked is never unblocked for a blocked consumer, so no from/to pair is ever adjacent. A convolution
   at the start of a chain reads its NCHW input directly (not `lane_group_conv_nchwc`: its lanes are channels).

Each node has a block size. `ctx.options["layout_block"]` is one block for the whole graph, or a dict from
convolution name (the imported `conv`'s) to its block (tune/algorithms.py varies them; the others take the
default, the target's vector lanes). A `blocked_conv` or `winograd_conv` takes its own block; a depthwise
convolution, pool, element-wise op or concat takes the block of its first blocked input (a depthwise convolution
named in the dict, its own). A convolution reads a blocked input of any block, so a chain goes on through blocks
of different sizes; an op whose blocked input has another block than its own reads it through `layout_reblock`,
one copy (once per value and block).

Lanes past the last channel are not kept zero by every op; the convolutions' packed weights are zero there, so
such lanes never reach a real channel. With channels that are not whole blocks the layout flows only through
element-wise ops declared `finite` (a 0 * inf would poison the sum).
"""

from __future__ import annotations

import numpy as np

from ..errors import TilegradError
from ..ir.graph import Graph, Node, Value
from ..ir.ops.layout import block_array
from ..ir.registry import BROADCAST, ELEMWISE, lookup
from ..target import Target
from ..te.dims import representative
from ..te.nn.conv_groups import BlockGroups
from ..te.nn.lane_groups import lane_group_size, pack_lane_groups
from .editor import GraphEditor
from .context import PassContext

POOLS = {"max_pool": "max_pool_nchwc", "avg_pool": "avg_pool_nchwc", "global_avg_pool": "global_avg_pool_nchwc"}
BLOCKED_OPS = {"blocked_conv": "conv_nchwc", "winograd_conv": "winograd_conv_nchwc", "conv": "depthwise_conv_nchwc",
               **POOLS}  # the rest keep their op
CONVOLUTIONS = ("blocked_conv", "winograd_conv")  # the seeds that set their output's block
BLOCK_VECTORS = (1, 2)  # the block sizes offered to tuning, in vectors of the target


def block_sizes(target: Target) -> tuple[int, ...]:
    """The channel blocks tuning tries, the default (one vector) first."""
    return tuple(k * target.vector_lanes for k in BLOCK_VECTORS)


def layout(g: Graph, ctx: PassContext) -> Graph:
    """Keep chains of convolutions in the blocked channel layout NCHW[x]c, transforming only at their ends."""
    default, named = _requested_blocks(g, ctx)
    planned = _plan(g, default, named)
    chains = [c for c in planned_chains(g, planned) if _worth_blocking(c, ctx.target)]
    if not chains:
        return g
    return _Rewrite(g, chains, planned, ctx).run()


def _requested_blocks(g: Graph, ctx: PassContext) -> tuple[int, dict[str, int]]:
    """The default block, and the blocks asked for by convolution name (the name of the imported `conv`, which
    `conv_algorithm` may have renamed) keyed by the name of the node that now runs it, checked."""
    option = ctx.options.get("layout_block")
    asked = dict(option) if isinstance(option, dict) else {}
    default = int(option) if option and not asked else ctx.target.vector_lanes
    renamed = {name: c.node for name, c in ctx.decisions.get("conv_algorithm", {}).items()}
    named = {renamed.get(name, name): block for name, block in asked.items()}
    unknown = sorted(name for name, node in zip(asked, named) if node not in {n.name for n in g.nodes})
    if unknown:
        raise TilegradError(f"layout_block names convolutions the graph lacks: {', '.join(unknown)}")
    for name, block in asked.items():
        if not isinstance(block, int) or block < 1:
            raise TilegradError(f"layout_block for convolution {name!r} must be a positive int, got {block!r}")
    return default, named


def _plan(g: Graph, default: int, named: dict[str, int]) -> dict[int, int]:
    """The ids of the nodes that can run blocked, each with its block."""
    blocks: dict[int, int] = {}  # id of each value that will be blocked -> its block
    planned: dict[int, int] = {}
    for node in g.nodes:
        inherited = next((blocks[id(v)] for v in node.inputs if id(v) in blocks), None)
        if _is_seed(node):
            own = node.op in CONVOLUTIONS or node.name in named
            block = named.get(node.name, default) if own or inherited is None else inherited
            if _groups(node, block) is False:
                continue
        elif inherited is not None and _follows(node, blocks, inherited):
            block = inherited
        else:
            continue
        planned[id(node)] = blocks[id(node.outputs[0])] = block
    return planned


def planned_chains(g: Graph, planned: dict[int, int]) -> list[list[Node]]:
    """The planned nodes grouped into chains: sets connected by the blocked values between them."""
    parent: dict[int, int] = {}

    def root(i: int) -> int:
        while parent.setdefault(i, i) != i:
            i = parent[i]
        return i

    producer = g.producers()
    for node in g.nodes:
        if id(node) in planned:
            for v in node.inputs:
                p = producer.get(id(v))
                if p is not None and id(p) in planned:
                    parent[root(id(node))] = root(id(p))
    chains: dict[int, list[Node]] = {}
    for node in g.nodes:
        if id(node) in planned:
            chains.setdefault(root(id(node)), []).append(node)
    return list(chains.values())


def _worth_blocking(chain: list[Node], target: Target) -> bool:
    """A lone `blocked_conv` or `winograd_conv` already reads and writes NCHW in the same kernel; blocking it alone
    would mostly add a copy of its output. Two convolutions, or a pool, gain; and so does a lone dilated or grouped
    direct convolution, whose NCHW form runs well below its blocked one, where a lone dense one loses a little to
    the copy (docs/benchmarks.md, "Machine A, twenty-second session"). A lone depthwise convolution (ConvNeXt's,
    between a residual sum and a permute) gains only where its rows are short: on rows of at least two vectors
    its NCHW form runs as fast as the blocked one without the two copies, each a pass over the image
    (docs/benchmarks.md, "Machine F, thirty-fifth session")."""
    heavy = [n for n in chain if n.op in BLOCKED_OPS]
    if len(heavy) > 1:
        return True
    if heavy[0].op == "conv":
        return representative(heavy[0].outputs[0].shape[3]) < 2 * target.vector_lanes
    return heavy[0].op not in CONVOLUTIONS or _dilated_or_grouped(heavy[0])


def _dilated_or_grouped(node: Node) -> bool:
    a = node.attrs
    return node.op == "blocked_conv" and (any(d > 1 for d in a.get("dilations") or ()) or a.get("group", 1) > 1)


def _is_seed(node: Node) -> bool:
    """A 2-D float32 convolution with constant weights (and bias): blocked_conv, winograd_conv, or a depthwise
    conv."""
    if node.op not in ("conv", *CONVOLUTIONS):
        return False
    x, w, *bias = node.inputs
    if len(x.shape) != 4 or x.dtype != "float32" or not all(v.is_constant for v in (w, *bias)):
        return False
    group = node.attrs.get("group", 1)
    return node.op in CONVOLUTIONS or (group > 1 and group == x.shape[1] == w.shape[0] and w.shape[1] == 1)


def _groups(node: Node, block: int) -> BlockGroups | None | bool:
    """A grouped `blocked_conv`'s blocking in blocks of `block`, reading its input in the same blocks; None for
    any other node; False where the groups do not line up with those blocks."""
    if node.op != "blocked_conv" or node.attrs["group"] == 1:
        return None
    groups = BlockGroups.of(node.inputs[0].shape[1], node.attrs["out_channels"], node.attrs["group"], block)
    return groups if groups is not None and groups.reads_whole_blocks(block) else False


def _follows(node: Node, blocked: dict[int, int], block: int) -> bool:
    """Whether `node` can run blocked given which of its inputs are: at least one is, and the rest can be."""
    if len(node.outputs) != 1 or not any(id(v) in blocked for v in node.inputs):
        return False
    out = node.outputs[0]
    if len(out.shape) != 4 or any(len(v.shape) != 4 for v in node.inputs if id(v) in blocked):
        return False
    if node.op in POOLS:
        return True
    if node.op == "concat":
        return (node.attrs["axis"] % 4 == 1 and all(len(v.shape) == 4 and v.shape[1] % block == 0
                                                    for v in node.inputs))
    if lookup(node.op).kind not in (ELEMWISE, BROADCAST):
        return False
    channels = out.shape[1]
    if channels % block and not lookup(node.op).finite:
        return False
    return all(v.is_constant or (len(v.shape) == 4 and v.shape[1] == channels) for v in node.inputs)


class _Rewrite:
    """Emits the planned nodes blocked and the rest as they were, with the transforms between them."""

    def __init__(self, g: Graph, chains: list[list[Node]], planned: dict[int, int], ctx: PassContext):
        self.g, self.chains, self.planned, self.ctx = g, chains, planned, ctx
        self.chain_of = {id(n): i for i, chain in enumerate(chains) for n in chain}
        self.ends: list[list[str]] = [[] for _ in chains]  # per chain, the transforms inserted for it
        self.ed = GraphEditor(g)
        self.blocked: dict[int, Value] = {}  # id(old value) -> its blocked form
        self.copies: dict[tuple[int, int], Value] = {}  # (id(old value), block) -> its copy in that block
        self.unblocked: set[int] = set()  # ids of old blocked values given an NCHW form

    def run(self) -> Graph:
        producer = self.g.producers()
        for node in self.g.nodes:
            if id(node) in self.chain_of:
                new = self.blocked[id(node.outputs[0])] = self._convert(node)
                self.ctx.decisions.setdefault("layout", {})[node.name] = new.name  # the blocked node that runs it
            else:
                for v in node.inputs:
                    self._unblock(v, producer, f"for {node.name} ({node.op})")
                self.ed.keep(node)
        for v in self.g.outputs:
            self._unblock(v, producer, "for the graph output")
        for nodes, ends in zip(self.chains, self.ends):
            new_ops = [BLOCKED_OPS.get(n.op, n.op) for n in nodes]
            ops = ", ".join(f"{new_ops.count(op)} {op}" for op in dict.fromkeys(new_ops))
            blocks = "+".join(f"{b}c" for b in sorted({self.planned[id(n)] for n in nodes}))
            self.ctx.note(f"NCHW{blocks} chain {nodes[0].name} .. {nodes[-1].name} ({ops}): "
                          f"{'; '.join(ends) or 'no transforms'}")
        return self.ed.finish()

    # ---- the transforms ----

    def _unblock(self, v: Value, producer: dict, why: str) -> None:
        """Give blocked `v` its NCHW form (once) for a consumer that needs NCHW. A value a chain produces needs a
        transform; an NCHW value that was only given a blocked copy for a chain keeps its own form."""
        if id(v) not in self.blocked or id(v) in self.unblocked or id(producer.get(id(v))) not in self.chain_of:
            return
        self.unblocked.add(id(v))
        nchw = self.ed.op("layout_from_blocked", self.blocked[id(v)], name=f"{v.name}_nchw", channels=v.shape[1])
        self.ed.replace(v, nchw)
        self.ends[self.chain_of[id(producer[id(v)])]].append(f"from_blocked({v.name}) {why}")

    def _to_blocked(self, v: Value, consumer: Node) -> Value:
        """`v` in the consumer's block: its blocked form, a re-laid out constant, or a transform (once per block)."""
        block = self.planned[id(consumer)]
        own = self.blocked.get(id(v))
        if own is not None and own.shape[4] == block:
            return own
        if (id(v), block) in self.copies:
            return self.copies[id(v), block]
        suffix = f"b{block}" if any(i == id(v) for i, _ in self.copies) else "blocked"  # the first is "_blocked"
        if v.is_constant:
            out = self.ed.const(_relayout_constant(v.data, block), f"{v.name}_{suffix}")
        elif own is not None:
            out = self.ed.op("layout_reblock", own, name=f"{v.name}_b{block}", block=block, channels=v.shape[1])
            self.ends[self.chain_of[id(consumer)]].append(f"reblock({v.name}, {own.shape[4]} -> {block}) "
                                                          f"for {consumer.name}")
        else:
            out = self.ed.op("layout_to_blocked", self.ed.get(v), name=f"{v.name}_{suffix}", block=block)
            self.blocked.setdefault(id(v), out)
            self.ends[self.chain_of[id(consumer)]].append(f"to_blocked({v.name}) for {consumer.name}")
        self.copies[id(v), block] = out
        return out

    # ---- the blocked ops ----

    def _convert(self, node: Node) -> Value:
        ed, b = self.ed, self.planned[id(node)]
        if node.op == "blocked_conv" and node.attrs["group"] != 1:
            return self._grouped_conv(node)
        if node.op == "blocked_conv":
            x, wpack, *bias = node.inputs
            a = node.attrs
            source = self.blocked[id(x)] if id(x) in self.blocked else ed.get(x)  # NCHW at a chain's start
            weight = unpack_conv_weight(wpack.data, a["out_channels"])
            in_lanes = source.shape[1] * source.shape[4] if len(source.shape) == 5 else x.shape[1]
            packed = ed.const(_pack_conv_weight(weight, b, in_lanes), f"{node.name}_wnchwc")
            return ed.op("conv_nchwc", source, packed, *self._bias(bias, node), name=node.name,
                         strides=a["strides"], pads=a["pads"], dilations=a["dilations"])
        if node.op == "winograd_conv":
            x, u, *bias = node.inputs
            source = self.blocked[id(x)] if id(x) in self.blocked else ed.get(x)  # NCHW at a chain's start
            return ed.op("winograd_conv_nchwc", source, u, *self._bias(bias, node), name=node.name, block=b,
                         **node.attrs)
        if node.op == "conv":
            x, w, *bias = node.inputs
            a = node.attrs
            packed = ed.const(_pack_depthwise_weight(w.data, b), f"{node.name}_wnchwc")
            return ed.op("depthwise_conv_nchwc", self._to_blocked(x, node), packed, *self._bias(bias, node),
                         name=node.name, strides=a["strides"], pads=a["pads"], dilations=a["dilations"])
        if node.op in POOLS:
            return ed.op(POOLS[node.op], self._to_blocked(node.inputs[0], node), name=node.name, **node.attrs)
        if node.op == "concat":
            return ed.op("concat", *(self._to_blocked(v, node) for v in node.inputs), name=node.name, axis=1)
        return ed.op(node.op, *(self._to_blocked(v, node) for v in node.inputs), name=node.name, **node.attrs)

    def _grouped_conv(self, node: Node) -> Value:
        """A grouped `blocked_conv` in the node's block, reading its input in that block (or NCHW at a chain's
        start), its weights repacked for those blocks."""
        x, wpack, *bias = node.inputs
        a = node.attrs
        block = self.planned[id(node)]
        groups = _groups(node, block)
        weight = BlockGroups.of(x.shape[1], a["out_channels"], a["group"], wpack.shape[4]).unpack(wpack.data)
        if lane_group_size(x.shape[1], a["out_channels"], a["group"], block):
            packed = self.ed.const(pack_lane_groups(weight, block), f"{node.name}_wlanes")
            return self.ed.op("lane_group_conv_nchwc", self._to_blocked(x, node), packed, *self._bias(bias, node),
                              name=node.name, strides=a["strides"], pads=a["pads"], dilations=a["dilations"])
        source = self._to_blocked(x, node) if id(x) in self.blocked else self.ed.get(x)
        packed = self.ed.const(groups.pack(weight), f"{node.name}_wnchwc")
        return self.ed.op("conv_nchwc", source, packed, *self._bias(bias, node), name=node.name, strides=a["strides"],
                          pads=a["pads"], dilations=a["dilations"],
                          group_channels=[groups.in_per_group, groups.out_per_group])

    def _bias(self, bias: list[Value], node: Node) -> tuple[Value, ...]:
        """A constant bias (C,) packed as (C / b, b), zero in the padded channels."""
        if not bias:
            return ()
        (v,) = bias
        block = self.planned[id(node)]
        lanes = -(-v.shape[0] // block) * block
        padded = np.zeros(lanes, v.dtype)
        padded[:v.shape[0]] = v.data
        return (self.ed.const(padded.reshape(-1, block), f"{node.name}_bnchwc"),)


def _relayout_constant(data: np.ndarray, block: int) -> np.ndarray:
    """A constant operand of a blocked element-wise op: right-aligned to NCHW, then blocked along its channel axis
    (lanes past the channels repeat the last channel, so they stay finite), or given a unit block axis when it
    does not vary by channel; a scalar stays as it is."""
    if data.ndim == 0:
        return data
    nchw = data.reshape((1,) * (4 - data.ndim) + data.shape)
    if nchw.shape[1] == 1:
        return nchw.reshape(*nchw.shape, 1)
    extra = -nchw.shape[1] % block
    padded = np.pad(nchw, ((0, 0), (0, extra), (0, 0), (0, 0)), mode="edge") if extra else nchw
    return block_array(padded, block)


def unpack_conv_weight(wpack: np.ndarray, out_channels: int) -> np.ndarray:
    """`conv_weight_pack`'s (O / b, C, KH, KW, b) back to OIHW."""
    blocks, channels, kh, kw, block = wpack.shape
    return wpack.transpose(0, 4, 1, 2, 3).reshape(blocks * block, channels, kh, kw)[:out_channels]


def _pack_conv_weight(weight: np.ndarray, block: int, in_lanes: int) -> np.ndarray:
    """OIHW as (O / block, in_lanes, KH, KW, block), zero in the padded output and input channels."""
    out_channels, channels, kh, kw = weight.shape
    blocks = -(-out_channels // block)
    padded = np.zeros((blocks * block, in_lanes, kh, kw), weight.dtype)
    padded[:out_channels, :channels] = weight
    return np.ascontiguousarray(padded.reshape(blocks, block, in_lanes, kh, kw).transpose(0, 2, 3, 4, 1))


def _pack_depthwise_weight(weight: np.ndarray, block: int) -> np.ndarray:
    """(C, 1, KH, KW) as (C / block, KH, KW, block), zero in the padded channels."""
    channels, _, kh, kw = weight.shape
    blocks = -(-channels // block)
    padded = np.zeros((blocks * block, kh, kw), weight.dtype)
    padded[:channels] = weight[:, 0]
    return np.ascontiguousarray(padded.reshape(blocks, block, kh, kw).transpose(0, 2, 3, 1))
