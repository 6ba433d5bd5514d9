"""Loop versioning for tiles that do not divide their extent: full tiles run without bounds checks.

A split whose factor does not divide the extent (a tile of 8 columns over 197, of 12 over 14) lowers with a guard
inside its inner loop, `o * 8 + i < 197`. Left there, the guard sits in the innermost, vectorised loop of every
tile, and the compiler gives up on the vector code for all of them, when only the last tile overshoots. This
pass hoists each such guard out of the tile: just inside the loop that picks the tile (the outer of the guard's
two innermost loops) it asks once whether the whole tile is in bounds, and runs a copy of the tile with the
guard proven (no check) when it is, the original when it is not. A tile is in bounds when the guard holds at its
worst point, which is a corner of the tile when the guard moves one way along each inner loop (checked, else the
guard stays where it is); a tile wholly out of bounds (the guard fails at its best corner, and guards every store
of the tile) is skipped, as blocks of rows past the last one are. Where only the last tile can be partial (the
loop's extent is a number, and the check reads no other loop and holds at its first and next-to-last
iterations), that copy runs with the loop's last index put in: its bounds are numbers, so the compiler unrolls
it and keeps its accumulators in registers, where a bound read at run time left them in memory (a two-block
convolution tile's 4-column tail on a 28- or 112-wide row).

A window read in place (a depthwise convolution's or a pool's padding: a select per tap in the stored value) is
versioned the same way, but at the outermost loop its test reads (the row for the rows' test, the tile for the
columns'), so that an interior tile of an interior row runs its whole accumulation without a select: gcc kept
the guarded tile's accumulators on the stack and read through masked loads, depending on the last tile's size
(docs/benchmarks.md, "Machine A, seventeenth session").

A convolution's tap whose whole product is tested (a dilated window's tap row, te/nn/nchwc.py's `_tap_row`) is
also versioned at the tap loop, the last its test reads: skipped where the tap row lies in the padding (it adds
zeros), run without the test where it does not, so that the edge rows' guarded copy multiplies no padded row;
the rows proven inside the input test no tap row at all.

A select's test that reads one loop's index alone (a padding copy's row) is versioned at that loop: a row inside
the input is copied without it. Left in the vector loop, gcc built its mask from the one bit, bit by bit, for
every vector of the row.

Code generation only: feature formulas and the cost model see the kernel as lowered, one version of each tile.
"""

from __future__ import annotations

import dataclasses

from ..te import expr as E
from ..te.simplify import prove_nonneg, simplify
from .ir import Allocate, Barrier, For, IfThenElse, Kernel, Seq, Stmt, Store, seq, walk

_TRUE = E.Const(True, "bool")
_FALSE = E.Const(False, "bool")


def version_tails(k: Kernel) -> Kernel:
    """`k` with each non-dividing tile's guard hoisted to a check per tile, and each window's padding test to a
    check per tile and per row (see the module docstring)."""
    plan: dict[int, dict] = {}  # id(For) -> {guard atom: (the atom at the tile's worst corner, at its best)}
    selects: dict[int, dict] = {}  # the same for the conditions of selects in stored values
    taps: dict[int, set] = {}  # id(For) -> the selects' atoms tested again per iteration of that tap loop
    _plan(k.body, [], plan, selects, taps)
    plan, selects = ({loop: {a: c for a, c in atoms.items() if c is not None} for loop, atoms in p.items()}
                     for p in (plan, selects))
    body = _clamp(_rewrite(k.body, plan, selects, taps) if plan or selects else k.body)
    return k if body == k.body else dataclasses.replace(k, body=body)


def _atoms(cond: E.Expr) -> list[E.Expr]:
    if type(cond) is E.And:
        return _atoms(cond.a) + _atoms(cond.b)
    return [cond]


def _plan(s: Stmt, loops: list[For], plan: dict, selects: dict, taps: dict) -> None:
    if isinstance(s, For):
        _plan(s.body, loops + [s], plan, selects, taps)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _plan(x, loops, plan, selects, taps)
    elif isinstance(s, Allocate):
        _plan(s.body, loops, plan, selects, taps)
    elif isinstance(s, IfThenElse):
        if s.orelse is None:
            for atom in _atoms(s.cond):
                _place(plan, atom, _hoist(atom, loops, innermost=True))
        _plan(s.then, loops, plan, selects, taps)
        if s.orelse is not None:
            _plan(s.orelse, loops, plan, selects, taps)
    elif isinstance(s, Store):
        for atom in _select_atoms(s.value):
            _place(selects, atom, _hoist(atom, loops, innermost=False))
            loop = _tap_loop(atom, loops, s)
            if loop is not None:
                taps.setdefault(id(loop), set()).add(atom)


