"""Default schedules: decent untuned kernels, chosen by each compute's tag.

Rules, in the spirit of TVM's x86 schedules: parallelise the outermost spatial loops, vectorise the innermost
contiguous loop, tile matmul and convolution around a register-sized accumulator (cache_write, then compute_at),
and keep row-wise chains (softmax, layer norm: a last stage whose attrs give `row_axes`) in one parallel loop over
rows with their reductions computed per row. Cheap injective producers are inlined; a padding stage feeding a
convolution is materialised, so the convolution's inner loop reads without bounds checks.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

from ..dtype import itemsize
from ..target import Target, host
from ..te import expr as E
from ..te.tensor import Tensor
from .knobs import Defaults, Knobs
from .schedule import Schedule
from .state import Stage

INJECTIVE_TAGS = {"elemwise", "broadcast", "injective", "pad", ""}
CONV_TAGS = {"conv1d", "conv2d", "conv3d"}
PACKED_TAGS = {"packed_conv2d_tiles", "packed_matmul_tiles"}
WINDOW_TAGS = {"depthwise_conv2d", "pool", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose"}
MATMUL_TAGS = {"matmul", "batch_matmul", "dense"}  # and "packed_matmul", its own rule (rules_packed.py)

@dataclasses.dataclass(frozen=True)
class Anchor:
    """What a rule schedules when the stage is the epilogue of a fused group (bias, residual, activation applied
    to a convolution's output): the anchor op's tag and attributes, and `accumulator`, the anchor's reduction
    stage, which the rule computes at its register tile of the output in place of a cache_write. An anchor whose
    last stage is an injective copy-out (the packed ops) is inlined into the epilogue before the rule runs, and
    `accumulator` is None. For a stage scheduled on its own, the anchor is the stage's own op."""

    tag: str
    attrs: dict
    accumulator: str | None = None


# Rules kept beside the computes they schedule (new algorithms, layouts): tag -> rule(sch, stage, target,
# anchor, knobs). Looked up before the built-in rules below.
RULES: dict[str, Callable[[Schedule, Stage, Target, Anchor, Knobs], None]] = {}


def rule(*tags: str):
    """Register a default-schedule rule for stages with one of `tags`."""
    def add(fn):
        for t in tags:
            RULES[t] = fn
        return fn
    return add


# Rules over a whole kernel whose stages no one tag describes (a product whose epilogue normalises its rows):
# rule(sch, target, knobs) -> whether it scheduled the kernel. Tried in order before the per-stage rules.
KERNEL_RULES: list[Callable[[Schedule, Target, Knobs], bool]] = []


def kernel_rule(fn):
    """Register a default-schedule rule for whole kernels."""
    KERNEL_RULES.append(fn)
    return fn


def default_schedule(outputs: Tensor | Sequence[Tensor], target: Target | None = None,
                     knobs: Knobs | None = None, rules: dict[str, Callable] | None = None) -> Schedule:
    """The hand-written schedule; with `knobs` (a sketch's `Space`), the rules' degrees of freedom come from it
    instead of their defaults. `rules` (tag -> rule, as `RULES`) replace the registered rules for this schedule
    only: an AutoTVM template schedules its op's stages while the default rules keep the rest of the kernel."""
    target = target or host()
    knobs = Defaults() if knobs is None else knobs
    if target.kind == "cuda":
        from .rules_gpu import gpu_schedule  # imports this module's helpers

        return gpu_schedule([outputs] if isinstance(outputs, Tensor) else list(outputs), target, knobs)
    rules = {**RULES, **(rules or {})}
    sch = Schedule(outputs)
    if any(kernel(sch, target, knobs) for kernel in KERNEL_RULES):
        return sch
    out_names = {t.name for t in sch.state.outputs}
    rows = _row_axes(sch)
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
        anchor = _epilogue_anchor(sch, s) if name in out_names else None
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
        _schedule_window(sch, s, target, anchor.accumulator)
    elif anchor.accumulator is not None:  # an epilogue on an op without a tiled rule: compute it per output row
        _schedule_generic(sch, s, target)
        sch.compute_at(anchor.accumulator, s.name, sch.loops(s.name)[0])
    else:
        _schedule_generic(sch, s, target)


HEAVY_TAGS = CONV_TAGS | WINDOW_TAGS | MATMUL_TAGS | {"packed_matmul", "packed_conv2d"}


def _epilogue_anchor(sch: Schedule, s: Stage) -> Anchor | None:
    """The anchor of an element-wise epilogue `s`: a conv, matmul or window op of the same shape that only `s`
    reads, element by element (directly or through inlined element-wise stages). A copy-out anchor (no
    reduction) is inlined here; a reduction becomes the accumulator."""
    if s.op.reduce_axes or s.op.tag not in INJECTIVE_TAGS:
        return None
    found: list[Stage] = []
    if not _identity_reads(sch, s, found) or len({p.name for p in found}) != 1:
        return None
    p = found[0]
    if p.tensor.shape != s.tensor.shape:
        return None
    if any(r.attach != "inline" and r is not s for r in sch.state.readers(p.tensor)):
        return None
    if p.op.reduce_axes:
        return Anchor(p.op.tag, dict(p.op.attrs), p.name)
    sch.compute_inline(p.name)
    return Anchor(p.op.tag, dict(p.op.attrs))


def _identity_reads(sch: Schedule, stage: Stage, found: list, identity: bool = True) -> bool:
    """Collect the non-inlined stages `stage` reads, looking through inlined ones; False if a heavy one is read
    anywhere but at the reader's own indices (a transposing or broadcasting read is not an epilogue)."""
    names = {st.name: st for st in sch.state.stages}
    own = tuple(stage.op.axes)
    stack = [stage.op.body]
    while stack:
        x = stack.pop()
        stack.extend(x.children())
        p = names.get(x.buffer.name) if type(x) is E.Load else None
        if p is None:
            continue
        same = identity and _same_element(x.indices, own, p.tensor.shape)
        if p.attach == "inline":
            if not _identity_reads(sch, p, found, same):
                return False
        elif p.op.tag in HEAVY_TAGS or p.op.tag in RULES:
            if not same:
                return False
            found.append(p)
    return True


def _same_element(indices, axes, shape) -> bool:
    """Whether a read at `indices` is of the reader's own element (an axis of extent 1 may read index 0)."""
    return len(indices) == len(axes) and all(
        i == a or (n == 1 and type(i) is E.Const and i.value == 0) for i, a, n in zip(indices, axes, shape))


def _row_axes(sch: Schedule) -> int | None:
    """How many leading axes of the (single) output a row-wise schedule runs over: the chain of a softmax,
    layer norm or a fused reduction with its element-wise consumers, whose reductions all keep those leading
    axes. None when the kernel is not such a chain."""
    if len(sch.state.outputs) != 1:
        return None
    out = sch.state.stage(sch.state.outputs[0].name)
    if out.op.reduce_axes:
        return None
    if "row_axes" in out.op.attrs:  # the last stage of a row-wise op declares how many leading axes are rows
        return out.op.attrs["row_axes"]
    if out.op.tag not in INJECTIVE_TAGS or len(out.op.axes) < 2:
        return None
    shape = out.tensor.shape
    reductions = [st for st in sch.state.stages if st.op.reduce_axes]
    if not reductions or any(r.op.tag in HEAVY_TAGS or r.op.tag in RULES for r in sch.state.stages):
        return None
    rows = len(shape) - 1
    for r in reductions:
        k = 0
        while k < min(len(r.tensor.shape), rows) and r.tensor.shape[k] == shape[k]:
            k += 1
        rows = min(rows, k)
    return rows if rows >= 1 else None


def _feeds_conv(readers: list[Stage]) -> bool:
    return any(r.op.tag in CONV_TAGS | WINDOW_TAGS | PACKED_TAGS for r in readers)


def _extent(s: Stage, loop: str) -> int:
    return s.loops[loop].extent.value


def _tile(n: int, sizes: Sequence[int]) -> int:
    """The first of `sizes` (best first) that divides `n`, else the first that fits in it (its last tile is a
    partial one, which code generation versions apart from the full ones), else `n`."""
    return next((t for t in sizes if n % t == 0), next((t for t in sizes if t <= n), n))


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def _parallel_outer(sch: Schedule, s: Stage, loops: list[str], target: Target, work_inside: int) -> None:
    """Run the leading `loops` in parallel when there is enough work (`parallel_count`)."""
    _parallelize(sch, s, loops, parallel_count([_extent(s, lp) for lp in loops], target, work_inside))


def parallel_count(extents: list[int], target: Target, work_inside: int) -> int:
    """How many leading loops of these extents to fuse into the parallel loop: none without enough work, else only
    as many as it takes to give every thread several chunks (fusing more would only add index arithmetic)."""
    total = math.prod(extents)
    if total < 2 or total * work_inside < target.min_parallel_work:
        return 0
    count, chunks = 0, 1
    for e in extents:
        count += 1
        chunks *= e
        if chunks >= 64:
            break
    return count


def parallel_grain(sch: Schedule, s: Stage, loops: list[str], extents: list[int] | None, target: Target,
                   work_inside: int, knobs: Knobs) -> None:
    """The parallel grain as a parameter: how many of the leading `loops` fuse into the parallel loop (0: none),
    by default `parallel_count`'s. `extents` are the loops' extents at the default point (a loop split by a
    parameter has no integer extent while the parameter is a Var); None reads them from the stage."""
    if extents is None:
        extents = [_extent(s, lp) for lp in loops]
    count = knobs.pick(f"{s.name}_grain", range(len(loops) + 1), parallel_count(extents, target, work_inside))
    _parallelize(sch, s, loops, count)


def _parallelize(sch: Schedule, s: Stage, loops: list[str], count: int) -> None:
    if count:
        sch.parallel(s.name, sch.fuse(s.name, *loops[:count]) if count > 1 else loops[0])


def _schedule_generic(sch: Schedule, s: Stage, target: Target) -> None:
    """Element-wise, injective and reductions: parallel outer spatial loops and a vectorised innermost spatial
    loop. A reduction along the inputs' contiguous axis keeps its reduction innermost instead; a sliding window
    (pooling, depthwise convolution) accumulates a vector of outputs in registers."""
    spatial = [lp for lp in s.leaves if not s.loops[lp].is_reduce]
    reduce = [lp for lp in s.leaves if s.loops[lp].is_reduce]
    reduce_work = math.prod(_extent(s, lp) for lp in reduce)
    if not spatial:
        return
    contiguous = _contiguous_reduction(s)
    if reduce and contiguous == "reduce":
        lanes = target.vector_lanes
        if len(reduce) == 1 and reduce_work % lanes == 0 and reduce_work >= 2 * lanes:
            _, k1 = sch.split(s.name, reduce[0], lanes)
            rf = sch.rfactor(s.name, k1)
            _parallel_outer(sch, s, spatial, target, reduce_work)
            row = sch.loops(s.name)[-2]
            lane, *rest = sch.loops(rf)
            sch.reorder(rf, *rest, lane)
            sch.vectorize(rf, lane)
            sch.compute_at(rf, s.name, row)
        else:
            _parallel_outer(sch, s, spatial, target, reduce_work)
        return
    if reduce and contiguous == "window":
        _schedule_window(sch, s, target, None)
        return
    inner = spatial[-1]
    # a byte output (quantize_linear's) needs a vector of bytes, 4x the float lanes, for gcc to vectorise it
    lanes = target.vector_lanes * 4 // min(itemsize(s.tensor.dtype), 4)
    vec_outer, vec_inner = sch.split(s.name, inner, lanes) if _extent(s, inner) > lanes else (None, inner)
    outer = spatial[:-1] + ([vec_outer] if vec_outer else [])
    if reduce:
        sch.reorder(s.name, *outer, *reduce, vec_inner)
    _parallel_outer(sch, s, outer, target, reduce_work * _extent(s, vec_inner))
    if _extent(s, vec_inner) > 1:
        sch.vectorize(s.name, vec_inner)


def window_pads(sch: Schedule, s: Stage, window: str) -> list[Stage]:
    """The padding stages that only the window stage `window` reads (`s`'s own accumulator or `s`)."""
    return [p for p in sch.state.stages if p.attach is None and not p.op.reduce_axes and p is not s
            and [r.name for r in sch.state.readers(p.tensor)] == [window]]


def attach_window(sch: Schedule, out: str, pads: list[Stage], local: str, w0: str, w1: str) -> None:
    """The output's vector of columns `w1`; each padding stage computed per output row (a few rows of input, in
    cache) rather than as a whole copy; the accumulator at the tile loop `w0`, so it stays in registers."""
    sch.vectorize(out, w1)
    row = sch.loops(out)[-3]
    for p in pads:
        sch.compute_at(p.name, out, row)
        sch.vectorize(p.name, sch.loops(p.name)[-1])
    sch.compute_at(local, out, w0)


def _schedule_window(sch: Schedule, s: Stage, target: Target, accumulator: str | None) -> None:
    """A vector of outputs along the row accumulates in registers over the window; a padding stage that only
    this window reads is computed per output row (a few rows of input, in cache) instead of as a whole copy.
    `accumulator` is the window stage when `s` is its fused epilogue."""
    lanes = target.vector_lanes * 4 // min(itemsize(s.tensor.dtype), 4)  # a byte output: a vector of bytes
    *outer, w = [a.name for a in s.op.axes]
    wext = _extent(s, w)
    wr, _ = conv_tile(1, wext, lanes)
    pads = window_pads(sch, s, accumulator or s.name)
    local = accumulator or sch.cache_write(s.name)
    w0, w1 = sch.split(s.name, w, wr)
    _parallel_outer(sch, s, outer, target, wext * reduction_work(sch, local))
    attach_window(sch, s.name, pads, local, w0, w1)
    lst = sch.state.stage(local)
    reduce = [lp for lp in lst.leaves if lst.loops[lp].is_reduce]
    *local_outer, local_w = [a.name for a in lst.op.axes]
    sch.reorder(local, *local_outer, *reduce, local_w)
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
    m, n = _extent(s, i), _extent(s, j)
    if anchor.tag == "batch_matmul" and n >= lanes and m >= 8:
        nr_d, mr_d = lanes, 8  # 8 rows of one vector: on attention's short reductions this beats 4 x 2 vectors
    else:
        nr_d = _tile(n, (lanes * 2, lanes))
        mr_d = _tile(m, (4, 3, 2))
    mb_d = min(m, 64)
    nr = knobs.choice(f"{s.name}_nr", _values(nr_d, (lanes * k for k in (1, 2, 3, 4)), -(-n // lanes) * lanes), nr_d)
    mr = knobs.choice(f"{s.name}_mr", _values(mr_d, range(1, 9), m), mr_d)
    mb = knobs.choice(f"{s.name}_mb", _values(mb_d, (16, 32, 64, 128), m), mb_d)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    i0, i1 = sch.split(s.name, i, mb)
    i10, i11 = sch.split(s.name, i1, mr)
    j0, j1 = sch.split(s.name, j, nr)
    sch.reorder(s.name, *batch, i0, j0, i10, i11, j1)
    work = mb_d * nr_d * reduction_work(sch, local)
    extents = [_extent(s, b) for b in batch] + [-(-m // mb_d), -(-n // nr_d)]
    parallel_grain(sch, s, [*batch, i0, j0], extents, target, work, knobs)
    sch.vectorize(s.name, j1)
    sch.compute_at(local, s.name, i10)
    lst = sch.state.stage(local)
    k = lst.leaves[-1]
    kext = _extent(lst, k)
    kb_d = min(kext, 256)
    k0, k1 = sch.split(local, k, knobs.choice(f"{local}_kb", _values(kb_d, (32, 64, 128, 256), kext), kb_d))
    li, lj = [a.name for a in lst.op.axes][-2:]
    sch.reorder(local, k0, k1, li, lj)
    sch.unroll(local, li)
    sch.vectorize(local, lj)


def _values(default: int, candidates, limit: int) -> tuple[int, ...]:
    """A parameter's values: the default and the candidates up to `limit` (a larger tile than its loop only adds
    a guarded tail)."""
    return tuple(sorted({default} | {v for v in candidates if v <= limit}))


def reduction_order(knobs: Knobs, stage: str, reduce: list[str]) -> list[str]:
    """The reduction loops (input channels first, then the taps) in the order a parameter picks: as they are, or
    the taps outside the channels."""
    if len(reduce) < 2 or knobs.pick(f"{stage}_taps_outer", (0, 1), 0) == 0:
        return reduce
    return reduce[1:] + reduce[:1]


def reduction_work(sch: Schedule, stage: str) -> int:
    """Multiply-adds per output element of a reduction stage: what makes a small output still worth threads."""
    st = sch.state.stage(stage)
    return math.prod(_extent(st, a.name) for a in st.op.reduce_axes)


def conv_tile(channels: int, width: int, lanes: int, accumulators: int = 12) -> tuple[int, int]:
    """(columns, channels) of the register tile: whole vectors of output columns where the width allows, else a
    divisor of the width (a tile that overshoots the row would need bounds checks in the innermost loop), and as
    many channels as fill the accumulator registers."""
    if width % (2 * lanes) == 0:
        wr = 2 * lanes
    elif width % lanes == 0:
        wr = lanes
    else:
        wr = _largest_divisor(width, 2 * lanes)
    vectors = -(-wr // lanes)
    return wr, _largest_divisor(channels, max(1, accumulators // vectors))


def _schedule_conv(sch: Schedule, s: Stage, target: Target, anchor: Anchor, knobs: Knobs) -> None:
    """Direct convolution: a tile of cr output channels x wr output columns accumulated in registers over the
    input channels and taps; batch, channel blocks and rows run in parallel. wr, cr (by default `conv_tile`'s;
    others may leave guarded tails) and the parallel grain are parameters."""
    lanes = target.vector_lanes
    n, c, *spatial = [a.name for a in s.op.axes]
    w = spatial[-1]
    wext, cext = _extent(s, w), _extent(s, c)
    wr_d, cr_d = conv_tile(cext, wext, lanes)
    wr = knobs.choice(f"{s.name}_wr", _values(wr_d, range(1, 2 * lanes + 1), wext), wr_d)
    cr = knobs.choice(f"{s.name}_cr", _values(cr_d, range(1, 13), cext), cr_d)
    local = anchor.accumulator or sch.cache_write(s.name)
    s = sch.state.stage(s.name)
    c0, c1 = sch.split(s.name, c, cr)
    w0, w1 = sch.split(s.name, w, wr)
    sch.reorder(s.name, n, c0, *spatial[:-1], w0, c1, w1)
    extents = [_extent(s, n), -(-cext // cr_d)] + [_extent(s, a) for a in spatial[:-1]]
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
    _parallel_outer(sch, s, [row], target, _extent(s, tail))
    producers = [p for p in sch.state.stages if p.attach is None and p.name != s.name]
    for p in producers:
        if p.op.reduce_axes:
            _vectorised_row_reduction(sch, p, s.name, row, target)
        else:
            sch.compute_at(p.name, s.name, row)
            sch.vectorize(p.name, sch.loops(p.name)[-1])
    sch.vectorize(s.name, tail)


def _vectorised_row_reduction(sch: Schedule, p: Stage, consumer: str, row: str, target: Target) -> None:
    lanes = target.vector_lanes
    reduce = [lp for lp in p.leaves if p.loops[lp].is_reduce]
    if len(reduce) == 1 and _extent(p, reduce[0]) % lanes == 0 and _extent(p, reduce[0]) >= 2 * lanes:
        _, k1 = sch.split(p.name, reduce[0], lanes)
        rf = sch.rfactor(p.name, k1)
        rst = sch.state.stage(rf)
        lane, *spatial_and_reduce = rst.leaves
        sch.reorder(rf, *spatial_and_reduce, lane)
        sch.vectorize(rf, lane)
        sch.compute_at(rf, consumer, row)
    sch.compute_at(p.name, consumer, row)


from . import rules_packed  # noqa: E402,F401
from . import rules_nchwc  # noqa: E402,F401
from . import rules_int8  # noqa: E402,F401
from . import rules_conv_algorithms  # noqa: E402,F401
from . import rules_attention  # noqa: E402,F401
from . import rules_row_epilogue  # noqa: E402,F401
