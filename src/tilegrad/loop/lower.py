"""Lowering: a scheduled loop state becomes one loop-IR kernel.

Stages are visited consumers first, so that when a producer is computed at a loop of its consumer, the region
the consumer reads in one iteration of that loop is known (bound inference). Every loop extent is recomputed here
from the root extents (a compute_at stage's roots span only its region), and every axis is expressed in the leaf
loops by reading the split/fuse relations backwards. Non-divisible splits and partial regions get guards, placed
just inside the innermost loop they depend on.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ..errors import LoweringError
from ..schedule.state import THREAD_AXES, LoopState, SplitRel, Stage
from ..te import expr as E
from ..te.simplify import prove_nonneg, simplify
from ..te.tensor import Reducer, Tensor, combine, reduce_identity
from .bounds import bounds, span_bound
from .ir import Allocate, Buffer, For, IfThenElse, Kernel, Store, seq

_TRUE = E.Const(True, "bool")


@dataclasses.dataclass
class _StageInfo:
    stage: Stage
    leaf_vars: list[E.Var]
    kinds: list[str]
    unroll_if: list[E.Expr | None]
    local_index: tuple[E.Expr, ...]  # store index into the stage's own buffer
    source: E.Expr  # the body (reduction source) with axes replaced, inline stages expanded, reading Tensors
    guards: list[E.Expr]
    enclosing: list[E.Var]  # loops around this stage's nest, outermost first
    offsets: tuple[E.Expr, ...] | None = None  # region minimum per dimension (compute_at stages)


def lower(st: LoopState, name: str = "kernel", args: Sequence[Tensor] | None = None) -> Kernel:
    """Lower the scheduled state to a kernel whose parameters are `args` (default: inputs, then outputs)."""
    return _Lowering(st, name, args).run()


class _Lowering:
    def __init__(self, st: LoopState, name: str, args: Sequence[Tensor] | None):
        self.st = st
        self.name = name
        self.inline = {s.name: s for s in st.stages if s.attach == "inline"}
        self.active = [s for s in st.stages if s.attach != "inline"]
        params = list(args) if args is not None else list(st.placeholders) + list(st.outputs)
        self._check_params(params)
        self.buffers: dict[str, Buffer] = {}
        for t in params:
            self.buffers[t.name] = Buffer(t.name, tuple(E.as_expr(d, E.INDEX) for d in t.shape), t.dtype)
        self.params = tuple(self.buffers[t.name] for t in params)
        self.used_names = {t.name for t in params} | {s.name for s in st.stages}
        self.info: dict[str, _StageInfo] = {}
        attached: dict[tuple[str, str] | None, list[Stage]] = {}
        self.allocated: dict[tuple[str, str] | None, list[Stage]] = {}  # the stages whose buffers a loop holds
        for s in self.active:
            attached.setdefault(s.attach if isinstance(s.attach, tuple) else None, []).append(s)
            self.allocated.setdefault(self._storage(s), []).append(s)
        inside: dict[str, list[Stage]] = {}
        for at, stages in attached.items():
            if at is not None:
                inside.setdefault(at[0], []).extend(stages)

        def nested(s: Stage) -> list[Stage]:  # `s` and every stage emitted inside its loops
            return [s] + [q for p in inside.get(s.name, []) for q in nested(p)]
        self.attached = {at: _emission_order(stages, nested) for at, stages in attached.items()}

    def _check_params(self, params: list[Tensor]) -> None:
        names = {t.name for t in params}
        missing = [t.name for t in list(self.st.placeholders) + list(self.st.outputs) if t.name not in names]
        if missing:
            raise LoweringError(f"kernel arguments must include every input and output; missing {missing}")

    def run(self) -> Kernel:
        for s in reversed(self.active):
            self._analyse(s)
        body = seq(self._emit(s) for s in self.attached.get(None, []))
        params = {b.name for b in self.params}
        for s in reversed(self.allocated.get(None, [])):
            if s.name not in params:
                body = Allocate(self.buffers[s.name], body)
        dims = {v.name: v for b in self.params for d in b.shape for v in sorted(E.free_vars(d), key=str)}
        return Kernel(self.name, self.params, body, tuple(dims.values()))

    # -- analysis: extents, axis values, regions --------------------------------------------------------------
    def _expand(self, e: E.Expr) -> E.Expr:
        """Substitute inline stages' bodies for their reads."""
        def go(x: E.Expr) -> E.Expr:
            if type(x) is E.Load and x.buffer.name in self.inline:
                op = self.inline[x.buffer.name].op
                idx = [go(i) for i in x.indices]
                return go(E.substitute(op.body, {a: i for a, i in zip(op.axes, idx)}))
            return E.map_children(x, go)
        return go(e)

    def _loop_var(self, s: Stage, leaf: str, extent: E.Expr) -> E.Var:
        name = leaf if leaf not in self.used_names else f"{s.name}_{leaf}"
        n = 1
        while name in self.used_names:
            name, n = f"{s.name}_{leaf}_{n}", n + 1
        self.used_names.add(name)
        hi = extent.hi - 1 if extent.hi < E.INF else None
        return E.Var(name, E.INDEX, 0, hi, extent)

    def _storage(self, s: Stage) -> tuple[str, str] | None:
        """The loop whose iterations each allocate `s`'s buffer (None: the kernel's top): its compute_at loop, or
        for compute_with the loop that holds its target's buffer."""
        while s.shares_loops:
            s = self.st.stage(s.attach[0])
        return s.attach if isinstance(s.attach, tuple) else None

    def _target(self, s: Stage) -> tuple[_StageInfo, int]:
        """The stage `s` is computed at or with (lowered before it), and how many of its loops are around `s`."""
        target, loop = s.attach
        t_info = self.info.get(target)
        if t_info is None:
            raise LoweringError(f"{s.name} is computed at {target}.{loop}, but {target} is not lowered")
        return t_info, t_info.stage.leaves.index(loop) + 1

    def _enclosing(self, s: Stage) -> list[E.Var]:
        """The loops around `s`'s buffer: a compute_with stage's own leading loops are its target's, inside these."""
        if not isinstance(s.attach, tuple):
            return []
        t_info, depth = self._target(s)
        return t_info.enclosing if s.shares_loops else t_info.enclosing + t_info.leaf_vars[:depth]

    def _leaf_vars(self, s: Stage, extents: dict[str, E.Expr]) -> list[E.Var]:
        """A loop variable per leaf; a compute_with stage's leading leaves are its target's loops, so they must
        have the target's extents."""
        shared: list[E.Var] = []
        if s.shares_loops:
            t_info, depth = self._target(s)
            shared = t_info.leaf_vars[:depth]
            for leaf, v in zip(s.leaves, shared):
                if simplify(extents[leaf] - v.upper) != E.Const(0, E.INDEX):
                    raise LoweringError(f"{s.name} is computed with {s.attach[0]} up to {s.attach[1]}, but its loop "
                                        f"{leaf} runs {extents[leaf]} times where {v.name} runs {v.upper}")
        return shared + [self._loop_var(s, leaf, extents[leaf]) for leaf in s.leaves[len(shared):]]

    def _analyse(self, s: Stage) -> None:
        op = s.op
        enclosing = self._enclosing(s)
        offsets = None
        if enclosing:
            offsets, root_extents = self._region(s, enclosing)
        else:
            root_extents = [E.as_expr(d, E.INDEX) for d in s.tensor.shape]
        root_extents += [a.upper for a in op.reduce_axes]
        extents = _loop_extents(s, root_extents)
        leaf_vars = self._leaf_vars(s, extents)
        values, guards = _axis_values(s, leaf_vars, extents)
        local_index = tuple(values[a.name] for a in op.axes)
        global_index = local_index
        if offsets is not None:
            global_index = tuple(simplify(o + i) for o, i in zip(offsets, local_index))
            for g, d in zip(global_index, s.tensor.shape):
                if not prove_nonneg(g):
                    guards.append(simplify(g >= 0))
                guards.append(simplify(g < d))
        body = op.body.source if type(op.body) is E.Reduce else op.body
        mapping = {a.name: v for a, v in zip(op.axes, global_index)}
        mapping.update({a.name: values[a.name] for a in op.reduce_axes})
        source = self._expand(E.substitute(_reads_simplified(self._expand(body), mapping), mapping))
        guards = [g for g in guards if g != _TRUE]
        kinds, unroll_if = _kinds(s, extents)
        self.info[s.name] = _StageInfo(s, leaf_vars, kinds, unroll_if, local_index, source, guards, enclosing,
                                       offsets)
        if s.name not in self.buffers:
            shape = tuple(self._alloc_extent(e, s) for e in root_extents[:len(op.axes)])
            scope = ("local" if s.scope == "global" else s.scope) if offsets is not None else "global"
            self.buffers[s.name] = Buffer(s.name, shape, s.tensor.dtype, scope)

    def _alloc_extent(self, e: E.Expr, s: Stage) -> E.Expr:
        """A region extent that varies with the enclosing loops is allocated at its largest value."""
        loop_vars = {v.name for info in self.info.values() for v in info.leaf_vars}
        if not {v.name for v in E.free_vars(e)} & loop_vars:
            return e
        largest = min(e.hi, span_bound(e) or E.INF)
        if largest < E.INF:
            return E.Const(int(largest), E.INDEX)
        raise LoweringError(f"cannot bound the size of the region of {s.name} ({e})")

    def _region(self, s: Stage, enclosing: list[E.Var]) -> tuple[tuple[E.Expr, ...], list[E.Expr]]:
        """Per dimension of `s`: the least index its readers in the attach scope read, and the extent read."""
        attach_var = enclosing[-1]
        where = self._storage(s)
        # A shared buffer is one per block: it holds what all the block's threads read, so the thread loops
        # around it count as free, like the loops inside its attach point.
        shared = {v.name: v.upper for v in enclosing if s.scope == "shared" and self._thread_bound(v)}
        reads: list[tuple[E.Expr, ...]] = []
        frees: list[dict[str, E.Expr]] = []
        for r_info in self.info.values():
            loads = [x for x in E.loads(r_info.source) if x.buffer.name == s.name]
            if not loads:
                continue
            chain = r_info.enclosing + r_info.leaf_vars
            if attach_var not in chain:
                raise LoweringError(f"{s.name} is computed at {where[0]}.{where[1]} but "
                                    f"{r_info.stage.name} reads it outside that loop")
            inner = chain[chain.index(attach_var) + 1:]
            free = {**shared, **{v.name: v.upper for v in inner}}
            for ld in loads:
                reads.append(ld.indices)
                frees.append(free)
        if not reads:
            raise LoweringError(f"{s.name} is computed at {where[0]}.{where[1]}, where nothing reads it")
        offsets, extents = [], []
        for d, size in enumerate(s.tensor.shape):
            lo = hi = None
            for idx, free in zip(reads, frees):
                b = bounds(idx[d], free) or (E.Const(0, E.INDEX), E.Const(size - 1, E.INDEX))
                lo = b[0] if lo is None else E.minimum(lo, b[0])
                hi = b[1] if hi is None else E.maximum(hi, b[1])
            lo, hi = simplify(lo), simplify(hi)
            if any(v.name in shared for v in E.free_vars(lo) | E.free_vars(hi)):
                raise LoweringError(f"the shared buffer {s.name} would span a region that varies between the "
                                    f"block's threads (dimension {d}: {lo} to {hi})")
            offsets.append(lo)
            extents.append(simplify(hi - lo + 1))
        return tuple(offsets), extents

    def _thread_bound(self, v: E.Var) -> bool:
        return any(kind in THREAD_AXES for info in self.info.values()
                   for lv, kind in zip(info.leaf_vars, info.kinds) if lv is v)

    # -- emission ---------------------------------------------------------------------------------------------
    def _buffer_expr(self, e: E.Expr) -> E.Expr:
        """Tensor reads become buffer reads; a compute_at buffer is indexed relative to its region."""
        def go(x: E.Expr) -> E.Expr:
            if type(x) is E.Load and isinstance(x.buffer, Tensor):
                idx = tuple(go(i) for i in x.indices)
                info = self.info.get(x.buffer.name)
                if info is not None and info.offsets is not None:
                    idx = tuple(simplify(i - o) for i, o in zip(idx, info.offsets))
                return E.Load(self.buffers[x.buffer.name], idx)
            return E.map_children(x, go)
        return simplify(go(e))

    def _emit(self, s: Stage) -> object:
        info = self.info[s.name]
        buf = self.buffers[s.name]
        op = s.op
        n = len(info.leaf_vars)
        shared = self._target(s)[1] if s.shares_loops else 0  # leading loops that are the target's, not emitted here
        depth = {v.name: i for i, v in enumerate(info.leaf_vars)}

        def dep(g: E.Expr) -> int:
            return max((depth[v.name] for v in E.free_vars(g) if v.name in depth), default=-1)

        value = self._buffer_expr(info.source)
        idx = info.local_index
        init_stmt = None
        first_reduce = n
        wrap = None  # an in-order reduction's scalars and its result, around its reduction loops
        if type(op.body) is E.Reduce:
            comb = op.body.combiner
            first_reduce = next((i for i, leaf in enumerate(s.leaves) if s.loops[leaf].is_reduce), n)
            if first_reduce < shared:
                raise LoweringError(f"{s.name}: its reduction loop {s.leaves[first_reduce]} cannot be a loop it "
                                    f"shares with {s.attach[0]}")
            spatial_after = [i for i in range(first_reduce, n) if not s.loops[s.leaves[i]].is_reduce]
            init_guards = [g for g in info.guards
                           if first_reduce - 1 <= dep(g) and all(not s.loops[s.leaves[depth[v.name]]].is_reduce
                                                             for v in E.free_vars(g) if v.name in depth)]
            if isinstance(comb, Reducer):
                if spatial_after:
                    raise LoweringError(f"{s.name}: the {comb} reduction keeps its state in scalars, so no spatial "
                                        f"loop may run inside its reduction loops ({s.leaves[spatial_after[0]]} "
                                        f"does)")
                main, init_stmt, wrap = _fold(s.name, comb, buf, idx, value, init_guards)
            else:
                main = Store(buf, idx, combine(comb, E.Load(buf, idx), value))
                init_stmt = _guard(Store(buf, idx, reduce_identity(comb, buf.dtype)), init_guards)
            for i in reversed(spatial_after):
                init_stmt = For(info.leaf_vars[i], info.leaf_vars[i].upper, info.kinds[i], init_stmt,
                                info.unroll_if[i])
        else:
            main = Store(buf, idx, value)
        by_depth: dict[int, list[E.Expr]] = {}
        for g in info.guards:
            by_depth.setdefault(dep(g), []).append(g)
        body = _guard(main, by_depth.get(n - 1, []))
        for d in range(n - 1, shared - 1, -1):
            content = [self._emit_attached(s, s.leaves[d])]
            if d == first_reduce - 1:
                content.append(init_stmt)
            inner = seq(content + [body])
            if d == first_reduce - 1 and wrap is not None:
                inner = wrap(inner)
            inner = self._wrap_allocs(s, s.leaves[d], inner)
            loop = For(info.leaf_vars[d], info.leaf_vars[d].upper, info.kinds[d], inner, info.unroll_if[d])
            body = _guard(loop, by_depth.get(d - 1, []) if d > shared else [])
        if first_reduce == shared:
            body = seq([init_stmt, body])
            if wrap is not None:
                body = wrap(body)
        if shared:  # what depends on the shared loops only is guarded inside them, around this stage's nest
            body = _guard(body, [g for g in info.guards if dep(g) < shared])
        return body

    def _emit_attached(self, s: Stage, leaf: str):
        stages = self.attached.get((s.name, leaf), [])
        return seq(self._emit(p) for p in stages) if stages else None

    def _wrap_allocs(self, s: Stage, leaf: str, body):
        for p in reversed(self.allocated.get((s.name, leaf), [])):
            body = Allocate(self.buffers[p.name], body)
        return body


