"""Program features for the cost model: one row per store of a loop-IR kernel, concrete or symbolic.

Every feature is an expression. On a concrete kernel the expressions fold to constants as they are built; on a
symbolic kernel (a sketch lowered with its parameters left as variables) they are formulas of those parameters,
and substituting an assignment gives exactly the features of the kernel lowered from that assignment (DESIGN §3.3).
Any decision that depends on a parameter is an `E.select`, `min` or `max`; Python branches only on constants and on
the structure of the program (loops, stores, operators), which parameters do not change.

Features are raw counts and sizes (the cost model takes log2(1 + x)). A kernel with loops bound to GPU blocks or
threads has `gpu.GPU_FEATURE_NAMES` after the others (threads, blocks, shared bytes, registers, coalescing, bank
conflicts), so a GPU task's vectors are longer than a CPU task's and its cost model is its own. `docs/features.md` lists and explains each
one. `formulas.FeatureFormulas` compiles the formulas of a symbolic kernel into one vectorised NumPy function.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...loop.ir import Allocate, Buffer, For, IfThenElse, Kernel, Seq, Stmt, Store
from ...te import expr as E
from . import gpu as gpu_features
from .access import (ONE, ZERO, Access, BufferUse, Nest, NestLoop, buffer_uses, elem_bytes, has_load, ind,
                     index_ops, product, total)

F64 = "float64"

COMPUTE = ("float_mad", "float_addsub", "float_mul", "float_div", "float_cmp", "float_math", "float_other",
           "int_addsub", "int_mul", "int_divmod", "int_cmp", "bool_op", "select_op", "loads")
LOOPS = ("num_loops", "trip_count", "innermost_extent", "spatial_prod", "reduce_prod")
POSITIONS = ("none", "inner_spatial", "middle_spatial", "outer_spatial", "inner_reduce", "middle_reduce",
             "outer_reduce", "mixed")
ANNOTATIONS = (("vec", "vectorized"), ("unroll", "unrolled"), ("parallel", "parallel"))
BUFFER = ("acc_read", "acc_write", "acc_read_write", "bytes", "unique_bytes", "lines", "unique_lines",
          "reuse_loop", "reuse_serial", "reuse_none", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
          "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct", "unique_lines_d_reuse_ct", "stride")
BUFFER_SLOTS = 5
CURVE_POINTS = 10
ALLOC = ("alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod", "local_bytes")
KERNEL = ("is_output_store", "output_written_once", "kernel_stores")

STORE_SLOTS = 16  # stores a program vector lists one by one: all of them in 97% of the zoo's programs


def store_feature_count(gpu: bool) -> int:
    """The features of one store: a CPU or a GPU kernel's."""
    return len(FEATURE_NAMES) + (len(gpu_features.GPU_FEATURE_NAMES) if gpu else 0)


def feature_count(gpu: bool) -> int:
    """The length of a program's vector (`program_vector`): a CPU or a GPU kernel's."""
    return (2 + STORE_SLOTS) * store_feature_count(gpu)


FEATURE_NAMES: tuple[str, ...] = (
    COMPUTE + LOOPS
    + tuple(f"{short}_{f}" for short, _ in ANNOTATIONS for f in ("num", "prod", "len")
            + tuple(f"pos_{p}" for p in POSITIONS))
    + tuple(f"b{k}_{f}" for k in range(BUFFER_SLOTS) for f in BUFFER)
    + tuple(f"ai_{k}" for k in range(1, CURVE_POINTS + 1))
    + ALLOC + KERNEL
)


