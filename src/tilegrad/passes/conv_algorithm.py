"""Kernel algorithms for constant-weight convolutions and matrix products, with their weights laid out ahead of
time.

The frontend emits plain `conv`, `matmul` and `gemm`; this pass decides how they run, and lays each constant weight
out for the chosen kernel by running the layout op's NumPy reference here, so the laid-out weight is a constant of
the graph and no kernel repacks it per call. At opt_level 0 the pass does not run and the plain ops compile as
they are.

- A `matmul` or `gemm` with a constant 2-D float32 right operand becomes the panel GEMM (`panel_matmul`, the
  operand in panels of `matmul_panel(target, n)` columns, A's leading axes flattened into rows).
- A 2-D float32 `conv` with a constant weight, ungrouped, becomes one of the following (a 1-D one too, as a 2-D
  convolution of height 1 between two reshapes); grouped, where its groups line up with blocks of output
  channels (te/nn/conv_groups.py), "direct" with the weights of each block's groups packed together:
  "direct"    `blocked_conv`, the weights in blocks of CONV_BLOCK output channels;
  "im2col"    `im2col_conv`, im2col + GEMM, the weights as the GEMM's row panels;
  "winograd2" / "winograd4"  `winograd_conv` with F(2x2, 3x3) or F(4x4, 3x3), the weights transformed, in
              blocks of `winograd_block` output channels (3 x 3, stride 1, dilation 1 only).

The choice is the cheapest by an estimate in multiply-adds (`estimate_costs`): the direct convolution's
N*O*OH*OW*C*KH*KW, slowed by its register tile where it holds fewer than 4 columns (`row_tile`'s tile of at most 7,
the last one guarded where it does not divide the width) and by that tail's padding; the same for
im2col, slowed by a constant factor, plus building its columns; Winograd's (m + 2)^2 multiplies per tile over
ceil(OH/m) * ceil(OW/m) tiles per channel pair, plus the terms of its input and output transforms; and for each,
`weight_load` per weight element streamed from memory (Winograd's weights are (m + 2)^2 / 9 times larger, which is
what makes F(2, 3) beat F(4, 3) on the 512-channel 7 x 7 layer). The constants come from timings of the four
kernels on ResNet-50's 3 x 3 layers and a few other shapes (docs/benchmark-history.md, "Cost constants of the
conv_algorithm pass"), so Winograd is picked where it applies and the estimate says so (from about 16 channels up,
never for a three-channel first layer), and im2col only where the direct kernel's register tile is poor (a row of
one to three columns) and Winograd does not apply.

`ctx.options["conv_algorithm"]` overrides the choice: one of ALGORITHMS for every convolution where it applies
(the others keep the estimate's choice), or a dict from node name to one of them (a choice that does not apply
to that node is an error). Each convolution's choice and its estimates go to `ctx.note`, and the choice with the
algorithms that apply and the new node's name to `ctx.decisions["conv_algorithm"][node name]` (tune/algorithms.py
varies the choices).
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import NamedTuple

import numpy as np

from ..dtype import itemsize
from ..errors import ShapeError, TilegradError
from ..ir.graph import Derivation, Node, TensorType, Value
from ..mapped import release_pages
from ..ir.registry import lookup
from ..target import Target
from ..te.nn import im2col, winograd
from ..te.dims import representative
from ..te.nn.conv_groups import BlockGroups
from ..te.tiling import row_tile
from .context import PassContext
from .conv_phases import Phases, from_phases, phases_of, to_phases
from .editor import GraphEditor, map_nodes

CONV_BLOCK = 16  # output channels per block of a packed convolution: two AVX2 vectors, one AVX-512 vector
MATMUL_PANEL_VECTORS = 2  # vectors per panel of a packed constant matmul operand (and per GEMM register tile row)
INTEL_PANEL_VECTORS = 3  # on Intel's AVX-512 cores (`panel_vectors`)
PANEL_PADDING = 0.02  # the share of a product's columns that wider panels may add as padding
TALL_TILE_ROWS = 14  # the GEMM register tile's rows where the registers allow (AVX-512: 28 accumulators of 32)
TILE_STEP_LOAD = 0.5  # a GEMM tile step's load of its B panel row, in rows of FMAs
ALGORITHMS = ("direct", "im2col", "winograd2", "winograd4")

DIRECT_COLUMNS = 7  # the direct kernel's widest register tile: 7 output columns x 2 vectors (AVX2)
DIRECT_FULL_SPEED = 4  # register-tile columns from which the direct kernel keeps the FMA units busy
IM2COL_SLOWDOWN = 1.5  # im2col's GEMM against a well-tiled direct convolution
TRANSFORM = 2.0  # multiply-adds per term of a Winograd transform or element of im2col's columns
WEIGHT_LOAD_PER_LANE = 7.0 / 8  # per float32 lane of the vector: `weight_load`


class ConvChoice(NamedTuple):
    """A convolution's algorithm, the algorithms that apply to it, and the name of the node that runs it."""

    algorithm: str
    applicable: tuple[str, ...]
    node: str