def _emission_order(stages: list[Stage], nested) -> list[Stage]:
    """The stages emitted at one place, each after those whose buffers it or a stage nested in it reads. The
    kernel's order (producers first) is that order, but for compute_with: a stage that reads a stage computed
    with another must follow that other's nest."""
    written = {s.name: {q.name for q in nested(s)} for s in stages}
    reads = {s.name: {t.name for q in nested(s) for t in q.op.inputs} - written[s.name] for s in stages}
    order: list[Stage] = []
    pending = list(stages)
    while pending:
        ready = next((s for s in pending if not any(reads[s.name] & written[o.name] for o in pending if o is not s)),
                     None)
        if ready is None:
            raise LoweringError(f"the stages {[s.name for s in pending]} each read another's buffer before it is "
                                f"computed (a compute_with nest reads a stage that reads one of its own)")
        order.append(ready)
        pending.remove(ready)
    return order


def _loop_extents(s: Stage, root_extents: list[E.Expr]) -> dict[str, E.Expr]:
    """Every loop's extent, derived forward through the splits and fuses from the extents of the roots."""
    extents = dict(zip(s.roots, root_extents))
    for rel in s.relations:
        if type(rel) is SplitRel:
            parent = extents[rel.parent]
            if rel.factor is not None:
                inner, outer = rel.factor, simplify(E.ceildiv(parent, rel.factor))
            else:
                outer, inner = rel.nparts, simplify(E.ceildiv(parent, rel.nparts))
            extents[rel.outer], extents[rel.inner] = outer, inner
        else:
            extents[rel.fused] = simplify(extents[rel.outer] * extents[rel.inner])
    return extents