def _tap_loop(atom: E.Expr, loops: list[For], store: Store) -> For | None:
    """The serial loop, inside the outermost one `atom` reads, where `atom` reads its last loop, if `store` adds
    nothing when the atom fails (an accumulation of a tested product: a dilated window's tap row in the
    padding); else None. There the tap is skipped where the atom fails and read without the test where it
    holds."""
    names = {v.name for v in E.free_vars(atom)}
    depths = [d for d, lp in enumerate(loops) if lp.var.name in names]
    if len(depths) < 2 or loops[depths[-1]].kind != "serial" or not _adds_nothing(store, {atom}):
        return None
    return loops[depths[-1]]


def _adds_nothing(store: Store, failing: set[E.Expr]) -> bool:
    """Whether `store` is `acc = acc + select(c, a * b, 0)` with an atom of `failing` in c: a tap whose whole
    product is tested (te/nn/nchwc.py's `_tap_row`), not a read in place of one operand (a depthwise
    convolution's or a pool's padding), whose windows are too small to pay for a test per tap row."""
    v = store.value
    return (type(v) is E.Add and type(v.a) is E.Load and v.a.buffer is store.buffer
            and v.a.indices == store.indices and type(v.b) is E.Select and type(v.b.t) is E.Mul
            and type(v.b.f) is E.Const and v.b.f.value == 0 and bool(failing & set(_atoms(v.b.cond))))


def _place(plan: dict, atom: E.Expr, placed) -> None:
    if placed is not None:
        loop, corners = placed
        atoms = plan.setdefault(id(loop), {})
        # the same test under loops of other extents (two stages' loops of one name) has other corners: no
        # single check covers both, so it stays where it is
        atoms[atom] = corners if atoms.get(atom, corners) == corners else None


