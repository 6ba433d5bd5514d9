"""Schedule primitives: each registered once with its legality check and its effect on the loop state.

A primitive takes the state and named arguments (stage and loop names, integers or expression Vars) and returns
the names of the loops or stages it creates. It never records itself; `Schedule` and `apply_trace` do.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..errors import ScheduleError
from ..te import expr as E
from ..te.dims import dim, divides
from ..te.simplify import simplify
from ..te.tensor import ComputeOp, Tensor, axis_var, compute, reduce_identity
from .state import BLOCK_AXES, SCOPES, THREAD_AXES, FuseRel, Loop, LoopState, SplitRel, Stage, make_stage

PRIMITIVES: dict[str, Callable] = {}


def primitive(kind: str):
    def register(fn):
        PRIMITIVES[kind] = fn
        return fn

    return register


def _positive(value, what: str) -> E.Expr:
    e = E.as_expr(value)
    if not E.is_int(e.dtype):
        raise ScheduleError(f"{what} must be an integer, got {e}")
    if type(e) is E.Const and e.value < 1:
        raise ScheduleError(f"{what} must be positive, got {e.value}")
    return E.cast(E.INDEX, e)


@primitive("split")
def split(st: LoopState, stage: str, loop: str, factor=None, nparts=None, exact=False) -> tuple[str, str]:
    """Split `loop` into (outer, inner), inner of extent `factor` (or outer of extent `nparts`); a guard covers
    a non-divisible tail. `exact` promises that the part divides the extent (a sketch's tile sizes range over
    divisors), so a symbolic split lowers without tail guards; a concrete one that does not divide is refused."""
    s = st.stage(stage)
    lp = s.leaf(loop)
    if (factor is None) == (nparts is None):
        raise ScheduleError(f"split of {stage}.{loop} needs exactly one of factor= or nparts=")
    if factor is not None:
        inner_ext = _positive(factor, f"split factor of {stage}.{loop}")
        outer_ext = simplify(_parts(lp.extent, inner_ext, exact, f"{stage}.{loop}"))
    else:
        outer_ext = _positive(nparts, f"split nparts of {stage}.{loop}")
        inner_ext = simplify(_parts(lp.extent, outer_ext, exact, f"{stage}.{loop}"))
    outer, inner = s.fresh_name(f"{loop}_0"), s.fresh_name(f"{loop}_1")
    s.loops[outer] = Loop(outer, outer_ext, lp.is_reduce)
    s.loops[inner] = Loop(inner, inner_ext, lp.is_reduce)
    s.relations.append(SplitRel(loop, outer, inner, inner_ext if factor is not None else None,
                                outer_ext if nparts is not None else None, bool(exact)))
    i = s.leaves.index(loop)
    s.leaves[i:i + 1] = [outer, inner]
    for other in st.stages:  # computed once per iteration of `loop` is computed once per iteration of its inner
        if isinstance(other.attach, tuple) and other.attach == (stage, loop):
            if other.shares_loops:
                raise ScheduleError(f"split of {stage}.{loop}: {other.name} runs in the loops up to it "
                                    "(compute_with); split before sharing them")
            other.attach = (stage, inner)
    return outer, inner


def _parts(extent: E.Expr, part: E.Expr, exact: bool, where: str) -> E.Expr:
    if not exact:
        return E.ceildiv(extent, part)
    if type(extent) is E.Const and type(part) is E.Const and extent.value % part.value:
        raise ScheduleError(f"exact split of {where}: {part.value} does not divide {extent.value}")
    return extent // part


@primitive("fuse")
def fuse(st: LoopState, stage: str, loops: Sequence[str]) -> str:
    """Fuse adjacent loops (outermost first) into one whose extent is the product."""
    s = st.stage(stage)
    loops = list(loops)
    if len(loops) < 2:
        raise ScheduleError(f"fuse on {stage} needs at least two loops, got {loops}")
    first = s.leaves.index(s.leaf(loops[0]).name)
    if s.leaves[first:first + len(loops)] != loops:
        raise ScheduleError(f"fuse on {stage}: loops {loops} are not adjacent in the order {s.leaves}")
    if len({s.loops[n].is_reduce for n in loops}) != 1:
        raise ScheduleError(f"fuse on {stage}: cannot fuse reduction and spatial loops {loops}")
    cur = loops[0]
    for nxt in loops[1:]:
        name = s.fresh_name(f"{cur.removesuffix('_fused')}_{nxt}_fused")
        extent = simplify(s.loops[cur].extent * s.loops[nxt].extent)
        s.loops[name] = Loop(name, extent, s.loops[cur].is_reduce)
        s.relations.append(FuseRel(cur, nxt, name))
        cur = name
    s.leaves[first:first + len(loops)] = [cur]
    for other in st.stages:  # a stage computed at one of the fused loops is now computed at their fusion
        if isinstance(other.attach, tuple) and other.attach[0] == stage and other.attach[1] in loops:
            other.attach = (stage, cur)
    return cur


@primitive("parallel_outer")
def parallel_outer(st: LoopState, stage: str, count) -> str | None:
    """Fuse the `count` outermost loops of `stage` and run them in parallel (Ansor's parallel annotation; the
    count is how fine the parallel grain is). Returns the parallel loop, or None for count 0."""
    s = st.stage(stage)
    count = int(E.as_expr(count).value) if type(E.as_expr(count)) is E.Const else None
    if count is None or not 0 <= count <= len(s.leaves):
        raise ScheduleError(f"parallel_outer on {stage}: count must be an integer in 0..{len(s.leaves)}")
    if count == 0:
        return None
    loops = s.leaves[:count]
    name = fuse(st, stage, loops) if count > 1 else loops[0]
    _set_kind(st, stage, name, "parallel")
    return name


@primitive("reorder")
def reorder(st: LoopState, stage: str, order: Sequence[str]) -> None:
    """Put the named loops in the given order, in the positions they occupy now."""
    s = st.stage(stage)
    order = list(order)
    for n in order:
        s.leaf(n)
    if len(set(order)) != len(order):
        raise ScheduleError(f"reorder on {stage}: repeated loops in {order}")
    positions = sorted(s.leaves.index(n) for n in order)
    for pos, n in zip(positions, order):
        s.leaves[pos] = n


@primitive("tile")
def tile(st: LoopState, stage: str, x: str, y: str, x_factor, y_factor) -> tuple[str, str, str, str]:
    """Split two adjacent loops and order them (x_0, y_0, x_1, y_1)."""
    x0, x1 = split(st, stage, x, factor=x_factor)
    y0, y1 = split(st, stage, y, factor=y_factor)
    reorder(st, stage, [x0, y0, x1, y1])
    return x0, y0, x1, y1


def _set_kind(st: LoopState, stage: str, loop: str, kind: str) -> None:
    s = st.stage(stage)
    lp = s.leaf(loop)
    if kind == "parallel" and lp.is_reduce:
        raise ScheduleError(f"cannot parallelize reduction loop {stage}.{loop}; use rfactor first")
    if kind == "vectorized" and lp.is_reduce:
        raise ScheduleError(f"cannot vectorize reduction loop {stage}.{loop}; use rfactor first")
    lp.kind = kind


@primitive("parallel")
def parallel(st: LoopState, stage: str, loop: str) -> None:
    """Run the iterations of `loop` on the threads of the machine (OpenMP)."""
    _set_kind(st, stage, loop, "parallel")


@primitive("vectorize")
def vectorize(st: LoopState, stage: str, loop: str) -> None:
    """Compile `loop` to SIMD instructions; best on the innermost loop with a constant extent."""
    _set_kind(st, stage, loop, "vectorized")


@primitive("unroll")
def unroll(st: LoopState, stage: str, loop: str) -> None:
    """Unroll `loop` fully."""
    _set_kind(st, stage, loop, "unrolled")


@primitive("bind")
def bind(st: LoopState, stage: str, loop: str, axis: str) -> None:
    """Run the iterations of `loop` as GPU blocks or threads: `axis` is blockIdx.x/y/z or threadIdx.x/y/z. Loops
    of different stages bound to one axis share its index, so a producer computed inside the thread loops of its
    consumer can split its own work over the same threads (cooperative fetching)."""
    if axis not in BLOCK_AXES + THREAD_AXES:
        raise ScheduleError(f"bind of {stage}.{loop}: axis {axis!r} is not one of {', '.join(BLOCK_AXES + THREAD_AXES)}")
    s = st.stage(stage)
    lp = s.leaf(loop)
    if lp.is_reduce:
        raise ScheduleError(f"cannot bind reduction loop {stage}.{loop} to {axis}; use rfactor first")
    taken = [n for n in s.leaves if s.loops[n].kind == axis and n != loop]
    if taken:
        raise ScheduleError(f"bind of {stage}.{loop}: {axis} is already bound to {stage}.{taken[0]}")
    lp.kind = axis


@primitive("auto_unroll")
def auto_unroll(st: LoopState, stage: str, max_step) -> None:
    """Unroll the innermost loops of `stage` whose combined trip count is at most `max_step` (Ansor's pragma)."""
    value = E.as_expr(max_step)
    st.stage(stage).auto_unroll_max_step = int(value.value) if type(value) is E.Const else value


@primitive("compute_at")
def compute_at(st: LoopState, stage: str, target: str, loop) -> None:
    """Compute `stage` inside loop `loop` of `target`, just the region one iteration of it needs. `loop` is a
    name, or a position in the target's current loop order (a sketch's choice of location; -1 is the root)."""
    s, t = st.stage(stage), st.stage(target)
    if not isinstance(loop, str):
        position = E.as_expr(loop)
        if type(position) is not E.Const or not -1 <= position.value < len(t.leaves):
            raise ScheduleError(f"compute_at: position {loop} is not one of {target}'s {len(t.leaves)} loops")
        if position.value == -1:
            s.attach, s.shares_loops = None, False
            return
        loop = t.leaves[position.value]
    t.leaf(loop)
    if s is t:
        raise ScheduleError(f"compute_at: stage {stage} cannot be computed at its own loop")
    if st.stages.index(s) > st.stages.index(t):
        raise ScheduleError(f"compute_at: {stage} is not a producer of {target}")
    if s.tensor in st.outputs:
        raise ScheduleError(f"compute_at: {stage} is an output of the kernel; it must stay at the root")
    s.attach, s.shares_loops = (target, loop), False


@primitive("compute_with")
def compute_with(st: LoopState, stage: str, target: str, loop: str) -> None:
    """Run `stage`'s leading loops as `target`'s, up to and including `loop` (Halide's compute_with): one nest
    whose every iteration computes `stage`'s slice, then `target`'s. Its buffer stays where `target`'s is, whole,
    so stages read it after that shared loop too, while a producer computed at the shared loop holds one
    iteration's worth (the attention's block statistics beside one block of scores). An output may share the
    loops of a stage at the root, whose buffers are whole (a product's pre-norm rows beside its normalised ones)."""
    s, t = st.stage(stage), st.stage(target)
    position = t.leaves.index(t.leaf(loop).name)
    if s is t or st.stages.index(s) > st.stages.index(t):
        raise ScheduleError(f"compute_with: {stage} must come before {target} in the kernel (it runs first in "
                            f"each shared iteration)")
    if s.attach == "inline":
        raise ScheduleError(f"compute_with: {stage} is inlined; it has no loops to share")
    if s.tensor in st.outputs and t.attach is not None:
        raise ScheduleError(f"compute_with: {stage} is an output of the kernel, so {target} must be at the root "
                            f"(the output's buffer is whole)")
    shared = s.leaves[:position + 1]
    if len(shared) <= position or any(s.loops[n].is_reduce for n in shared) or any(
            t.loops[n].is_reduce for n in t.leaves[:position + 1]):
        raise ScheduleError(f"compute_with: the loops of {target} up to {loop} ({t.leaves[:position + 1]}) must "
                            f"match spatial leading loops of {stage} ({s.leaves})")
    s.attach, s.shares_loops = (target, loop), True


@primitive("compute_root")
def compute_root(st: LoopState, stage: str) -> None:
    """Compute `stage` in its own loop nest at the top of the kernel."""
    s = st.stage(stage)
    s.attach, s.shares_loops = None, False


@primitive("compute_inline")
def compute_inline(st: LoopState, stage: str) -> None:
    """Substitute `stage`'s expression into its readers; it gets no loops or buffer of its own."""
    s = st.stage(stage)
    if s.op.reduce_axes:
        raise ScheduleError(f"compute_inline: {stage} is a reduction and cannot be inlined")
    if s.tensor in st.outputs:
        raise ScheduleError(f"compute_inline: {stage} is an output of the kernel")
    if s.relations or any(lp.kind != "serial" for lp in s.loops.values()):
        raise ScheduleError(f"compute_inline: {stage} already has loop transformations")
    s.attach, s.shares_loops = "inline", False


def _untouched(s: Stage, what: str) -> None:
    if s.relations or s.leaves != s.roots:
        raise ScheduleError(f"{what}: stage {s.name} must not be split, fused or reordered before")


@primitive("cache_write")
def cache_write(st: LoopState, stage: str, scope: str = "local") -> str:
    """Compute `stage` into a new `scope` buffer (an accumulator tile once computed at a loop of `stage`), then
    copy it out; returns the new stage's name."""
    s = st.stage(stage)
    _untouched(s, "cache_write")
    _check_scope(scope, f"cache_write of {stage}")
    op = s.op
    name = _fresh_stage_name(st, f"{stage}_{scope}")
    cached = Tensor(name, s.tensor.shape, s.tensor.dtype, ComputeOp(name, op.axes, op.body, op.tag, op.attrs))
    new = make_stage(cached)
    new.scope = scope
    st.insert_before(s, new)
    copy = Tensor(stage, s.tensor.shape, s.tensor.dtype,
                  ComputeOp(stage, op.axes, E.Load(cached, op.axes), op.tag, op.attrs))
    s.tensor = copy
    fresh = make_stage(copy)
    s.loops, s.leaves, s.relations = fresh.loops, fresh.leaves, []
    st.outputs = [copy if t.name == stage else t for t in st.outputs]
    st._relink()
    return name


@primitive("cache_read")
def cache_read(st: LoopState, tensor: str, scope: str, readers: Sequence[str]) -> str:
    """Copy `tensor` into a new `scope` buffer that the given reader stages read instead; returns its name."""
    _check_scope(scope, f"cache_read of {tensor}")
    src = _find_tensor(st, tensor)
    reader_stages = [st.stage(r) for r in readers]
    for r in reader_stages:
        if not any(inp.name == tensor for inp in r.op.inputs):
            raise ScheduleError(f"cache_read: stage {r.name} does not read {tensor}")
    name = _fresh_stage_name(st, f"{tensor}_{scope}")
    copy = compute(src.shape, lambda *i: src[i], name=name, tag="injective")
    new = make_stage(copy)
    new.scope = scope
    first = min(st.stages.index(r) for r in reader_stages)
    st.stages.insert(first, new)
    st.replace_tensor(src, copy, reader_stages)
    return name


def _check_scope(scope: str, what: str) -> None:
    if scope not in SCOPES:
        raise ScheduleError(f"{what}: scope {scope!r} is not one of {', '.join(SCOPES)}")


@primitive("set_scope")
def set_scope(st: LoopState, stage: str, scope: str) -> None:
    """Keep `stage`'s buffer in `scope` once it is computed at a loop of another stage: "shared" for partial
    results the threads of a GPU block combine (an rfactor stage), "local" for per-thread ones."""
    _check_scope(scope, f"set_scope of {stage}")
    s = st.stage(stage)
    if s.tensor in st.outputs:
        raise ScheduleError(f"set_scope: {stage} is an output of the kernel; its buffer is a parameter")
    s.scope = scope


@primitive("rfactor")
def rfactor(st: LoopState, stage: str, loop: str) -> str:
    """Make `loop`, a part of a split reduction axis, a spatial axis of a new stage of partial results, which
    `stage` then reduces; returns the new stage's name. The inner part lets a reduction run in parallel or
    vectorised (partition c % factor); the outer part sums contiguous ranges of the axis (partition c // factor),
    so that `stage` can add them up with the partition loop outside its own (a K-blocked product)."""
    s = st.stage(stage)
    op = s.op
    rel = next((r for r in s.relations if type(r) is SplitRel and loop in (r.inner, r.outer)), None)
    if rel is None or not s.loops[loop].is_reduce or len(s.relations) != 1:
        raise ScheduleError(f"rfactor on {stage}: {loop} must be a part of the only split, of a reduce axis")
    if not isinstance(op.body.combiner, str):
        raise ScheduleError(f"rfactor on {stage}: its {op.body.combiner} reduction runs in order (its accumulator is "
                            f"several values, not an associative combiner), so it has no partial results")
    k = next(a for a in op.reduce_axes if a.name == rel.parent)
    factor = s.loops[rel.inner].extent
    if type(factor) is not E.Const:
        raise ScheduleError(f"rfactor on {stage}: the split factor must be an integer, got {factor}")
    f = factor.value
    outer_extent = dim(E.ceildiv(k.upper, f))  # an expression where the axis's extent is a dynamic dimension
    ko, ki = axis_var(rel.outer, outer_extent), axis_var(rel.inner, f)
    value = ko * f + ki
    source = E.substitute(op.body.source, {k: value})
    if not divides(f, k.upper):
        source = E.select(value < k.upper, source, reduce_identity(op.body.combiner, source.dtype))
    other = tuple(a for a in op.reduce_axes if a is not k)
    kept, summed = (ki, ko) if loop == rel.inner else (ko, ki)
    extent = dim(kept.upper)
    name = _fresh_stage_name(st, f"{stage}_rf")
    rf_axes = (kept,) + op.axes
    rf_body = E.Reduce(op.body.combiner, source, (summed,) + other)
    rf = Tensor(name, (extent,) + s.tensor.shape, s.tensor.dtype,
                ComputeOp(name, rf_axes, rf_body, op.tag, op.attrs))
    st.insert_before(s, make_stage(rf))
    kr = axis_var(loop, extent)
    body = E.Reduce(op.body.combiner, E.Load(rf, (kr,) + op.axes), (kr,))
    final = Tensor(stage, s.tensor.shape, s.tensor.dtype, ComputeOp(stage, op.axes, body, op.tag, op.attrs))
    fresh = make_stage(final)
    s.tensor, s.loops, s.leaves, s.relations = final, fresh.loops, fresh.leaves, []
    st.outputs = [final if t.name == stage else t for t in st.outputs]
    st._relink()
    return name


def _find_tensor(st: LoopState, name: str) -> Tensor:
    for t in st.placeholders:
        if t.name == name:
            return t
    return st.stage(name).tensor


def _fresh_stage_name(st: LoopState, base: str) -> str:
    taken = {s.name for s in st.stages} | {t.name for t in st.placeholders}
    name, n = base, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name

