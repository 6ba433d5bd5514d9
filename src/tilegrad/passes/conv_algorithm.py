"""Kernel algorithms for constant-weight convolutions and matrix products, with their weights laid out ahead of
time.

The frontend emits plain `conv`, `matmul` and `gemm`; this pass decides how they run. A 2-D, ungrouped float32
`conv` with a constant weight becomes the channel-blocked direct convolution (`blocked_conv`, weights packed in
blocks of CONV_BLOCK output channels); a `matmul` or `gemm` with a constant 2-D float32 right operand becomes the
panel GEMM (`panel_matmul`, the operand packed in panels of MATMUL_PANEL columns, A's leading axes flattened into
rows). Packing runs the pack op's NumPy reference here, so the packed weight is a constant of the graph and no
kernel repacks it per call. At opt_level 0 the pass does not run and the plain ops are compiled as they are.
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Node, Value
from ..ir.registry import lookup
from .editor import GraphEditor, map_nodes
from .pipeline import PassContext, register

CONV_BLOCK = 16  # output channels per block of a packed convolution: two AVX2 vectors, one AVX-512 vector
MATMUL_PANEL = 16  # columns per panel of a packed constant matmul operand


def _packed(ed: GraphEditor, pack_op: str, w: Value, name: str, **attrs) -> Value:
    """The constant `pack_op(w)`, computed now by the pack op's reference."""
    return ed.const(np.asarray(lookup(pack_op).reference(w.data, **attrs)), name)


def _blocked_conv(ed: GraphEditor, node: Node) -> Value | None:
    x, w, *bias = ed.inputs_of(node)
    a = node.attrs
    if len(x.shape) != 4 or a["group"] != 1 or not w.is_constant or x.dtype != "float32":
        return None
    wpack = _packed(ed, "conv_weight_pack", w, f"{node.name}_wpack", block=CONV_BLOCK)
    return ed.op("blocked_conv", x, wpack, *bias, name=node.name, out_channels=w.shape[0], strides=a["strides"],
                 pads=a["pads"], dilations=a["dilations"])


def _packable(a: Value, w: Value) -> bool:
    return w.is_constant and len(w.shape) == 2 and len(a.shape) >= 2 and a.dtype == w.dtype == "float32"


def _panel_matmul(ed: GraphEditor, node: Node, a: Value, w: Value, bias: tuple[Value, ...], *, transpose_b=0,
                  alpha=1.0, beta=1.0) -> Value:
    """A @ W with W packed into column panels, A's leading axes flattened into rows and restored after."""
    n = w.shape[0] if transpose_b else w.shape[1]
    wpack = _packed(ed, "matmul_weight_pack", w, f"{node.name}_wpack", transpose=int(transpose_b), nr=MATMUL_PANEL)
    lead = a.shape[:-1]
    rows = a if len(a.shape) == 2 else ed.op("reshape", a, name=f"{node.name}_rows", shape=(-1, a.shape[-1]))
    out = ed.op("panel_matmul", rows, wpack, *bias, name=node.name, n=n, alpha=float(alpha), beta=float(beta))
    return out if len(a.shape) == 2 else ed.op("reshape", out, name=f"{node.name}_unrows", shape=(*lead, n))


def _matmul(ed: GraphEditor, node: Node) -> Value | None:
    a, w = ed.inputs_of(node)
    return _panel_matmul(ed, node, a, w, ()) if _packable(a, w) else None


def _gemm(ed: GraphEditor, node: Node) -> Value | None:
    a, w, *c = ed.inputs_of(node)
    attrs = node.attrs
    n = w.shape[0] if attrs["trans_b"] else w.shape[1]
    bias_fits = not c or c[0].shape in ((n,), (1, n), (1,), ())
    if not _packable(a, w) or attrs["trans_a"] or not bias_fits:
        return None
    return _panel_matmul(ed, node, a, w, tuple(c), transpose_b=attrs["trans_b"], alpha=attrs["alpha"],
                         beta=attrs["beta"])


_REWRITES = {"conv": _blocked_conv, "matmul": _matmul, "gemm": _gemm}


@register("conv_algorithm", level=1, order=80)
def conv_algorithm(g, ctx: PassContext):
    """Choose each constant-weight conv's and matmul's kernel algorithm and lay its weights out ahead of time."""
    changed = []

    def rewrite(ed: GraphEditor, node: Node):
        choose = _REWRITES.get(node.op)
        new = choose(ed, node) if choose else None
        changed.append(new is not None)
        return new

    out = map_nodes(g, rewrite)
    return out if any(changed) else g
