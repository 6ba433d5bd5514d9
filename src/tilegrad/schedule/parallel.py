"""How many of a stage's outer loops run in parallel: enough to give every thread work, no more (each fused loop
adds index arithmetic), and as a parameter the search may change."""

from __future__ import annotations

import math

from ..target import Target
from ..te import expr as E
from ..te.simplify import simplify
from .knobs import Knobs
from .schedule import Schedule
from .state import Stage
from .tiling import extent


def parallel_outer(sch: Schedule, s: Stage, loops: list[str], target: Target, work_inside: int) -> None:
    """Run the leading `loops` in parallel when there is enough work (`parallel_count`)."""
    _parallelize(sch, s, loops, parallel_count([extent(s, lp) for lp in loops], target, work_inside))


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
    parameter has no integer extent while the parameter is a Var); None reads them from the stage, a symbolic one
    at the parameters' defaults."""
    if extents is None:
        extents = [_extent_at_defaults(s, lp, knobs) for lp in loops]
    count = knobs.pick(f"{s.name}_grain", range(len(loops) + 1), parallel_count(extents, target, work_inside))
    _parallelize(sch, s, loops, count)


def _extent_at_defaults(s: Stage, loop: str, knobs: Knobs) -> int:
    """`loop`'s extent, where a parameter leaves it symbolic (a row of tiles split from columns tiled by a Var)
    with each parameter at its default."""
    e = s.loops[loop].extent
    if type(e) is E.Const:
        return e.value
    defaults = {c.var: E.Const(c.values[0] if c.default is None else c.default, E.INDEX)
                for c in getattr(knobs, "choices", ())}
    return simplify(E.substitute(e, defaults)).value


def _parallelize(sch: Schedule, s: Stage, loops: list[str], count: int) -> None:
    if count:
        sch.parallel(s.name, sch.fuse(s.name, *loops[:count]) if count > 1 else loops[0])