@dataclasses.dataclass(frozen=True)
class FeatureRows:
    """Per store (in program order): the name of the buffer it writes and its features (expressions, in the
    order of `names`; integer or float64 dtype)."""

    names: tuple[str, ...]
    stores: tuple[str, ...]
    rows: tuple[tuple[E.Expr, ...], ...]

    def to_numpy(self) -> np.ndarray:
        """The values of a concrete program, shape (n_stores, n_features); an error if any feature is a formula."""
        out = np.zeros((len(self.rows), len(self.names)), np.float64)
        for s, row in enumerate(self.rows):
            for f, e in enumerate(row):
                if type(e) is not E.Const:
                    raise ValueError(f"feature {self.names[f]} of store {s} ({self.stores[s]}) is the formula {e}; "
                                     "bind the schedule's variables, or use FeatureFormulas")
                out[s, f] = float(e.value)
        return out

    def at(self, values: dict[str, int]) -> FeatureRows:
        """The rows with the variables named in `values` (a kernel's dynamic dimensions) bound to numbers: the
        features at one point of the dimensions, formulas of the schedule's variables alone."""
        memo: dict[int, E.Expr] = {}

        def bind(x: E.Expr) -> E.Expr:
            if type(x) is E.Var:
                return E.const(int(values[x.name]), x.dtype) if x.name in values else x
            if type(x) is E.Const:
                return x
            out = memo.get(id(x))
            if out is None:
                out = memo[id(x)] = E.map_children(x, bind)
            return out

        return FeatureRows(self.names, self.stores, tuple(tuple(bind(e) for e in row) for row in self.rows))


def extract(kernel: Kernel, gpu: bool | None = None) -> FeatureRows:
    """The features of every store of `kernel`; with `gpu` (by default, where a loop is bound to a GPU axis) the
    GPU features too."""
    sites = list(_store_sites(kernel.body, (), ()))
    written = {id(site.store.buffer) for site in sites}
    outputs = [b for b in kernel.params if id(b) in written]
    analyses = [_StoreAnalysis(site) for site in sites]
    once = _written_once(outputs, analyses)
    kernel_feats = {"output_written_once": once, "kernel_stores": E.Const(len(sites), E.INDEX)}
    params = {id(b) for b in kernel.params}
    gpu = gpu_features.is_gpu_kernel(kernel) if gpu is None else gpu
    names = FEATURE_NAMES + gpu_features.GPU_FEATURE_NAMES if gpu else FEATURE_NAMES
    if gpu:
        kernel_feats.update(gpu_features.kernel_features(kernel))
    rows = []
    for a in analyses:
        feats = a.features()
        feats.update(kernel_feats)
        feats["is_output_store"] = ONE if id(a.site.store.buffer) in params else ZERO
        if gpu:
            feats.update(gpu_features.store_features(a.site.store, a.site.loops))
        rows.append(tuple(feats[n] for n in names))
    return FeatureRows(names, tuple(s.store.buffer.name for s in sites), tuple(rows))


def features(kernel: Kernel, gpu: bool | None = None) -> np.ndarray:
    """The features of a concrete kernel, shape (n_stores, n_features)."""
    return extract(kernel, gpu).to_numpy()


def program_vector(rows: np.ndarray) -> np.ndarray:
    """What the cost models read of a program: its `aggregate`, then its `store_slots`, flattened. `rows` is
    (n_stores, F) or (batch, n_stores, F); the result is ((2 + STORE_SLOTS) F,) or (batch, (2 + STORE_SLOTS) F).
    The sums and maxes blur what each store does; the slots keep it, for a model that reads each store
    (`cost_model/mlp.py`) or a tree that splits on any of them."""
    rows = np.asarray(rows, np.float64)
    slots = store_slots(rows)
    return np.concatenate([aggregate(rows), slots.reshape(slots.shape[:-2] + (-1,))], axis=-1)


def aggregate(rows: np.ndarray) -> np.ndarray:
    """sign(x) log2(1 + |x|) of the sum over stores, then of the max over stores. `rows` is (n_stores, F) or
    (batch, n_stores, F); the result is (2F,) or (batch, 2F)."""
    rows = np.asarray(rows, np.float64)
    if rows.shape[-2] == 0:
        return np.zeros(rows.shape[:-2] + (2 * rows.shape[-1],))
    return signed_log(np.concatenate([rows.sum(axis=-2), rows.max(axis=-2)], axis=-1))


