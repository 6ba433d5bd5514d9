"""Default schedules: decent untuned kernels, chosen by each compute's tag.

Rules, in the spirit of TVM's x86 schedules: parallelise the outermost spatial loops, vectorise the innermost
contiguous loop, tile matmul and convolution around a register-sized accumulator (cache_write, then compute_at),
and keep row-wise chains (softmax, layer norm: a last stage whose attrs give `row_axes`) in one parallel loop over
rows with their reductions computed per row. Cheap injective producers are inlined; a padding stage feeding a
convolution is materialised, so the convolution's inner loop reads without bounds checks.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from ..backend import backend_for
from ..dtype import itemsize
from ..target import Target, host
from ..te import expr as E
from ..te.simplify import simplify
from ..te.tensor import Tensor
from .knobs import Defaults, Knobs
from .parallel import parallel_grain, parallel_outer
from .patterns import epilogue_anchor, row_axes
from .reductions import (UNROLLED_TAPS, attach_window, pads_per_plane, planes_share_out, reduction_work,
                         vectorised_row_reduction, window_pads)
from .rules import (
    CONV_TAGS,
    INJECTIVE_TAGS,
    KERNEL_RULES,
    MATMUL_TAGS,
    PACKED_TAGS,
    RULES,
    WINDOW_TAGS,
    Anchor,
)
from .schedule import Schedule
from .state import Stage
from .tiling import WINDOW_VECTORS, conv_tile, extent, values, window_columns

# The rule modules register their rules (in RULES, KERNEL_RULES) as they are imported: this import is what fills
# the registry `default_schedule` dispatches on.
from . import (  # noqa: F401
    rules_attention,
    rules_conv_algorithms,
    rules_int8,
    rules_lane_groups,
    rules_nchwc,
    rules_packed,
    rules_row_epilogue,
)


def default_schedule(outputs: Tensor | Sequence[Tensor], target: Target | None = None,
                     knobs: Knobs | None = None, rules: dict[str, Callable] | None = None) -> Schedule:
    """The hand-written schedule of the target's backend (`cpu_schedule` here; a GPU's in `rules_gpu.py`); with
    `knobs` (a sketch's `Space`), the rules' degrees of freedom come from it instead of their defaults. `rules`
    (tag -> rule, as `RULES`) replace the registered rules for this schedule only: an AutoTVM template schedules
    its op's stages while the default rules keep the rest of the kernel."""
    target = target or host()
    knobs = Defaults() if knobs is None else knobs
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    return backend_for(target).default_schedule(outputs, target, knobs, rules)


def cpu_schedule(outputs: list[Tensor], target: Target, knobs: Knobs, rules: dict[str, Callable] | None) -> Schedule:
    """The CPU's rules: whole-kernel rules first, then each stage's by its tag, consumers first."""
    rules = {**RULES, **(rules or {})}
    sch = Schedule(outputs)
    if any(kernel(sch, target, knobs) for kernel in KERNEL_RULES):
        return sch
    out_names = {t.name for t in sch.state.outputs}
    rows = row_axes(sch)
    for s in list(reversed(sch.state.stages)):
        if s.name in out_names:
            continue
        readers = sch.state.readers(s.tensor)
        shared_in_row = rows is not None and len(readers) > 1  # kept per row by _schedule_rows, computed once
        if not s.op.reduce_axes and s.op.tag in INJECTIVE_TAGS and not _feeds_conv(readers) and not shared_in_row:
            sch.compute_inline(s.name)
    for name in [st.name for st in reversed(sch.state.stages)]:  # consumers first; rules may attach producers
        s = sch.state.stage(name)
        if s.attach is not None or s.relations:
            continue
        anchor = epilogue_anchor(sch, s) if name in out_names else None
        if anchor is not None:
            _dispatch(sch, s, target, anchor, knobs, rules)
        elif rows is not None and name in out_names:
            _schedule_rows(sch, s, target, rows)
        else:
            _dispatch(sch, s, target, Anchor(s.op.tag, dict(s.op.attrs)), knobs, rules)
    return sch


def _dispatch(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs, rules: dict) -> None:
    tag = anchor.tag
    if tag in rules:
        rules[tag](sch, s, target, anchor, knobs)
    elif tag in MATMUL_TAGS:
        _schedule_matmul(sch, s, target, anchor, knobs)
    elif tag in CONV_TAGS and anchor.attrs.get("groups", 1) == 1:
        _schedule_conv(sch, s, target, anchor, knobs)
    elif anchor.accumulator is not None and tag in WINDOW_TAGS:
        _schedule_window(sch, s, target, anchor.accumulator, knobs)
    elif anchor.accumulator is not None:  # an epilogue on an op without a tiled rule: compute it per output row
        _schedule_generic(sch, s, target, knobs)
        sch.compute_at(anchor.accumulator, s.name, sch.loops(s.name)[0])
    else:
        _schedule_generic(sch, s, target, knobs)


def _feeds_conv(readers: list[Stage]) -> bool:
    return any(r.op.tag in CONV_TAGS | WINDOW_TAGS | PACKED_TAGS for r in readers)


def _tile(n: int, sizes: Sequence[int]) -> int:
    """The first of `sizes` (best first) that divides `n`, else the first that fits in it (its last tile is a
    partial one, which code generation versions apart from the full ones), else `n`."""
    return next((t for t in sizes if n % t == 0), next((t for t in sizes if t <= n), n))


def _schedule_generic(sch: Schedule, s: Stage, target: Target, knobs: Knobs) -> None:
    """Element-wise, injective and reductions: parallel outer spatial loops and a vectorised innermost spatial
    loop. A reduction along the inputs' contiguous axis keeps its reduction innermost instead; a sliding window
    (pooling, depthwise convolution) accumulates a vector of outputs in registers."""
    spatial = [lp for lp in s.leaves if not s.loops[lp].is_reduce]
    reduce = [lp for lp in s.leaves if s.loops[lp].is_reduce]
    reduce_work = math.prod(extent(s, lp) for lp in reduce)
    if not spatial:
        return
    contiguous = _contiguous_reduction(s)
    if reduce and contiguous == "reduce":
        lanes = target.vector_lanes
        if len(reduce) == 1 and reduce_work % lanes == 0 and reduce_work >= 2 * lanes:
            _, k1 = sch.split(s.name, reduce[0], lanes)
            rf = sch.rfactor(s.name, k1)
            parallel_outer(sch, s, spatial, target, reduce_work)
            row = sch.loops(s.name)[-2]
            lane, *rest = sch.loops(rf)
            sch.reorder(rf, *rest, lane)
            sch.vectorize(rf, lane)
            sch.compute_at(rf, s.name, row)
        else:
            parallel_outer(sch, s, spatial, target, reduce_work)
        return
    if reduce and contiguous == "window":
        _schedule_window(sch, s, target, None, knobs)
        return
    block = s.op.attrs.get("transpose_block", 0)
    if not reduce and block in TRANSPOSED_BLOCKS:
        _transpose_in_squares(sch, s, spatial, block, target)
        return
    moved = None if reduce else _moved_axes(sch, s, target)
    if moved is not None:
        _transpose_in_tiles(sch, s, spatial, *moved, target)
        return
    inner = spatial[-1]
    if not reduce and len(spatial) > 1 and extent(s, inner) <= FEW_INNER < extent(s, spatial[-2]):
        _vectorize_around_few(sch, s, spatial, target)
        return
    # a byte output (quantize_linear's) needs a vector of bytes, 4x the float lanes, for gcc to vectorise it
    lanes = target.vector_lanes * 4 // min(itemsize(s.tensor.dtype), 4)
    vec_outer, vec_inner = _vector_split(sch, s, inner, lanes)
    outer = spatial[:-1] + vec_outer
    if reduce:
        sch.reorder(s.name, *outer, *reduce, vec_inner)
    parallel_outer(sch, s, outer, target, reduce_work * extent(s, vec_inner) * _element_weight(sch, s))
    if extent(s, vec_inner) > 1:
        sch.vectorize(s.name, vec_inner)


def _vector_split(sch: Schedule, s: Stage, axis: str, lanes: int) -> tuple[list, str]:
    """`axis` split into a vector of `lanes` inside (the whole axis where it is no longer): ([the outer loop, if
    any], the vector loop)."""
    if extent(s, axis) <= lanes:
        return [], axis
    outer, inner = sch.split(s.name, axis, lanes)
    return [outer], inner


FEW_INNER = 4  # an innermost axis this short (an image's RGB channels laid out last) is no vector of its own


def _vectorize_around_few(sch: Schedule, s: Stage, spatial: list, target: Target) -> None:
    """The axis around a short innermost one vectorised, the short one unrolled inside it: gcc then stores the
    few elements of each vector lane as one interleaved group (an NCHW image quantized into NHWC: 3 channels a
    pixel), where vectorising the short axis itself ran one pixel at a time."""
    around, few = spatial[-2:]
    vec_outer, vec_inner = _vector_split(sch, s, around, target.vector_lanes)
    outer = spatial[:-2] + vec_outer
    sch.reorder(s.name, *outer, vec_inner, few)
    parallel_outer(sch, s, outer, target, extent(s, vec_inner) * extent(s, few) * _element_weight(sch, s))
    sch.vectorize(s.name, vec_inner)
    sch.unroll(s.name, few)


TRANSPOSED_BLOCKS = (2, 4, 8, 16)  # gcc interleaves a group of loads or stores by permutes for a power of two


def _transpose_in_squares(sch: Schedule, s: Stage, spatial: list, block: int, target: Target) -> None:
    """A copy between NCHW and NCHW[x]c, whose channels of a block are contiguous on one side and a plane apart
    on the other: a vector along the pixels, the block's channels unrolled inside it, so that each read and each
    write is a whole vector and gcc turns the strided side into an interleaved group transposed in registers,
    where a vector along either side alone reads or writes one element per cache line of the other."""
    if len(spatial) == 4:  # from_blocked (n, c, h, w): the channel split back into its blocks
        n, c, h, w = spatial
        cb, ci = sch.split(s.name, c, block)
        spatial = [n, cb, h, w, ci]
    _vectorize_around_few(sch, s, spatial, target)


# The square tiles a transposing copy is lowered in (loop/transpose.py's helpers), by the element's bytes: 16
# bytes are one SSE vector a row; 8 or 16 four-byte elements an AVX2 or AVX-512 vector.
TRANSPOSE_TILES = {1: (16,), 4: (8, 16)}


def _moved_axes(sch: Schedule, s: Stage, target: Target) -> tuple[str, str, int] | None:
    """(r, c, T) of a copy that moves an axis: c the output's innermost axis, r the one that steps the input one
    element at a time (seen through the copies inlined into `s`: a transpose then a reshape, as a transposed
    convolution's pixels are gathered for its product), both at least a tile `T` long (loop/transpose.py's sides
    for the element's size); else None."""
    names = [a.name for a in s.op.axes]
    load = _copied_load(sch, s.op.body)
    if load is None or load.buffer.dtype != s.tensor.dtype or not names:
        return None
    flat = E.flat_index(load.buffer, load.indices)
    r = next((a.name for a in s.op.axes if _step(flat, a, s.op.axes) == 1), None)
    c = names[-1]
    if r is None or r == c or not _step(flat, s.op.axes[-1], s.op.axes):
        return None
    size = itemsize(s.tensor.dtype)
    side = max([t for t in TRANSPOSE_TILES.get(size, ()) if t * size <= target.vector_lanes * 4], default=0)
    return (r, c, side) if side and min(extent(s, r), extent(s, c)) >= side else None


def _copied_load(sch: Schedule, body: E.Expr) -> E.Load | None:
    """The load of a stage's input that `body` copies, looking through the copies inlined into it; None if
    `body` computes anything."""
    inlined = {id(st.tensor): st for st in sch.state.stages if st.attach == "inline"}
    while type(body) is E.Load and id(body.buffer) in inlined:
        op = inlined[id(body.buffer)].op
        if type(op.body) is not E.Load:
            return None
        body = E.substitute(op.body, dict(zip(op.axes, body.indices)))
    return body if type(body) is E.Load else None


def _step(flat: E.Expr, axis: E.Var, axes) -> int | None:
    """How far the element `flat` moves for one step of `axis` from the origin: a constant, or None."""
    origin = {a: E.const(0, a.dtype) for a in axes}
    delta = simplify(E.substitute(flat, {**origin, axis: E.const(1, axis.dtype)}) - E.substitute(flat, origin))
    return delta.value if type(delta) is E.Const else None


def _transpose_in_tiles(sch: Schedule, s: Stage, spatial: list, r: str, c: str, side: int, target: Target) -> None:
    """A copy that moves axis `r` (the input's contiguous one) past `c` (the output's), in squares of `side` x
    `side` elements that the target lowering gives to a transposing helper (loop/transpose.py); a vector along
    `c` in the partial squares at the edges."""
    r0, r1 = sch.split(s.name, r, side)
    c0, c1 = sch.split(s.name, c, side)
    outer = [a for a in spatial if a not in (r, c)] + [r0, c0]
    sch.reorder(s.name, *outer, r1, c1)
    parallel_outer(sch, s, outer, target, side * side)
    sch.vectorize(s.name, c1)


CALL_READS = 8  # a transcendental function (tanh, exp, erf) costs about as much as this many reads


def _element_weight(sch: Schedule, s: Stage) -> int:
    """How many plain element-wise elements (two reads) one element of `s` costs, its inlined producers counted:
    a small output of costly elements (a tanh over col2im's taps) is still worth the threads."""
    inlined = {id(st.tensor) for st in sch.state.stages if st.attach == "inline"}
    cost, stack = 0, [s.op.body]
    while stack:
        x = stack.pop()
        if type(x) is E.Load:
            if id(x.buffer) in inlined:
                stack.append(x.buffer.op.body)
            else:
                cost += 1
        elif isinstance(x, E.Call):
            cost += CALL_READS
        stack.extend(x.children())
    return max(1, cost // 2)


def _schedule_window(sch: Schedule, s: Stage, target: Target, accumulator: str | None, knobs: Knobs) -> None:
    """A tile of output columns along the row (`window_columns`, a parameter, as is the parallel grain)
    accumulates in registers over the window; a padding stage that only this window reads is computed per plane
    where each output plane reads one input plane that fits in cache, else per output row (a few rows of input),
    instead of as a whole copy. A window of at most UNROLLED_TAPS taps is unrolled: gcc then keeps the accumulator
    in a register, where a loop over the taps loaded and stored it at every tap (each multiply-add waited on the
    store before it). `accumulator` is the window stage when `s` is its fused epilogue."""
    lanes = target.vector_lanes * 4 // min(itemsize(s.tensor.dtype), 4)  # a byte output: a vector of bytes
    *outer, w = [a.name for a in s.op.axes]
    wext = extent(s, w)
    wr_d = window_columns(wext, lanes)
    wr = knobs.pick(f"{s.name}_window_columns", values(wr_d, (lanes * k for k in (1, 2, 4, WINDOW_VECTORS)), wext),
                    wr_d)
    pads = window_pads(sch, s, accumulator or s.name)
    local = accumulator or sch.cache_write(s.name)
    w0, w1 = sch.split(s.name, w, wr)
    per_plane = pads_per_plane(sch, local, pads, target)
    if per_plane and planes_share_out([extent(s, a) for a in outer], target):
        outer = outer[:-1]  # the rows stay a loop of their own, inside the plane its padding is made for
    parallel_grain(sch, s, outer, None, target, wext * reduction_work(sch, local), knobs)
    attach_window(sch, s.name, pads, local, w0, w1, per_plane=per_plane)
    lst = sch.state.stage(local)
    reduce = [lp for lp in lst.leaves if lst.loops[lp].is_reduce]
    *local_outer, local_w = [a.name for a in lst.op.axes]
    sch.reorder(local, *local_outer, *reduce, local_w)
    if reduction_work(sch, local) <= UNROLLED_TAPS:
        for loop in reduce:
            sch.unroll(local, loop)
    sch.vectorize(local, local_w)


def _contiguous_reduction(s: Stage) -> str | None:
    """How the reads' innermost index moves: "reduce" with a reduction variable only (a row reduction),
    "window" with both a reduction variable and the innermost spatial one (a sliding window), else None."""
    reduce_names = {a.name for a in s.op.reduce_axes}
    inner = s.op.axes[-1].name if s.op.axes else None
    kinds = set()
    stack = [s.op.body]
    while stack:
        x = stack.pop()
        if type(x) is E.Load and x.indices:
            names = {v.name for v in E.free_vars(x.indices[-1])}
            if names & reduce_names:
                kinds.add("window" if inner in names else "reduce")
        stack.extend(x.children())
    return "window" if "window" in kinds else "reduce" if kinds else None


def _schedule_matmul(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """Register tile of mr rows x nr columns accumulated over k in blocks of kb; the batch and blocks of mb rows
    run in parallel. mr, nr (multiples of the vector lanes, or the whole row when it is narrower), mb and kb are
    parameters, any of which may leave a guarded tail; so is the parallel grain."""
    lanes = target.vector_lanes
    *batch, i, j = [a.name for a in s.op.axes]
    m, n = extent(s, i), extent(s, j)
    if anchor.tag == "batch_matmul" and n >= lanes and m >= 8:
        nr_d, mr_d = lanes, 8  # 8 rows of one vector: on attention's short reductions this beats 4 x 2 vectors
    else:
        nr_d = _tile(n, (lanes * 2, lanes))
        mr_d = _tile(m, (4, 3, 2))
    mb_d = min(m, 64)
    nr = knobs.choice(f"{s.name}_nr", values(nr_d, (lanes * k for k in (1, 2, 3, 4)), -(-n // lanes) * lanes), nr_d)
    mr = knobs.choice(f"{s.name}_mr", values(mr_d, range(1, 9), m), mr_d)
    mb = knobs.choice(f"{s.name}_mb", values(mb_d, (16, 32, 64, 128), m), mb_d)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    i0, i1 = sch.split(s.name, i, mb)
    i10, i11 = sch.split(s.name, i1, mr)
    j0, j1 = sch.split(s.name, j, nr)
    sch.reorder(s.name, *batch, i0, j0, i10, i11, j1)
    work = mb_d * nr_d * reduction_work(sch, local)
    extents = [extent(s, b) for b in batch] + [-(-m // mb_d), -(-n // nr_d)]
    parallel_grain(sch, s, [*batch, i0, j0], extents, target, work, knobs)
    sch.vectorize(s.name, j1)
    sch.compute_at(local, s.name, i10)
    lst = sch.state.stage(local)
    k = lst.leaves[-1]
    kext = extent(lst, k)
    kb_d = min(kext, 256)
    k0, k1 = sch.split(local, k, knobs.choice(f"{local}_kb", values(kb_d, (32, 64, 128, 256), kext), kb_d))
    li, lj = [a.name for a in lst.op.axes][-2:]
    sch.reorder(local, k0, k1, li, lj)
    sch.unroll(local, li)
    sch.vectorize(local, lj)


def _schedule_conv(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """Direct convolution: a tile of cr output channels x wr output columns accumulated in registers over the
    input channels and taps; batch, channel blocks and rows run in parallel. wr, cr (by default `conv_tile`'s;
    others may leave guarded tails) and the parallel grain are parameters."""
    lanes = target.vector_lanes
    n, c, *spatial = [a.name for a in s.op.axes]
    w = spatial[-1]
    wext, cext = extent(s, w), extent(s, c)
    wr_d, cr_d = conv_tile(cext, wext, lanes)
    wr = knobs.choice(f"{s.name}_wr", values(wr_d, range(1, 2 * lanes + 1), wext), wr_d)
    cr = knobs.choice(f"{s.name}_cr", values(cr_d, range(1, 13), cext), cr_d)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    c0, c1 = sch.split(s.name, c, cr)
    w0, w1 = sch.split(s.name, w, wr)
    sch.reorder(s.name, n, c0, *spatial[:-1], w0, c1, w1)
    extents = [extent(s, n), -(-cext // cr_d)] + [extent(s, a) for a in spatial[:-1]]
    parallel_grain(sch, s, [n, c0, *spatial[:-1]], extents, target, wext * cr_d * reduction_work(sch, local), knobs)
    sch.compute_at(local, s.name, w0)
    lst = sch.state.stage(local)
    ln, lc, *lsp = [a.name for a in lst.op.axes]
    reduce = [lp for lp in lst.leaves if lst.loops[lp].is_reduce]
    sch.reorder(local, ln, *lsp[:-1], *reduce, lc, lsp[-1])
    sch.unroll(local, lc)
    sch.vectorize(local, lsp[-1])
    sch.vectorize(s.name, w1)


def _schedule_rows(sch: Schedule, s: Stage, target: Target, axis: int) -> None:
    """Softmax, layer norm and fused reduction chains: one parallel loop over the rows (the first `axis` axes);
    each row's reductions are computed inside it, split into vector lanes of partial results (rfactor) so that
    they vectorise too."""
    names = [a.name for a in s.op.axes]
    rows, inner = names[:axis], names[axis:]
    tail = sch.fuse(s.name, *inner) if len(inner) > 1 else inner[0]
    if not rows:
        sch.vectorize(s.name, tail)
        return
    row = sch.fuse(s.name, *rows) if len(rows) > 1 else rows[0]
    parallel_outer(sch, s, [row], target, extent(s, tail))
    producers = [p for p in sch.state.stages if p.attach is None and p.name != s.name]
    for p in producers:
        if p.op.reduce_axes:
            vectorised_row_reduction(sch, p, s.name, row, target)
        else:
            sch.compute_at(p.name, s.name, row)
            sch.vectorize(p.name, sch.loops(p.name)[-1])
    sch.vectorize(s.name, tail)