def _packed(ed: GraphEditor, pack_op: str, w: Value, name: str, **attrs) -> Value:
    """The constant `pack_op(w)`, computed now by the pack op's reference, with that derivation noted."""
    op = lookup(pack_op)
    packed = ed.const(np.asarray(op.reference(w.data, **op.bind_attrs(attrs, name))), name)
    release_pages(w.data)  # a weight mapped from its file: its pages go until something reads it again
    return dataclasses.replace(packed, origin=Derivation(pack_op, w, attrs))


# ---- convolution ----

def _output_size(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    return (size + pad - dilation * (kernel - 1) - 1) // stride + 1


def _shape(x: Value, w: Value, attrs: dict):
    """The sizes the estimates read: a dynamic dimension at its representative value, where the kernels' schedules
    are chosen too."""
    n, c, h, wd = (representative(d) for d in x.shape)
    o, _, kh, kw = w.shape
    s, p, d = attrs["strides"] or (1, 1), attrs["pads"] or (0,) * 4, attrs["dilations"] or (1, 1)
    oh = _output_size(h, kh, s[0], p[0] + p[2], d[0])
    ow = _output_size(wd, kw, s[1], p[1] + p[3], d[1])
    return n, c, o, oh, ow, kh, kw


def _winograd_applies(w: Value, attrs: dict) -> str | None:
    """None where Winograd applies, else why not."""
    try:
        winograd.check_applicable(w.shape[2:], attrs["strides"] or (1, 1), attrs["dilations"] or (1, 1))
    except ShapeError as e:
        return str(e)
    return None


def _winograd_terms(m: int, matrix: str) -> int:
    """Terms per tile of a 2-D transform by `matrix` (BT for the input, AT for the output), computed as te.nn.winograd
    does, one side after the other: each of the alpha columns (then each of the rows that remain) costs the
    matrix's non-zeros."""
    nonzeros = sum(1 for row in winograd.matrices(m)[matrix] for v in row if v)
    alpha = m + 2
    return (alpha + (alpha if matrix == "BT" else m)) * nonzeros


def _winograd_form(x: Value, w: Value, attrs: dict) -> tuple[Value, dict, Phases | None] | None:
    """The input and attributes Winograd runs a convolution as, and its phases where it runs a dilated one
    undilated over them (passes/conv_phases.py); None where it applies to neither."""
    if _winograd_applies(w, attrs) is None:
        return x, attrs, None
    phases = phases_of(x.shape, attrs)
    undilated = {**attrs, "dilations": [1, 1], "pads": list(phases.pads)} if phases else None
    if phases is None or _winograd_applies(w, undilated) is not None:
        return None
    return Value(x.name, TensorType(phases.input_shape(x.shape), x.dtype)), undilated, phases


def _taps_inside(size: int, kernel: int, pad: int, dilation: int, out: int) -> float:
    """The share of a stride-1 kernel's taps along one axis that read inside the input, over its outputs."""
    inside = sum(0 <= o - pad + t * dilation < size for o in range(out) for t in range(kernel))
    return inside / (out * kernel)


def multiplies(x: Value, w: Value, attrs: dict) -> dict[str, int]:
    """The multiplications of each algorithm: the direct convolution's, and Winograd's GEMMs'. A dilated
    convolution's direct ones count only its taps inside the input: the blocked kernel skips the kernel rows
    that fall in the padding, and passes/conv_regions.py splits off the bands whose columns do where that pays."""
    n, c, o, oh, ow, kh, kw = _shape(x, w, attrs)
    out = {"direct": n * o * oh * ow * c * kh * kw}
    phases = phases_of(x.shape, attrs)
    if phases is not None:
        h, wd, p = x.shape[2], x.shape[3], attrs["pads"] or (0,) * 4
        out["direct"] = round(out["direct"] * _taps_inside(h, kh, p[0], phases.dilations[0], oh)
                              * _taps_inside(wd, kw, p[1], phases.dilations[1], ow))
    form = _winograd_form(x, w, attrs)
    if form is not None:
        n, c, o, oh, ow, _, _ = _shape(form[0], w, form[1])
        for m in (2, 4):
            out[f"winograd{m}"] = (m + 2) ** 2 * n * -(-oh // m) * -(-ow // m) * c * o
    return out


def weight_load(target: Target) -> float:
    """Multiply-adds that streaming one weight element from memory costs: 7 with AVX2 (fitted on ResNet-50's
    layers, above), as many more as the vector has lanes beyond 8. The bytes a core streams per second are about
    the same on these machines while an FMA does twice the work with AVX-512, so Winograd's four-times larger
    weights cost twice the FMAs there: with AVX2's constant an Intel Xeon ran F(4, 3) on ResNet-50's 14 x 14 layers
    and F(2, 3) on its 7 x 7 layers at a fraction of the direct kernel's rate (docs/benchmarks.md, machine E)."""
    return WEIGHT_LOAD_PER_LANE * target.vector_lanes


def estimate_costs(x: Value, w: Value, attrs: dict, target: Target) -> dict[str, float]:
    """Each applicable algorithm's estimated cost in multiply-adds (the module docstring gives the model)."""
    n, c, o, oh, ow, kh, kw = _shape(x, w, attrs)
    load = weight_load(target)
    macs = multiplies(x, w, attrs)
    columns = row_tile(ow, DIRECT_COLUMNS)
    slowdown = max(1.0, DIRECT_FULL_SPEED / columns) * -(-ow // columns) * columns / ow  # the tail tile's padding
    weights = o * c * kh * kw
    costs = {"direct": macs["direct"] * slowdown + load * weights}
    width = -(-ow // im2col.position_tile(ow)) * im2col.position_tile(ow)
    costs["im2col"] = (macs["direct"] * IM2COL_SLOWDOWN + TRANSFORM * n * oh * width * c * kh * kw
                       + load * weights)
    form = _winograd_form(x, w, attrs)
    if form is None:
        return costs
    xw, attrs_w, phases = form
    n, c, o, oh, ow, _, _ = _shape(xw, w, attrs_w)
    regroup = 0 if phases is None else TRANSFORM * n * (c * xw.shape[2] * xw.shape[3] + o * oh * ow)
    for m in (2, 4):
        th, tw = -(-oh // m), -(-ow // m)
        tiles = n * th * tw
        padded_input = n * c * (th * m + 2) * (tw * m + 2)
        transforms = _winograd_terms(m, "BT") * tiles * c + _winograd_terms(m, "AT") * tiles * o + padded_input
        costs[f"winograd{m}"] = (macs[f"winograd{m}"] + TRANSFORM * transforms + load * (m + 2) ** 2 * o * c
                                 + regroup)
    return costs


def _requested(node: Node, options: dict) -> tuple[str | None, bool]:
    """The algorithm the options ask for at `node` (or None), and whether it was asked for this node by name."""
    opt = options.get("conv_algorithm")
    if isinstance(opt, dict):
        choice, by_name = opt.get(node.name), True
    else:
        choice, by_name = opt, False
    if choice is not None and choice not in ALGORITHMS:
        raise TilegradError(f"conv_algorithm {choice!r} for node {node.name!r} is not one of {', '.join(ALGORITHMS)}")
    return choice, by_name


def choose(node: Node, x: Value, w: Value, options: dict, target: Target) -> tuple[str, dict[str, float], str]:
    """The algorithm for a convolution node, the estimates, and why it was chosen."""
    costs = estimate_costs(x, w, node.attrs, target)
    choice, by_name = _requested(node, options)
    if choice is not None and choice in costs:
        return choice, costs, "by option"
    if choice is not None and by_name:
        raise ShapeError(f"node {node.name!r}: conv_algorithm {choice!r} was requested, but "
                         f"{_winograd_applies(w, node.attrs)}")
    best = min(costs, key=costs.get)
    return best, costs, "cheapest estimate" if choice is None else f"cheapest estimate ({choice} does not apply)"


def _conv(ed: GraphEditor, node: Node, ctx: PassContext) -> Value | None:
    x, w, *bias = ed.inputs_of(node)
    if not w.is_constant or x.dtype != "float32" or len(x.shape) not in (3, 4):
        return None
    if node.attrs["group"] != 1 and not _blockable_groups(x, w, node.attrs["group"]):
        return None
    if len(x.shape) == 3:
        return _conv1d(ed, node, ctx, x, w, bias)
    return _conv2d(ed, node, ctx, x, w, bias)


def _conv1d(ed: GraphEditor, node: Node, ctx: PassContext, x: Value, w: Value, bias: list[Value]) -> Value:
    """A 1-D convolution as a 2-D one of height 1 (the input viewed as (N, C, 1, L), the weight as (O, C, 1, K)),
    so that it runs the 2-D kernels (Whisper's and wav2vec's front ends) rather than the generic convolution."""
    a = node.attrs
    (s,), (p0, p1), (d,) = a["strides"] or (1,), a["pads"] or (0, 0), a["dilations"] or (1,)
    (n, c, length), (o, per_group, k) = x.shape, w.shape
    rows = ed.op("reshape", x, name=f"{node.name}_rows", shape=(n, c, 1, length))
    w2 = ed.const(np.asarray(w.data).reshape(o, per_group, 1, k), f"{node.name}_w2d")
    attrs = {**a, "strides": [1, s], "pads": [0, p0, 0, p1], "dilations": [1, d]}
    out = _conv2d(ed, dataclasses.replace(node, attrs=attrs), ctx, rows, w2, bias)
    return ed.op("reshape", out, name=f"{node.name}_unrows", shape=(n, o, out.shape[3]))


def _blockable_groups(x: Value, w: Value, group: int) -> bool:
    """Whether a grouped convolution runs the blocked kernel: its groups line up with blocks of output channels,
    and a group has more than one input channel (a depthwise convolution has kernels of its own)."""
    return w.shape[1] > 1 and BlockGroups.of(x.shape[1], w.shape[0], group, CONV_BLOCK) is not None


def _grouped_conv2d(ed: GraphEditor, node: Node, ctx: PassContext, x: Value, w: Value, bias: list[Value]) -> Value:
    """A grouped convolution as the direct kernel in blocks (te/nn/conv_groups.py); no other algorithm applies."""
    choice, by_name = _requested(node, ctx.options)
    if by_name and choice not in (None, "direct"):
        raise ShapeError(f"node {node.name!r}: conv_algorithm {choice!r} was requested, but a grouped convolution "
                         f"runs direct")
    a = node.attrs
    groups = BlockGroups.of(x.shape[1], w.shape[0], a["group"], CONV_BLOCK)
    ctx.note(f"{node.name}: direct ({a['group']} groups in blocks of {CONV_BLOCK} output channels, each reading "
             f"{groups.span} input channels)")
    wpack = _packed(ed, "conv_weight_pack", w, f"{node.name}_w", block=CONV_BLOCK, group=a["group"])
    out = ed.op("blocked_conv", x, wpack, *bias, name=node.name, out_channels=w.shape[0], strides=a["strides"],
                pads=a["pads"], dilations=a["dilations"], group=a["group"])
    ctx.decisions.setdefault("conv_algorithm", {})[node.name] = ConvChoice("direct", ("direct",), out.name)
    return out


def _conv2d(ed: GraphEditor, node: Node, ctx: PassContext, x: Value, w: Value, bias: list[Value]) -> Value:
    a = node.attrs
    if a["group"] != 1:
        return _grouped_conv2d(ed, node, ctx, x, w, bias)
    algorithm, costs, why = choose(node, x, w, ctx.options, ctx.target)
    counts = ", ".join(f"{k} {_count(v)}" for k, v in multiplies(x, w, a).items())
    estimates = ", ".join(f"{k} {_count(v)}" for k, v in costs.items())
    ctx.note(f"{node.name}: {algorithm} ({why}); multiplies: {counts}; estimated multiply-adds: {estimates}")
    form = _winograd_form(x, w, a) if algorithm.startswith("winograd") else None
    if form is not None and form[2] is not None:
        _, undilated, phases = form
        kernel = emit(ed, dataclasses.replace(node, attrs=undilated), algorithm, to_phases(ed, x, phases, node.name),
                      w, bias, ctx.target)
        out = from_phases(ed, kernel, phases, node.outputs[0].shape, node.name)
    else:
        kernel = out = emit(ed, node, algorithm, x, w, bias, ctx.target)
    ctx.decisions.setdefault("conv_algorithm", {})[node.name] = ConvChoice(algorithm, tuple(costs), kernel.name)
    return out


def emit(ed: GraphEditor, node: Node, algorithm: str, x: Value, w: Value, bias: list[Value],
          target: Target) -> Value:
    """The convolution as `algorithm`'s op over its laid-out weights."""
    a = node.attrs
    o, name = w.shape[0], f"{node.name}_w"
    if algorithm == "direct":
        wpack = _packed(ed, "conv_weight_pack", w, name, block=CONV_BLOCK)
        return ed.op("blocked_conv", x, wpack, *bias, name=node.name, out_channels=o, strides=a["strides"],
                     pads=a["pads"], dilations=a["dilations"])
    if algorithm == "im2col":
        wmat = _packed(ed, "im2col_weight", w, name, mr=im2col.channel_tile(o, _shape(x, w, a)[4]))
        return ed.op("im2col_conv", x, wmat, *bias, name=node.name, out_channels=o, kernel_shape=w.shape[2:],
                     strides=a["strides"], pads=a["pads"], dilations=a["dilations"])
    m = int(algorithm[-1])
    u = _packed(ed, "winograd_weight", w, name, m=m, block=winograd_block(o, target))
    return ed.op("winograd_conv", x, u, *bias, name=node.name, m=m, pads=a["pads"], out_channels=o)


def winograd_block(out_channels: int, target: Target) -> int:
    """Output channels per block of Winograd's transformed weights, the width of its GEMM's register tile:
    MATMUL_PANEL_VECTORS vectors, as the panel GEMM's, where the channels fill them (32 with AVX-512, where one
    vector left a tile of at most 6 rows with fewer accumulators than the FMA latency needs), else CONV_BLOCK."""
    wide = MATMUL_PANEL_VECTORS * target.vector_lanes
    return max(wide, CONV_BLOCK) if out_channels >= wide else CONV_BLOCK


def _count(v: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if v >= scale:
            return f"{v / scale:.1f}{unit}"
    return f"{v:.0f}"


# ---- matrix products ----

def _packable(a: Value, w: Value) -> bool:
    return w.is_constant and len(w.shape) == 2 and len(a.shape) >= 2 and a.dtype == w.dtype == "float32"


def matmul_panel(target: Target, n: int) -> int:
    """Columns per panel of a packed matmul operand of `n` columns: `panel_vectors` of the target's vectors."""
    return panel_vectors(target, n) * target.vector_lanes


def panel_vectors(target: Target, n: int) -> int:
    """Vectors per GEMM panel: MATMUL_PANEL_VECTORS, so that each row of the register tile holds two accumulators
    (one vector per row gives a 6-row tile 6 FMA chains, too few to cover their latency on two FMA ports); three on
    Intel's AVX-512 cores where that pads the `n` columns no more than two do or by at most PANEL_PADDING of them
    (768, 3072, 4096 or 50257 columns; not 512 or 1024): a tile of 8 rows x 3 vectors (24 accumulators) reads a
    third less of A per FMA than 8 x 2, which the L2 feeds slowly there, and the transformers' products ran faster
    (docs/benchmarks.md, machine E). AMD's AVX-512 was not measured with it."""
    if target.vector_registers >= 32 and target.vendor == "GenuineIntel":
        wide, narrow = (v * target.vector_lanes for v in (INTEL_PANEL_VECTORS, MATMUL_PANEL_VECTORS))
        padding = [-(-n // w) * w - n for w in (wide, narrow)]
        if padding[0] <= max(padding[1], PANEL_PADDING * n):
            return INTEL_PANEL_VECTORS
    return MATMUL_PANEL_VECTORS


def matmul_tile_rows(rows, target: Target, vectors: int = MATMUL_PANEL_VECTORS,
                     row_bytes: int | None = None) -> int:
    """Rows of the GEMM's register tile: the rows themselves where there are fewer than 6 (a decoding step's one
    row padded to 6 multiplied five rows of zeros; its tile spans panels instead, schedule/packed_gemm.py); else,
    of 6, 8 and (from `4 * TALL_TILE_ROWS` rows on) `TALL_TILE_ROWS`, those the registers hold beside the panel's
    `vectors` and a broadcast, the cheapest: padded rows are whole wasted FMAs, and each step of a tile also
    loads one row of the B panel (streamed from L2 when k is long) for all its rows, about TILE_STEP_LOAD of a
    row's FMAs. So 128 rows run as 16 tiles of 8, not 10 of 14, and 112 as 8 of 14 (the measurements:
    docs/passes.md, "Convolution algorithms"). Where A's rows lie `row_bytes` apart, a tile whose rows would
    share one L1 set more often than the set has ways is left out (`rows_per_l1_set`): a tile reads its rows of A
    in place, and 14 rows 4 KiB apart evicted each other from an 8-way L1 at every step of k."""
    if isinstance(rows, int) and rows < 6:
        return rows
    if not isinstance(rows, int):
        return 6
    tiles = [mr for mr in (TALL_TILE_ROWS, 8) if mr * vectors + 3 <= target.vector_registers
             and (mr < TALL_TILE_ROWS or rows >= 4 * TALL_TILE_ROWS)
             and (row_bytes is None or rows_per_l1_set(mr, row_bytes, target) <= target.l1d_ways)]
    return min((*tiles, 6), key=lambda mr: -(-rows // mr) * mr * (1 + TILE_STEP_LOAD / mr))


def rows_per_l1_set(rows: int, row_bytes: int, target: Target) -> int:
    """The most of `rows` rows `row_bytes` apart (read at one offset each) that fall into one set of the L1 data
    cache, whose sets repeat every `l1d_bytes / l1d_ways` bytes."""
    sets = max(1, target.l1d_bytes // target.l1d_ways // target.cache_line_bytes)  # (fully associative: one)
    return max(collections.Counter(r * row_bytes // target.cache_line_bytes % sets for r in range(rows)).values())


def _panel_matmul(ed: GraphEditor, node: Node, a: Value, w: Value, bias: tuple[Value, ...], target: Target, *,
                  transpose_b=0, alpha=1.0, beta=1.0) -> Value:
    """A @ W with W packed into column panels, A's leading axes flattened into rows and restored after."""
    n = w.shape[0] if transpose_b else w.shape[1]
    rows_of_a = math.prod(a.shape[:-1]) if all(isinstance(d, int) for d in a.shape[:-1]) else None
    vectors = panel_vectors(target, n)
    wpack = _packed(ed, "matmul_weight_pack", w, f"{node.name}_wpack", transpose=int(transpose_b),
                    nr=vectors * target.vector_lanes)
    lead = a.shape[:-1]
    rows = a if len(a.shape) == 2 else ed.op("reshape", a, name=f"{node.name}_rows", shape=(-1, a.shape[-1]))
    out = ed.op("panel_matmul", rows, wpack, *bias, name=node.name, n=n,
                mr=matmul_tile_rows(rows_of_a, target, vectors, _row_bytes(a)), alpha=float(alpha), beta=float(beta))
    return out if len(a.shape) == 2 else ed.op("reshape", out, name=f"{node.name}_unrows", shape=(*lead, n))


def _row_bytes(a: Value) -> int | None:
    """How far apart A's rows lie in memory, where its row length is known."""
    k = a.shape[-1]
    return k * itemsize(a.dtype) if isinstance(k, int) else None


def _matmul(ed: GraphEditor, node: Node, ctx: PassContext) -> Value | None:
    a, w = ed.inputs_of(node)
    return _panel_matmul(ed, node, a, w, (), ctx.target) if _packable(a, w) else None


def _gemm(ed: GraphEditor, node: Node, ctx: PassContext) -> Value | None:
    a, w, *c = ed.inputs_of(node)
    attrs = node.attrs
    n = w.shape[0] if attrs["trans_b"] else w.shape[1]
    bias_fits = not c or c[0].shape in ((n,), (1, n), (1,), ())
    if not _packable(a, w) or attrs["trans_a"] or not bias_fits:
        return None
    return _panel_matmul(ed, node, a, w, tuple(c), ctx.target, transpose_b=attrs["trans_b"],
                         alpha=attrs["alpha"], beta=attrs["beta"])


_REWRITES = {"conv": _conv, "matmul": _matmul, "gemm": _gemm}


def conv_algorithm(g, ctx: PassContext):
    """Choose each constant-weight conv's and matmul's kernel algorithm and lay its weights out ahead of time."""
    changed = []

    def rewrite(ed: GraphEditor, node: Node):
        choose_kernel = _REWRITES.get(node.op)
        new = choose_kernel(ed, node, ctx) if choose_kernel else None
        changed.append(new is not None)
        return new

    out = map_nodes(g, rewrite)
    return out if any(changed) else g