def _kinds(s: Stage, extents: dict[str, E.Expr]) -> tuple[list[str], list[E.Expr | None]]:
    """Loop kinds after auto-unroll: the innermost serial loops whose combined trip count is within the stage's
    budget are unrolled. With symbolic extents or budget the decision is left as a condition per loop."""
    kinds = [s.loops[leaf].kind for leaf in s.leaves]
    conds: list[E.Expr | None] = [None] * len(kinds)
    budget = E.as_expr(s.auto_unroll_max_step)
    if type(budget) is E.Const and not budget.value:
        return kinds, conds
    trips: E.Expr = E.Const(1, E.INDEX)
    for i in range(len(kinds) - 1, -1, -1):
        if kinds[i] not in ("serial", "unrolled"):
            break
        trips = simplify(trips * extents[s.leaves[i]])
        fits = simplify(trips <= budget)
        if type(fits) is E.Const:
            if not fits.value:
                break
            kinds[i] = "unrolled"
        else:
            conds[i] = fits
    return kinds, conds


def _axis_values(s: Stage, leaf_vars: list[E.Var], extents: dict[str, E.Expr]):
    """Every loop's value in terms of the leaf loops (relations read backwards), and the guards that splits whose
    parts overshoot their parent need."""
    values: dict[str, E.Expr] = {leaf: v for leaf, v in zip(s.leaves, leaf_vars)}
    guards: list[E.Expr] = []
    for rel in reversed(s.relations):
        if type(rel) is SplitRel:
            value = simplify(values[rel.outer] * extents[rel.inner] + values[rel.inner])
            values[rel.parent] = value
            if not rel.exact:
                guards.append(simplify(value < extents[rel.parent]))
        else:
            inner_ext = extents[rel.inner]
            values[rel.outer] = simplify(values[rel.fused] // inner_ext)
            values[rel.inner] = simplify(values[rel.fused] % inner_ext)
    return values, guards


def _reads_simplified(body: E.Expr, mapping: dict[str, E.Expr]) -> E.Expr:
    """`body` with a read's indices simplified while they are still in the compute's axes, whose ranges are exact,
    where that leaves fewer divisions in its element number once `mapping` puts the loops in. An inlined
    reshape's `q % 7 + q // 7 % 7 * 7` over q < 49 is q; once a split that overshoots (49 by 16) gives q as
    `q_0 * 16 + q_1`, which reaches 63 in the last tile, no range proves the divisions away, and every element
    computed them and gathered its operand. Simplified apart, though, an index's dimensions may lose the sum that
    its element number merges whole: a flat reshape's (i // 64, i % 64) over a split i."""
    def divisions(load_indices: tuple[E.Expr, ...], buffer) -> int:
        flat = simplify(E.flat_index(buffer, [E.substitute(i, mapping) for i in load_indices]))
        stack, count = [flat], 0
        while stack:
            x = stack.pop()
            count += type(x) in (E.FloorDiv, E.FloorMod)
            stack.extend(x.children())
        return count

    def go(x: E.Expr) -> E.Expr:
        if type(x) is E.Load:
            indices = tuple(go(i) for i in x.indices)
            simpler = tuple(simplify(i) for i in indices)
            if simpler != indices and divisions(simpler, x.buffer) < divisions(indices, x.buffer):
                indices = simpler
            return E.Load(x.buffer, indices)
        return E.map_children(x, go)
    return go(body)


def _fold(name: str, reducer: Reducer, buf: Buffer, idx, value: E.Expr, guards: list[E.Expr]):
    """An in-order reduction's statements: the step (every new component from the old ones, then copied back),
    the initialisation, and a function that wraps the reduction loops with the components' scalars and the store
    of the result."""
    one = (E.Const(0, E.INDEX),)
    states = [Buffer(f"{name}_state{k}", (E.Const(1, E.INDEX),), buf.dtype, "local")
              for k in range(len(reducer.identity))]
    nexts = [Buffer(f"{name}_next{k}", (E.Const(1, E.INDEX),), buf.dtype, "local") for k in range(len(states))]
    old = tuple(E.Load(b, one) for b in states)
    new = reducer.update(old, value)
    step = seq([Store(b, one, simplify(e)) for b, e in zip(nexts, new)]
               + [Store(b, one, E.Load(t, one)) for b, t in zip(states, nexts)])
    init = _guard(seq([Store(b, one, E.Const(v, buf.dtype)) for b, v in zip(states, reducer.identity)]), guards)
    result = _guard(Store(buf, idx, simplify(reducer.result(old))), guards)

    def wrap(loops):
        out = seq([loops, result])
        for b in [*states, *nexts]:
            out = Allocate(b, out)
        return out
    return step, init, wrap


def _guard(stmt, conds: list[E.Expr]):
    cond = E.all_of(conds)
    if cond == _TRUE:
        return stmt
    return IfThenElse(cond, stmt)
