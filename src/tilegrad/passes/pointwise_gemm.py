"""A 1 x 1 convolution left in NCHW with a short reduction runs as a GEMM whose rows are its output channels.

After `layout`, a `blocked_conv` still reads and writes NCHW (a lone convolution, which the layout pass leaves to
its own kernel): each register tile of its output, pixels by a block of channels, is copied out to NCHW, a
scattered store per element. Over a short reduction (few input channels: MobileNetV2's 16 -> 96 expansion on
112 x 112) those stores are about as many operations as the multiply-adds, and the kernel runs at under half
its peak. A 1 x 1 convolution in NCHW is already the product W (O x C) by X (C x pixels), whose rows are NCHW's
rows: as `im2col_conv` (its columns are the input itself) every store is a whole vector. Where the reduction
holds more than SHORT_REDUCTION_VECTORS vectors the direct kernel's register tile is worth its copy-out and it
stays; ResNet-50's 64 -> 256 (4 vectors with AVX-512) measured faster as the GEMM (docs/benchmarks.md,
"Machine F, thirty-ninth session"; slower in the thirty-fifth, before the kernels changed).
An algorithm the options ask for (`conv_algorithm`, tuning's choices) is left as it is.
"""

from __future__ import annotations

from ..ir.graph import Node
from .context import PassContext
from .conv_algorithm import emit
from .editor import GraphEditor, map_nodes
from .layout import unpack_conv_weight

SHORT_REDUCTION_VECTORS = 4  # input channels, in vectors, up to which the GEMM's whole-vector stores win


def pointwise_gemm(g, ctx: PassContext):
    """Each NCHW `blocked_conv` that is 1 x 1, unpadded and unstrided over a short reduction, as `im2col_conv`."""
    if ctx.options.get("conv_algorithm"):
        return g
    changed = []

    def rewrite(ed: GraphEditor, node: Node):
        if not _short_pointwise(node, ctx.target.vector_lanes):
            return None
        x, wpack, *bias = node.inputs
        weight = ed.const(unpack_conv_weight(wpack.data, node.attrs["out_channels"]), f"{node.name}_oihw")
        out = emit(ed, node, "im2col", ed.get(x), weight, [ed.get(b) for b in bias], ctx.target)
        ctx.note(f"{node.name}: a 1 x 1 convolution over {x.shape[1]} input channels in NCHW, as a GEMM of its "
                 f"output channels by the pixels (whole-vector stores)")
        changed.append(node.name)
        return out

    out = map_nodes(g, rewrite)
    if not changed:
        return g
    decisions = ctx.decisions.get("conv_algorithm", {})
    for name, choice in decisions.items():
        if choice.node in changed:
            decisions[name] = choice._replace(algorithm="im2col")
    return out


def _short_pointwise(node: Node, lanes: int) -> bool:
    if node.op != "blocked_conv" or len(node.inputs[0].shape) != 4 or not node.inputs[1].is_constant:
        return False
    a = node.attrs
    if a.get("group", 1) != 1:
        return False
    one = tuple(node.inputs[1].shape[2:4]) == (1, 1)
    plain = (all(s == 1 for s in a["strides"] or (1, 1)) and not any(a["pads"] or ())
             and all(d == 1 for d in a["dilations"] or (1, 1)))
    return one and plain and node.inputs[0].shape[1] <= SHORT_REDUCTION_VECTORS * lanes