def _select_atoms(e: E.Expr) -> list[E.Expr]:
    """The atoms of the conditions of the selects in `e` (a window's padding: `0 <= x + rx - 1 < W ? in : 0`)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if type(x) is E.Select:
            out.extend(a for a in _atoms(x.cond) if a not in out)
        stack.extend(x.children())
    return out


def _hoist(atom: E.Expr, loops: list[For], innermost: bool) -> tuple[For, tuple[E.Expr, E.Expr]] | None:
    """The loop whose body to version for `atom`, and the atom at the worst and at the best corner of that body's
    iteration space (it holds everywhere in it, or somewhere), or None when the atom is not a bound on a tile
    (fewer than two loops, not monotone). A guard is checked just inside the outer of its two innermost loops
    (`innermost`: the tile's columns); a select's condition, a window's padding, at its outermost loop (the
    tile, or the row), so that the whole tile's accumulation, not one tap, runs without it; one that reads a
    single loop's index and no memory (a padding copy's row test) at that loop, so that a row inside the input is
    copied without it."""
    if type(atom) not in (E.LT, E.LE):
        return None
    names = {v.name for v in E.free_vars(atom)}
    depths = [d for d, lp in enumerate(loops) if lp.var.name in names]
    if len(depths) < 2 and (innermost or not depths or E.loads(atom)):
        return None  # a guard bounds a tile; a select's test of one loop's index (a padding copy's row) is hoisted
    at = depths[-2] if innermost else depths[0]
    if loops[at].kind == "vectorized":
        return None
    slack = simplify(atom.b - atom.a)  # the atom says slack > 0 (LT) or >= 0 (LE): it is tightest at its minimum
    worst, best = {}, {}
    for lp in loops[at + 1:]:
        if lp.var.name not in names:
            continue
        step = simplify(E.substitute(slack, {lp.var.name: lp.var + 1}) - slack)
        first, last = E.Const(0, E.INDEX), simplify(lp.extent - 1)
        if prove_nonneg(step):
            worst[lp.var.name], best[lp.var.name] = first, last
        elif prove_nonneg(simplify(-step)):
            worst[lp.var.name], best[lp.var.name] = last, first
        else:
            return None
    whole, some = simplify(E.substitute(atom, worst)), simplify(E.substitute(atom, best))
    inner = {lp.var.name for lp in loops[at + 1:]}
    if inner & {v.name for v in E.free_vars(whole) | E.free_vars(some)} or whole == _TRUE:
        return None
    return loops[at], (whole, some)


def _rewrite(s: Stmt, plan: dict, selects: dict, taps: dict) -> Stmt:
    if isinstance(s, For):
        body = _rewrite(s.body, plan, selects, taps)
        tested = taps.get(id(s))
        if tested:
            body = IfThenElse(E.all_of(sorted(tested, key=str)), _strip_selects(body, tested))
        atoms = plan.get(id(s))
        if atoms:
            body = _last_tile_known(_version(body, atoms), s)
        padding = selects.get(id(s))
        whole = simplify(E.all_of(list(dict.fromkeys(w for w, _ in padding.values())))) if padding else None
        if whole == _TRUE:
            body = _strip_selects(body, set(padding))
        elif whole is not None and whole != _FALSE:
            body = IfThenElse(whole, _strip_selects(body, set(padding)), body)
        return _split_at_partial_tiles(dataclasses.replace(s, body=body))
    if isinstance(s, Seq):
        return seq(_rewrite(x, plan, selects, taps) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_rewrite(s.body, plan, selects, taps))
    if isinstance(s, IfThenElse):
        orelse = None if s.orelse is None else _rewrite(s.orelse, plan, selects, taps)
        return dataclasses.replace(s, then=_rewrite(s.then, plan, selects, taps), orelse=orelse)
    return s


def _strip_selects(s: Stmt, proven: set[E.Expr]) -> Stmt:
    """`s` with the atoms in `proven` taken as true in the conditions of its stored values' selects and of its
    branches (a tap row's test, `_tap_loop`, in a row proven inside the input)."""
    if isinstance(s, For):
        return dataclasses.replace(s, body=_strip_selects(s.body, proven))
    if isinstance(s, Seq):
        return seq(_strip_selects(x, proven) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_strip_selects(s.body, proven))
    if isinstance(s, IfThenElse):
        then = _strip_selects(s.then, proven)
        orelse = None if s.orelse is None else _strip_selects(s.orelse, proven)
        kept = [a for a in _atoms(s.cond) if a not in proven]
        if not kept:
            return then
        return dataclasses.replace(s, cond=E.all_of(kept), then=then, orelse=orelse)
    if isinstance(s, Store):
        return dataclasses.replace(s, value=_strip(s.value, proven))
    return s


def _strip(e: E.Expr, proven: set[E.Expr]) -> E.Expr:
    if type(e) is E.Select:
        kept = [a for a in _atoms(e.cond) if a not in proven]
        t, f = _strip(e.t, proven), _strip(e.f, proven)
        return t if not kept else E.Select(E.all_of(kept), t, f)
    return E.map_children(e, lambda c: _strip(c, proven))


def _version(s: Stmt, atoms: dict[E.Expr, tuple[E.Expr, E.Expr]]) -> Stmt:
    """`s` (a tile's body) as: if the tile is whole, `s` without the guards of `atoms`; else, unless it is
    empty, `s` as it is. Only the loop nests that test one of the atoms are copied: the check goes down into the
    statements of a sequence, and into a loop it does not depend on where that loop's body is a sequence of
    which some statements test no atom (a tile's copy-out beside its accumulation); never into the loops of
    the accumulation itself, whose registers a test would spill."""
    if isinstance(s, Seq):
        return seq(_version(x, atoms) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_version(s.body, atoms))
    present = {a: corners for a, corners in atoms.items() if _tests(s, a)}
    if not present:
        return s
    if isinstance(s, For) and all(s.var not in E.free_vars(a) for a in present) and _mixed(s.body, present):
        return dataclasses.replace(s, body=_version(s.body, present))  # copy no more than the guarded nests
    whole = E.all_of(list(dict.fromkeys(w for w, _ in present.values())))
    bests: dict[E.Expr, set[E.Expr]] = {}  # the atoms that reach a corner, by that corner
    for a, (_, some) in present.items():
        bests.setdefault(some, set()).add(a)
    skip = [some for some, group in bests.items() if some != _TRUE and _guards_every_store(s, group)]
    return IfThenElse(whole, _drop(s, set(present)), IfThenElse(E.all_of(skip), s) if skip else s)


def _last_tile_known(s: Stmt, loop: For) -> Stmt:
    """`s`, a versioned tile body of `loop`, with `loop`'s last index put into its partial copies (`_version`'s
    else branches) where no other iteration can take them: the extent is a number and each whole-tile check
    reads `loop`'s index alone, affinely, and holds at its first and next-to-last values (so in between: a
    fused loop's `o % 2` may fail at odd values only)."""
    if isinstance(s, Seq):
        return seq(_last_tile_known(x, loop) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_last_tile_known(s.body, loop))
    if isinstance(s, For):
        return dataclasses.replace(s, body=_last_tile_known(s.body, loop))
    if not (isinstance(s, IfThenElse) and s.orelse is not None and type(loop.extent) is E.Const):
        return s
    last = loop.extent.value - 1
    if last < 1 or {v.name for v in E.free_vars(s.cond)} != {loop.var.name} or not _affine(s.cond):
        return s
    if any(simplify(E.substitute(s.cond, {loop.var.name: i})) != _TRUE for i in (0, last - 1)):
        return s
    return dataclasses.replace(s, orelse=_substitute(s.orelse, {loop.var.name: E.Const(last, loop.var.dtype)}))


def _split_at_partial_tiles(loop: For) -> Stmt:
    """A serial loop of a dynamic extent whose body is a versioned tile, `if (o * c + d < n) whole else partial`
    (c > 0: whole tiles first), as two loops: the whole tiles, then the partial ones from the first index where
    the check fails. The check per iteration made gcc keep a reduction's accumulators (an rfactor over a dynamic
    row, `_version`'s copies of one accumulation) on the stack; a numeric extent has its last index put in
    instead (`_last_tile_known`)."""
    s = loop.body
    if loop.kind != "serial" or type(loop.extent) is E.Const or not (isinstance(s, IfThenElse) and s.orelse):
        return loop
    first = _first_failing(s.cond, loop.var)
    if first is None:
        return loop
    whole = simplify(E.minimum(loop.extent, E.maximum(first, E.Const(0, E.INDEX))))
    rest = simplify(loop.extent - whole)
    partial = _substitute(s.orelse, {loop.var.name: loop.var + whole})
    return seq([dataclasses.replace(loop, extent=whole, body=s.then),
                dataclasses.replace(loop, extent=rest, body=partial)])


def _first_failing(cond: E.Expr, var: E.Var) -> E.Expr | None:
    """The least `var` at which `cond`, `var * c + d < n` or `<=` with a number c > 0 and `var` nowhere else,
    fails (it holds below): None for any other form."""
    if type(cond) not in (E.LT, E.LE):
        return None
    slack = simplify(cond.b - cond.a)  # holds while slack > 0 (LT) or >= 0 (LE)
    step = simplify(E.substitute(slack, {var.name: var + 1}) - slack)
    if type(step) is not E.Const or step.value >= 0:
        return None
    rest = simplify(E.substitute(slack, {var.name: E.Const(0, var.dtype)}))
    if var.name in {v.name for v in E.free_vars(rest)} or simplify(rest + var * step) != slack:
        return None
    c = -step.value  # slack = rest - c * var: holds while c * var < rest (LT) or <= rest (LE)
    bound = rest if type(cond) is E.LT else rest + 1
    return simplify((bound + (c - 1)) // c)


def _affine(e: E.Expr) -> bool:
    """Whether `e` is a conjunction of comparisons of sums of variables times numbers."""
    if type(e) not in (E.Var, E.Const, E.Add, E.Sub, E.Mul, E.LT, E.LE, E.And):
        return False
    if type(e) is E.Mul and E.Const not in (type(e.a), type(e.b)):
        return False
    return all(_affine(c) for c in e.children())


def _substitute(s: Stmt, mapping: dict) -> Stmt:
    """`s` with its variables replaced as `E.substitute` does, its expressions simplified."""
    def sub(e: E.Expr) -> E.Expr:
        return simplify(E.substitute(e, mapping))
    if isinstance(s, For):
        return dataclasses.replace(s, extent=sub(s.extent), body=_substitute(s.body, mapping),
                                   unroll_if=None if s.unroll_if is None else sub(s.unroll_if))
    if isinstance(s, Seq):
        return seq(_substitute(x, mapping) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_substitute(s.body, mapping))
    if isinstance(s, IfThenElse):
        cond, then = sub(s.cond), _substitute(s.then, mapping)
        if cond == _TRUE:
            return then
        return IfThenElse(cond, then, None if s.orelse is None else _substitute(s.orelse, mapping))
    if isinstance(s, Store):
        return dataclasses.replace(s, indices=tuple(sub(i) for i in s.indices), value=sub(s.value))
    return s


def _mixed(s: Stmt, atoms) -> bool:
    while isinstance(s, Allocate):
        s = s.body
    return isinstance(s, Seq) and not all(any(_tests(x, a) for a in atoms) for x in s.stmts)


def _tests(s: Stmt, atom: E.Expr) -> bool:
    """Whether a guard in `s` tests `atom`."""
    return any(isinstance(x, IfThenElse) and x.orelse is None and atom in _atoms(x.cond) for x in walk(s))


def _clamp(s: Stmt) -> Stmt:
    """A loop whose whole body is guarded by a bound on its own index, `i + c < n`, runs to that bound instead:
    `for i < min(extent, n - c)`, which compilers vectorise (with a remainder) where they do not vectorise the
    test in the body. This is the form a partial tile's innermost loops take. A test the loop does not move
    goes outside it, where the loop around may clamp to it in turn."""
    if isinstance(s, For):
        body = _clamp(s.body)
        if isinstance(body, IfThenElse) and body.orelse is None:
            kept, extent = [], s.extent
            for atom in _atoms(body.cond):
                bound = _bound_on(atom, s.var)
                if bound is None:
                    kept.append(atom)
                else:
                    extent = simplify(E.minimum(extent, bound))
            inside = [a for a in kept if s.var in E.free_vars(a)]
            outside = [a for a in kept if s.var not in E.free_vars(a)]
            if extent is not s.extent or outside:
                body = IfThenElse(E.all_of(inside), body.then) if inside else body.then
                loop = dataclasses.replace(s, extent=extent, body=body)
                return IfThenElse(E.all_of(outside), loop) if outside else loop
        return dataclasses.replace(s, body=body)
    if isinstance(s, Seq):
        return seq(_clamp(x) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_clamp(s.body))
    if isinstance(s, IfThenElse):
        return dataclasses.replace(s, then=_clamp(s.then), orelse=None if s.orelse is None else _clamp(s.orelse))
    return s


def _bound_on(atom: E.Expr, var: E.Var) -> E.Expr | None:
    """n - c where `atom` is `var + c < n` (or `<= n - 1`) with c and n free of `var`, else None."""
    if type(atom) not in (E.LT, E.LE):
        return None
    rest = simplify(atom.b - atom.a + var + (1 if type(atom) is E.LE else 0))
    if var.name in {v.name for v in E.free_vars(rest)}:
        return None
    return rest


def _guards_every_store(s: Stmt, atoms: set[E.Expr]) -> bool:
    """Whether every store in `s` runs only where one of `atoms` holds."""
    if isinstance(s, Store):
        return False
    if isinstance(s, IfThenElse):
        if s.orelse is None and atoms & set(_atoms(s.cond)):
            return True
        return _guards_every_store(s.then, atoms) and (s.orelse is None or _guards_every_store(s.orelse, atoms))
    if isinstance(s, Seq):
        return all(_guards_every_store(x, atoms) for x in s.stmts)
    if isinstance(s, Barrier):
        return True
    return _guards_every_store(s.body, atoms)


def _drop(s: Stmt, proven: set[E.Expr]) -> Stmt:
    """`s` with the guard atoms in `proven` taken as true."""
    if isinstance(s, For):
        return dataclasses.replace(s, body=_drop(s.body, proven))
    if isinstance(s, Seq):
        return seq(_drop(x, proven) for x in s.stmts)
    if isinstance(s, Allocate):
        return dataclasses.replace(s, body=_drop(s.body, proven))
    if isinstance(s, IfThenElse):
        then = _drop(s.then, proven)
        orelse = None if s.orelse is None else _drop(s.orelse, proven)
        if s.orelse is None:
            kept = [a for a in _atoms(s.cond) if a not in proven]
            return then if not kept else IfThenElse(E.all_of(kept), then)
        return IfThenElse(s.cond, then, orelse)
    assert isinstance(s, (Store, Barrier))
    return s