def store_slots(rows: np.ndarray) -> np.ndarray:
    """sign(x) log2(1 + |x|) of each store's row, in program order, in STORE_SLOTS slots: (..., STORE_SLOTS, F).
    The stores from the last slot on are summed into it; the slots of absent stores are NaN (missing)."""
    rows = fold_stores(rows)
    out = np.full(rows.shape[:-2] + (STORE_SLOTS, rows.shape[-1]), np.nan)
    out[..., :rows.shape[-2], :] = signed_log(rows)
    return out


def fold_stores(rows: np.ndarray) -> np.ndarray:
    """`rows` (..., n_stores, F) with the stores from the last slot on summed into one: (..., min(n_stores,
    STORE_SLOTS), F)."""
    if rows.shape[-2] <= STORE_SLOTS:
        return rows
    return np.concatenate([rows[..., :STORE_SLOTS - 1, :], rows[..., STORE_SLOTS - 1:, :].sum(axis=-2, keepdims=True)],
                          axis=-2)


def aggregate_part(x: np.ndarray) -> np.ndarray:
    """The `aggregate` columns of program vectors `x` (..., (2 + STORE_SLOTS) F)."""
    return x[..., :2 * (x.shape[-1] // (2 + STORE_SLOTS))]


def signed_log(x: np.ndarray) -> np.ndarray:
    """sign(x) log2(1 + |x|): counts and sizes spanning many orders of magnitude, on a scale a model can read."""
    return np.sign(x) * np.log2(1.0 + np.abs(x))


# ---------------------------------------------------------------------------------------------------------------
# the stores and their context


@dataclasses.dataclass(frozen=True)
class _Site:
    store: Store
    loops: tuple[NestLoop, ...]
    allocs: tuple[tuple[Buffer, int], ...]  # buffers allocated around the store, with the loop depth of each


def _store_sites(s: Stmt, loops: tuple, allocs: tuple, middle: dict | None = None):
    """Each store with its loops and allocations. A loop whose extent reads enclosing loops (the partial tiles of
    a compute_at region) is measured at the middle iteration of those loops, where tiles are whole."""
    middle = {} if middle is None else middle
    if isinstance(s, Store):
        yield _Site(s, loops, allocs)
    elif isinstance(s, For):
        extent = E.substitute(s.extent, middle)
        if s.kind == "unrolled":
            unrolled = E.Const(True, "bool")
        else:
            unrolled = E.substitute(s.unroll_if, middle) if s.unroll_if is not None else E.Const(False, "bool")
        inner = {**middle, s.var.name: (extent - 1) // 2}
        yield from _store_sites(s.body, loops + (NestLoop(s.var, extent, s.kind, unrolled),), allocs, inner)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from _store_sites(x, loops, allocs, middle)
    elif isinstance(s, IfThenElse):  # guards are ignored: a store counts every iteration of its loops
        yield from _store_sites(s.then, loops, allocs, middle)
        if s.orelse is not None:
            yield from _store_sites(s.orelse, loops, allocs, middle)
    elif isinstance(s, Allocate):
        yield from _store_sites(s.body, loops, allocs + ((s.buffer, len(loops)),), middle)
    else:
        raise TypeError(f"features: unknown statement {type(s).__name__}")


def _written_once(outputs: list[Buffer], analyses: list["_StoreAnalysis"]) -> E.Expr:
    """1 if every output element is stored exactly once: the stores into it run as many times as it has elements,
    and none of them reads it (no accumulation in place)."""
    ok: E.Expr = E.Const(bool(outputs), "bool")
    for b in outputs:
        mine = [a for a in analyses if a.site.store.buffer is b]
        if any(u.buffer is b and u.reads for a in mine for u in a.uses):
            return ZERO
        ok = ok & total(a.nest.trips for a in mine).eq(b.size())
    return ind(ok)


# ---------------------------------------------------------------------------------------------------------------
# one store


class _StoreAnalysis:
    def __init__(self, site: _Site):
        self.site = site
        self.nest = Nest(site.loops)
        store = site.store
        self.counts = {k: ZERO for k in COMPUTE}
        loads: dict[tuple, Access] = {}
        self._count(store.value, loads)
        for i in store.indices:
            self._count(i, loads)
        target = Access(store.buffer, store.indices, True, 1)
        self.uses = buffer_uses(target, list(loads.values()), self.nest)
        self.target = self.uses[0]
        n = len(site.loops)
        self.spatial = [self._target_reads(i) for i in range(n)]
        self._inside: dict[int, E.Expr] = {}

    # -- operation counts (per iteration) ------------------------------------------------------------------------
    def _add(self, key: str, amount) -> None:
        self.counts[key] = self.counts[key] + amount

    def _count(self, root: E.Expr, loads: dict) -> None:
        """Operations of the expression as the code spells it (a tree): each distinct node is analysed once and
        weighted by how many times it occurs, so shared subexpressions (transform matrices) stay linear."""
        for e, times in _occurrences(root, self._is_leaf):
            t = type(e)
            if t is E.Const or t is E.Var:
                continue
            if E.is_int(e.dtype) and not has_load(e):  # an index: counted from its values, not its spelling
                add, mul, dm = index_ops(self.nest.index_map(e), self.nest)
                self._add("int_addsub", add * times)
                self._add("int_mul", mul * times)
                self._add("int_divmod", dm * times)
            elif t is E.Load:
                self._add("loads", E.Const(times, E.INDEX))
                key = (id(e.buffer), e.indices)
                if key in loads:
                    a = loads[key]
                    loads[key] = Access(a.buffer, a.indices, False, a.count + times)
                else:
                    loads[key] = Access(e.buffer, e.indices, False, times)
            else:
                key = _op_kind(e)
                if key is not None:
                    self._add(key, E.Const(times, E.INDEX))
                if t in (E.Add, E.Sub) and E.is_float(e.dtype) and (type(e.a) is E.Mul or type(e.b) is E.Mul):
                    self._add("float_mad", E.Const(times, E.INDEX))

    @staticmethod
    def _is_leaf(e: E.Expr) -> bool:
        t = type(e)
        return t is E.Const or t is E.Var or (E.is_int(e.dtype) and t is not E.Load and not has_load(e))

    def _target_reads(self, i: int) -> E.Expr:
        out = E.Const(False, "bool")
        for m in self.target.maps[0]:
            out = out | m.reads(i)
        return out

    # -- the row -------------------------------------------------------------------------------------------------
    def features(self) -> dict[str, E.Expr]:
        nest = self.nest
        out = {k: v * nest.trips for k, v in self.counts.items()}
        out.update(self._loop_features())
        for short, kind in ANNOTATIONS:
            out.update(self._annotation(short, kind))
        out.update(self._buffer_features())
        out.update(self._curve())
        out.update(self._alloc())
        return out

    def _loop_features(self) -> dict[str, E.Expr]:
        nest = self.nest
        spatial = product(E.select(s, x, ONE) for s, x in zip(self.spatial, nest.extents))
        return {
            "num_loops": E.Const(len(nest.loops), E.INDEX),
            "trip_count": nest.trips,
            "innermost_extent": nest.extents[-1] if nest.loops else ONE,
            "spatial_prod": spatial,
            "reduce_prod": nest.trips // spatial,
        }

    def _annotation(self, short: str, kind: str) -> dict[str, E.Expr]:
        """Number, extent product and innermost extent of the loops of `kind`, and where the innermost one is."""
        loops = self.nest.loops
        n = len(loops)
        flags = [lp.unrolled if kind == "unrolled" else E.Const(lp.kind == kind, "bool") for lp in loops]
        num, prod, length, cat = ZERO, ONE, ZERO, ZERO
        any_spatial = any_reduce = E.Const(False, "bool")
        for i, (lp, flag) in enumerate(zip(loops, flags)):
            num = num + ind(flag)
            prod = prod * E.select(flag, lp.extent, ONE)
            length = E.select(flag, lp.extent, length)
            where = 1 if i == n - 1 else 3 if i == 0 else 2  # inner, outer, middle
            cat = E.select(flag, E.select(self.spatial[i], E.Const(where, E.INDEX), E.Const(where + 3, E.INDEX)),
                           cat)
            any_spatial = any_spatial | (flag & self.spatial[i])
            any_reduce = any_reduce | (flag & ~self.spatial[i])
        cat = E.select(any_spatial & any_reduce, E.Const(7, E.INDEX), cat)
        out = {f"{short}_num": num, f"{short}_prod": prod, f"{short}_len": length}
        for k, p in enumerate(POSITIONS):
            out[f"{short}_pos_{p}"] = ind(cat.eq(k))
        return out

    # -- memory --------------------------------------------------------------------------------------------------
    def _buffer_features(self) -> dict[str, E.Expr]:
        per = [self._buffer_row(u) for u in self.uses]
        ranks = _ranks([row["bytes"] for row in per])
        out = {}
        for k in range(BUFFER_SLOTS):
            for f in BUFFER:
                value: E.Expr = ZERO
                for rank, row in zip(ranks, per):
                    x = row[f]
                    value = E.select(rank.eq(k), x, value if x.dtype == value.dtype else E.cast(x.dtype, value))
                out[f"b{k}_{f}"] = value
        return out

    def _buffer_row(self, u: BufferUse) -> dict[str, E.Expr]:
        nest = self.nest
        n = len(nest.loops)
        row = {
            "acc_read": ONE if u.reads and not u.writes else ZERO,
            "acc_write": ONE if u.writes and not u.reads else ZERO,
            "acc_read_write": ONE if u.reads and u.writes else ZERO,
            "bytes": nest.trips * u.occurrences * u.eb,
            "unique_bytes": u.footprint(0) * u.eb,
            "lines": u.lines(),
            "unique_lines": u.unique_lines(),
            "stride": u.stride(),
        }
        # loop reuse: the innermost loop of more than one iteration along which no access of the buffer moves
        has_loop = E.Const(False, "bool")
        dis_iter, dis_bytes, count = ZERO, ZERO, ZERO
        for i in range(n):
            reuse = ~u.moves(i) & (nest.extents[i] > 1)
            has_loop = has_loop | reuse
            dis_iter = E.select(reuse, nest.inner_product(i + 1), dis_iter)
            dis_bytes = E.select(reuse, self._bytes_inside(i + 1), dis_bytes)
            count = E.select(reuse, nest.extents[i], count)
        positions = len({a.indices for a in u.accesses})
        serial = positions > 1
        if serial:  # several elements of the buffer in one iteration (a stencil's taps): reused within it
            dis_iter = E.select(has_loop, dis_iter, ONE)
            dis_bytes = E.select(has_loop, dis_bytes, self._bytes_inside(n))
            count = E.select(has_loop, count, E.Const(positions - 1, E.INDEX))
        row["reuse_loop"] = ind(has_loop)
        row["reuse_serial"] = ind(~has_loop) if serial else ZERO
        row["reuse_none"] = ZERO if serial else ind(~has_loop)
        row["reuse_dis_iter"], row["reuse_dis_bytes"], row["reuse_ct"] = dis_iter, dis_bytes, count
        per_reuse = E.cast(F64, E.maximum(count, ONE))
        for f in ("bytes", "unique_bytes", "lines", "unique_lines"):
            row[f"{f}_d_reuse_ct"] = E.cast(F64, row[f]) / per_reuse
        return row

    def _bytes_inside(self, level: int) -> E.Expr:
        """Bytes of distinct elements the store touches while the loops from `level` inwards run."""
        out = self._inside.get(level)
        if out is None:
            out = self._inside[level] = total(u.footprint(level) * u.eb for u in self.uses)
        return out

    def _curve(self) -> dict[str, E.Expr]:
        """Arithmetic intensity (float ops per byte touched) of the k innermost loops, k = 1..CURVE_POINTS."""
        nest = self.nest
        n = len(nest.loops)
        flops = total(self.counts[k] for k in COMPUTE if k.startswith("float_") and k != "float_mad")
        out = {}
        for k in range(1, CURVE_POINTS + 1):
            level = max(n - k, 0)
            ops = E.cast(F64, flops * nest.inner_product(level))
            out[f"ai_{k}"] = ops / E.cast(F64, E.maximum(self._bytes_inside(level), ONE))
        return out

    def _alloc(self) -> dict[str, E.Expr]:
        """The store's target if the kernel allocates it, and the local buffers in scope."""
        nest = self.nest
        target = self.site.store.buffer
        local = total(b.size() * elem_bytes(b.dtype) for b, _ in self.site.allocs if b.scope == "local")
        out = {"alloc_size": ZERO, "alloc_prod": ZERO, "alloc_outer_prod": ZERO, "alloc_inner_prod": ZERO,
               "local_bytes": local}
        for b, depth in self.site.allocs:
            if b is target:
                size = b.size() * elem_bytes(b.dtype)
                outer = product(nest.extents[:depth])
                out.update(alloc_size=size, alloc_prod=size * outer, alloc_outer_prod=outer,
                           alloc_inner_prod=product(nest.extents[depth:]))
        return out


def _ranks(values: list[E.Expr]) -> list[E.Expr]:
    """Each value's place when sorted largest first, ties in list order."""
    out = []
    for i, v in enumerate(values):
        r = ZERO
        for j, w in enumerate(values):
            if j != i:
                r = r + ind(w > v if j > i else w >= v)
        out.append(r)
    return out


_FLOAT_KINDS = {E.Add: "float_addsub", E.Sub: "float_addsub", E.Mul: "float_mul", E.Div: "float_div",
                E.Min: "float_cmp", E.Max: "float_cmp"}
_INT_KINDS = {E.Add: "int_addsub", E.Sub: "int_addsub", E.Mul: "int_mul", E.FloorDiv: "int_divmod",
              E.FloorMod: "int_divmod", E.Min: "int_cmp", E.Max: "int_cmp"}


def _occurrences(root: E.Expr, is_leaf) -> list[tuple[E.Expr, int]]:
    """Each distinct node of the expression DAG under `root` (not looking inside leaves) with the number of times
    it occurs in the expression written out as a tree."""
    order: list[E.Expr] = []
    seen: set[int] = set()
    stack: list[tuple[E.Expr, bool]] = [(root, False)]
    while stack:  # post-order over distinct nodes
        e, done = stack.pop()
        if done:
            order.append(e)
            continue
        if id(e) in seen:
            continue
        seen.add(id(e))
        stack.append((e, True))
        if not is_leaf(e):
            stack.extend((k, False) for k in e.children())
    times: dict[int, int] = {id(root): 1}
    for e in reversed(order):  # parents before children
        m = times.get(id(e), 0)
        if m and not is_leaf(e):
            for k in e.children():
                times[id(k)] = times.get(id(k), 0) + m
    first: list[E.Expr] = []  # the order the written-out tree first meets each node: left to right, parents first
    met: set[int] = set()
    walk = [root]
    while walk:
        e = walk.pop()
        if id(e) in met:
            continue
        met.add(id(e))
        first.append(e)
        if not is_leaf(e):
            walk.extend(reversed(e.children()))
    return [(e, times[id(e)]) for e in first if times.get(id(e))]


def _op_kind(e: E.Expr) -> str | None:
    t = type(e)
    if t is E.Select:
        return "select_op"
    if t in (E.And, E.Or, E.Not):
        return "bool_op"
    if isinstance(e, E.Compare):
        return "float_cmp" if E.is_float(e.a.dtype) else "int_cmp"
    if isinstance(e, E.Call):
        return "float_math"
    if t is E.Cast:
        return "float_other" if E.is_float(e.dtype) or E.is_float(e.a.dtype) else None
    table = _FLOAT_KINDS if E.is_float(e.dtype) else _INT_KINDS
    return table.get(t)
