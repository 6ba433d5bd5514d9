"""Channels-last (NHWC) activations for chains of quantized convolutions (ONNX Runtime's NHWC transformer of its
QLinear ops is the anchor).

The int8 convolution is a GEMM whose rows are output pixels and whose k groups are 4 neighbouring channels of one
tap (te/nn/quantized.py). On NCHW activations each one transposes its input into a channels-last copy and its
output back, byte by byte, and a depthwise one reads its windows one channel at a time. Kept channels-last from
one layer to the next, the GEMM reads its input in place and writes its rows as they are, and the depthwise
convolution vectorises across channels. This pass:

1. plans, in graph order, which nodes run channels-last: the seeds are `quantized_im2col_conv` and the depthwise
   `quantized_conv2d` (group = C = O; its taps grouped for the dot product where the target can, `groups_taps`);
   the layout then flows to element-wise and broadcasting ops of a channels-last input (a residual's dequantize,
   add and quantize) whose other operands are constants or channels-last too;
2. rewrites them with layout "NHWC" (a quantize or dequantize with a per-channel axis gets the axis's new place,
   a broadcast constant is transposed once here) and transposes only where an NCHW value meets a channels-last
   consumer or a channels-last value an NCHW consumer or a graph output, once per value.

A chain of a single convolution stays NCHW: its kernel transposes either way, and a transform before and after it
would only add two kernels. Except a GEMM convolution over channels that are not whole groups of 4, as ResNet-50's
RGB stem before its max pool: on NCHW it gathers its windows byte by byte, channels-last it reads them in place,
which pays for its two transforms (docs/quantization.md).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.ops.quant import pack_conv_weight_numpy, unpack_conv_weight
from ..ir.registry import BROADCAST, ELEMWISE, lookup
from ..target import Target
from ..te.nn.quantized import DOT_GROUP, group_channels
from .context import PassContext
from .editor import GraphEditor
from .layout import planned_chains

TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
AXIS_IN_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # an NCHW axis's place in NHWC
PER_CHANNEL = ("quantize_linear", "dequantize_linear")  # their scale and zero point lie along `axis`


def int8_layout(g: Graph, ctx: PassContext) -> Graph:
    """Run chains of quantized convolutions channels-last, transposing only at their ends."""
    planned = _plan(g)
    chains = [c for c in planned_chains(g, planned) if _worth_nhwc(c)]
    if not chains:
        return g
    return _Rewrite(g, chains, ctx).run()


def _worth_nhwc(chain: list[Node]) -> bool:
    """Two convolutions gain (module docstring); so does a lone GEMM convolution over channels that are not whole
    groups of 4 (an RGB stem): on NCHW it gathers its windows byte by byte into a packed copy, channels-last it
    reads them in place from a padded copy with the channels rounded up (`whole_groups`)."""
    seeds = [n for n in chain if _is_seed(n)]
    return len(seeds) > 1 or (seeds[0].op == "quantized_im2col_conv" and seeds[0].inputs[0].shape[1] % DOT_GROUP != 0)


def _plan(g: Graph) -> dict[int, int]:
    """The ids of the nodes that can run channels-last (the values are unused: `planned_chains` takes a dict)."""
    nhwc: set[int] = set()  # ids of the values that will be channels-last
    planned: dict[int, int] = {}
    for node in g.nodes:
        if _is_seed(node) or _follows(node, nhwc):
            planned[id(node)] = 1
            nhwc.add(id(node.outputs[0]))
    return planned


def _is_seed(node: Node) -> bool:
    """A 4-D quantized convolution the channels-last kernels run: the int8 GEMM, or a depthwise one."""
    if node.op == "quantized_im2col_conv":
        return len(node.inputs[0].shape) == 4
    if node.op != "quantized_conv2d":
        return False
    x, w = node.inputs[:2]
    return len(x.shape) == 4 and node.attrs["group"] == x.shape[1] == w.shape[0] and w.shape[1] == 1


def _follows(node: Node, nhwc: set[int]) -> bool:
    """An element-wise or broadcasting op of 4-D output with a channels-last input, whose other inputs are
    constants or channels-last too."""
    if len(node.outputs) != 1 or len(node.outputs[0].shape) != 4 or lookup(node.op).kind not in (ELEMWISE, BROADCAST):
        return False
    if not any(id(v) in nhwc for v in node.inputs):
        return False
    return all(id(v) in nhwc or v.is_constant for v in node.inputs)


class _Rewrite:
    """Emits the planned nodes channels-last and the rest as they were, with the transposes between them."""

    def __init__(self, g: Graph, chains: list[list[Node]], ctx: PassContext):
        self.g, self.ctx = g, ctx
        self.chain_of = {id(n): i for i, chain in enumerate(chains) for n in chain}
        self.chains = chains
        self.ed = GraphEditor(g)
        self.nhwc: dict[int, Value] = {}  # id(old value) -> its channels-last form
        self.back: set[int] = set()  # ids of old channels-last values given an NCHW form
        self.ends: list[list[str]] = [[] for _ in chains]

    def run(self) -> Graph:
        producer = self.g.producers()
        for node in self.g.nodes:
            if id(node) in self.chain_of:
                self.nhwc[id(node.outputs[0])] = self._convert(node)
            else:
                for v in node.inputs:
                    self._to_nchw(v, producer, f"for {node.name} ({node.op})")
                self.ed.keep(node)
        for v in self.g.outputs:
            self._to_nchw(v, producer, "for the graph output")
        for nodes, ends in zip(self.chains, self.ends):
            convs = sum(_is_seed(n) for n in nodes)
            self.ctx.note(f"NHWC int8 chain {nodes[0].name} .. {nodes[-1].name} ({convs} convolutions, "
                          f"{len(nodes) - convs} other): {'; '.join(ends) or 'no transforms'}")
        return self.ed.finish()

    def _to_nchw(self, v: Value, producer: dict, why: str) -> None:
        """Give channels-last `v` its NCHW form (once) for a consumer that needs NCHW. An NCHW value that was only
        given a channels-last copy for a chain keeps its own form."""
        if id(v) not in self.nhwc or id(v) in self.back or id(producer.get(id(v))) not in self.chain_of:
            return
        self.back.add(id(v))
        nchw = self.ed.op("transpose", self.nhwc[id(v)], name=f"{v.name}_nchw", perm=list(TO_NCHW))
        self.ed.replace(v, nchw)
        self.ends[self.chain_of[id(producer[id(v)])]].append(f"to NCHW({v.name}) {why}")

    def _to_nhwc(self, v: Value, consumer: Node) -> Value:
        """`v` channels-last: its planned form, a transposed constant, or a transpose (once per value)."""
        if id(v) in self.nhwc:
            return self.nhwc[id(v)]
        if v.is_constant:
            data = v.data.reshape((1,) * (4 - v.data.ndim) + v.data.shape) if v.data.ndim else v.data
            out = self.ed.const(np.ascontiguousarray(data.transpose(TO_NHWC)) if data.ndim else data,
                                f"{v.name}_nhwc")
        else:
            out = self.ed.op("transpose", self.ed.get(v), name=f"{v.name}_nhwc", perm=list(TO_NHWC))
            self.ends[self.chain_of[id(consumer)]].append(f"to NHWC({v.name}) for {consumer.name}")
        self.nhwc[id(v)] = out
        return out

    def _convert(self, node: Node) -> Value:
        ed = self.ed
        if _is_seed(node):
            x, *rest = node.inputs
            attrs = {**node.attrs, "layout": "NHWC"}
            if node.op == "quantized_im2col_conv" and x.shape[1] % DOT_GROUP:
                rest[0] = ed.const(_whole_group_weights(rest[0].data, node), f"{node.name}_wgroups")
                attrs["whole_groups"] = True
            if node.op == "quantized_conv2d" and groups_taps(self.ctx.target):
                attrs["taps_grouped"] = True
            return ed.op(node.op, self._to_nhwc(x, node), *(ed.get(v) for v in rest), name=node.name, **attrs)
        if node.op in PER_CHANNEL:
            x, *params = node.inputs
            axis = AXIS_IN_NHWC[node.attrs["axis"] % 4]
            return ed.op(node.op, self._to_nhwc(x, node), *(ed.get(v) for v in params), name=node.name,
                         **{**node.attrs, "axis": axis})
        return ed.op(node.op, *(self._to_nhwc(v, node) for v in node.inputs), name=node.name, **node.attrs)


def groups_taps(target: Target) -> bool:
    """Whether a channels-last depthwise convolution sums its taps in groups of 4 (te.nn.quantized's
    `_grouped_taps`): where one byte permute (AVX-512 VBMI) and vpdpbusd (AVX-512 VNNI) do a group of 16
    channels; elsewhere each tap's bytes are widened and multiplied as before."""
    return target.int8_dot == "avx512_vnni" and "avx512vbmi" in target.flags


def _whole_group_weights(wpack: np.ndarray, node: Node) -> np.ndarray:
    """A convolution's packed weights repacked over its channels rounded up to whole dot groups, zero past them
    (`whole_groups`): the kernel then reads every k group in place, where 3 channels (an RGB stem) made it gather
    each byte into a packed copy."""
    out_channels, kernel = node.attrs["out_channels"], node.attrs["kernel_shape"]
    channels = node.inputs[0].shape[1]
    w = unpack_conv_weight(wpack, out_channels, channels, kernel)
    padded = np.zeros((out_channels, group_channels(channels), *kernel), w.dtype)
    padded[:, :channels] = w
    return pack_conv_weight_numpy(padded)
