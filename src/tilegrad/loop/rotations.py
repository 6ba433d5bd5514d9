"""Target lowering of a vector's lanes summed from k vectors, each rotated within groups of k lanes, to one call.

The grouped convolution of te/nn/lane_groups.py ends each register tile with

    for l in 0..T:                     # the lanes of one output vector
      out[.. l] = acc[a0 + l] + acc[a1 + rot(l, 1)] + .. + acc[a(k-1) + rot(l, k - 1)]

rot(l, d) = l - l % k + (l % k + d) % k, a rotation by d inside each group of k lanes. gcc vectorises such a
loop as gathers, or, unrolled, straight-line code that permutes whole vectors where it kept the accumulators in
memory and extracts every lane where it kept them in registers (both seen in one kernel). `use_rotations` gives
each such loop, the offsets checked lane by lane, to `Intrinsic("rotate_sum_<k>x<T>", (out, acc@a0, ..))`: the
renderer's helper loads each vector whole, permutes it by a constant shuffle and adds. Any other loop stays."""

from __future__ import annotations

from ..te import expr as E
from ..te.simplify import simplify
from .ir import For, Intrinsic, Kernel, Store, rewrite_nests

LANES = (8, 16)  # the vector widths (floats) the helpers are written for
GROUPS = (2, 4, 8)  # the group sizes, each smaller than the vector


def rotation(k: int, d: int, lanes: int) -> list[int]:
    """The lane each lane reads when a vector is rotated by d inside groups of k: rot(l, d) above."""
    return [l - l % k + (l % k + d) % k for l in range(lanes)]


def use_rotations(k: Kernel) -> Kernel:
    """`k` with each rotated sum of vectors given to the intrinsic; `k` itself when there is none."""
    body = rewrite_nests(k.body, _rotated_sum)
    return k if body is k.body else Kernel(k.name, k.params, body, k.dims)


def _rotated_sum(s: For) -> Intrinsic | None:
    """The intrinsic for the loop `s` over one vector's lanes, or None if it is not a rotated sum."""
    store = s.body
    if not (type(s.extent) is E.Const and s.extent.value in LANES and isinstance(store, Store)
            and store.buffer.dtype == "float32"):
        return None
    lanes, lane = s.extent.value, s.var
    loads = _summands(store.value)
    if len(loads) not in GROUPS or len(loads) >= lanes or len({ld.buffer.name for ld in loads}) != 1:
        return None
    if _offsets(E.flat_index(store.buffer, store.indices), lane, lanes) != list(range(lanes)):
        return None
    base = E.substitute(E.flat_index(loads[0].buffer, loads[0].indices), {lane: E.Const(0, lane.dtype)})
    by_rotation = {}
    for ld in loads:
        offsets = _offsets(E.flat_index(ld.buffer, ld.indices), lane, lanes, base)
        if offsets is None or ld.buffer.dtype != "float32":
            return None
        start = min(offsets)
        shift = next((d for d in range(len(loads)) if [o - start for o in offsets] == rotation(len(loads), d, lanes)),
                     None)
        if shift is None or shift in by_rotation:
            return None
        by_rotation[shift] = _at(ld, lane, offsets.index(start))
    out = _at(store, lane, 0)
    return Intrinsic(f"rotate_sum_{len(loads)}x{lanes}", (out, *(by_rotation[d] for d in range(len(loads)))))


def _summands(e: E.Expr) -> list[E.Load]:
    """The loads an addition tree sums, or [] if anything else is in it."""
    if type(e) is E.Load:
        return [e]
    if type(e) is E.Add:
        a, b = _summands(e.a), _summands(e.b)
        return a + b if a and b else []
    return []


def _offsets(flat: E.Expr, lane: E.Var, lanes: int, base: E.Expr | None = None) -> list[int] | None:
    """The element each lane reads or writes, from `base` (the lane-0 element when None): constants, or None."""
    origin = E.substitute(flat, {lane: E.Const(0, lane.dtype)}) if base is None else base
    out = []
    for value in range(lanes):
        delta = simplify(E.substitute(flat, {lane: E.Const(value, lane.dtype)}) - origin)
        if type(delta) is not E.Const:
            return None
        out.append(delta.value)
    return out


def _at(access, lane: E.Var, value: int) -> tuple:
    """A load's or store's (buffer, indices) at lane `value`."""
    fixed = {lane: E.Const(value, lane.dtype)}
    return access.buffer, tuple(simplify(E.substitute(i, fixed)) for i in access.indices)


def helpers() -> str:
    """The C helpers, one per group size and vector width: each vector loaded whole, rotated by a constant
    shuffle (vpermilps inside 128-bit lanes for groups of 2 and 4) and added."""
    out = ["#ifndef TG_ROTATIONS", "#define TG_ROTATIONS"]
    for lanes in LANES:
        out.append(f"typedef float tg_f{lanes} __attribute__((vector_size({4 * lanes}), aligned(4)));")
        out.append(f"typedef int32_t tg_i{lanes} __attribute__((vector_size({4 * lanes})));")
        for k in GROUPS:
            if k >= lanes:
                continue
            params = ", ".join(f"const float* restrict a{d}" for d in range(k))
            body = " + ".join(["*(const tg_f{n}*)a0".format(n=lanes)]
                              + [f"__builtin_shuffle(*(const tg_f{lanes}*)a{d}, (tg_i{lanes}){{"
                                 + ", ".join(map(str, rotation(k, d, lanes))) + "})" for d in range(1, k)])
            out.append(f"static inline void tg_rotate_sum_{k}x{lanes}(float* restrict out, {params}) {{ "
                       f"*(tg_f{lanes}*)out = {body}; }}")
    out.append("#endif")
    return "\n".join(out) + "\n"
