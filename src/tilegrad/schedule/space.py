"""A sketch and its parameter space: `Sketch` (a named schedule structure for one computation) and `Space`, what
the sketch's rule declares while it builds a trace, with the tile sizes (`Tiling`) and choices (`Choice`) it may
take. The rules that derive sketches live in sketch.py (CPU) and sketch_gpu.py (GPU).

A sketch's parameters are of two kinds. Numeric ones stay expression Vars in its trace: tile sizes (each split
of an extent L is a chain of Vars, the products of the inner parts, each dividing the one before and L itself)
and the auto-unroll budget. Structural ones (a compute location, the parallel grain, an rfactor width) change the
shape of the trace, so the trace is built per assignment of them and cached: `Sketch.space(structure)` gives the
trace with its numeric Vars, from which symbolic loop IR and feature formulas follow. `bind` gives the concrete
trace the records database stores.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import re
from collections.abc import Callable

from ..errors import ScheduleError
from ..te import expr as E
from ..te.tensor import Tensor
from .knobs import checked_default
from .schedule import Schedule
from .trace import Trace

MAX_INNERMOST = 64  # the innermost tile of a split is at most this (Ansor's max_innermost_split_factor)


@dataclasses.dataclass(frozen=True)
class Tiling:
    """A loop of `extent` split into len(vars) + 1 parts; vars[i] is the product of the parts inside split i, so
    each var divides the one before it and the extent."""

    extent: int
    vars: tuple[str, ...]

    def sample(self, rng: random.Random) -> dict[str, int]:
        parts = rng.choice(factorizations(self.extent, len(self.vars) + 1))
        return dict(zip(self.vars, _inner_products(parts)))

    def valid(self, params: dict) -> bool:
        outer = self.extent
        for v in self.vars:
            x = params[v]
            if x < 1 or outer % x:
                return False
            outer = x
        return outer <= MAX_INNERMOST or len(self.vars) == 0

    def parts(self, params: dict) -> tuple[int, ...]:
        """The extents of the split loops, outermost first."""
        values = [self.extent] + [params[v] for v in self.vars] + [1]
        return tuple(a // b for a, b in zip(values, values[1:]))


def _inner_products(parts: tuple[int, ...]) -> list[int]:
    return [math.prod(parts[i:]) for i in range(1, len(parts))]


@functools.lru_cache(maxsize=4096)
def factorizations(n: int, k: int) -> tuple[tuple[int, ...], ...]:
    """Ordered k-tuples of positive integers whose product is n, the last at most MAX_INNERMOST."""
    if k == 1:
        return ((n,),) if n <= MAX_INNERMOST else ()
    out = []
    for d in divisors(n):
        out.extend((d,) + rest for rest in factorizations(n // d, k - 1))
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


@dataclasses.dataclass(frozen=True)
class Choice:
    """A parameter taking one of `values`; `default` is the hand-written value where a default rule declared it
    (None: the first value)."""

    var: str
    values: tuple[int, ...]
    default: int | None = None

    @property
    def start(self) -> int:
        return self.values[0] if self.default is None else self.default


class Space:
    """What a sketch rule declares while it builds a trace: numeric parameters (Vars in the trace) and
    structural ones (read from `structure`, else their default, else their first value). It is the `Knobs` the
    default rules (defaults.py) ask when they build the default sketch."""

    def __init__(self, structure: dict[str, int]):
        self.structure = structure
        self.tilings: list[Tiling] = []
        self.choices: list[Choice] = []  # numeric
        self.structural: list[Choice] = []
        self.limits: list[tuple[dict[str, float], float]] = []  # log-linear: sum_v c_v ln v <= bound

    def tile(self, name: str, extent: int, parts: int) -> list[E.Var]:
        names = tuple(_var_name(f"{name}_t{i}") for i in range(1, parts))
        self.tilings.append(Tiling(extent, names))
        return [E.Var(n, E.INDEX, 1, extent) for n in names]

    def choice(self, name: str, values, default: int | None = None) -> E.Var:
        var = _var_name(name)
        values = tuple(values)
        if default is not None:
            checked_default(var, values, default)
        self.choices.append(Choice(var, values, default))
        return E.Var(var, E.INDEX, min(values), max(values))

    def limit(self, coefficients: dict[E.Var, float], bound: float) -> None:
        """A limit of the target as sum_v c_v ln(v) <= bound, which the gradient search keeps to by a penalty (a
        GPU's threads per block: the product of the thread tiles); the sketch's validity check is the exact one."""
        self.limits.append(({v.name: float(c) for v, c in coefficients.items()}, float(bound)))

    def pick(self, name: str, values, default: int | None = None) -> int:
        var = _var_name(name)
        values = tuple(values)
        if default is not None:
            checked_default(var, values, default)
        self.structural.append(Choice(var, values, default))
        value = self.structure.get(var, values[0] if default is None else default)
        if value not in values:
            raise ScheduleError(f"structural choice {var}={value} is not one of {values}")
        return value


def _var_name(text: str) -> str:
    return re.sub(r"\W", "_", text)


Rule = Callable[[Schedule, Space], None]


class Sketch:
    """A named schedule structure for one computation: `rule` builds its trace on a fresh Schedule."""

    def __init__(self, name: str, outputs: Callable[[], list[Tensor]], rule: Rule):
        self.name = name
        self._outputs = outputs
        self._rule = rule
        self._spaces: dict[tuple, tuple[Trace, Space]] = {}
        self.structural = self.space({})[1].structural  # under the first values; other values may change them

    def space(self, structure: dict[str, int]) -> tuple[Trace, Space]:
        """The trace (numeric parameters as Vars) and the parameter space under a structural assignment."""
        key = tuple(sorted(structure.items()))
        if key not in self._spaces:
            space = Space(dict(structure))
            sch = Schedule(self._outputs(), params=dict(structure))
            self._rule(sch, space)
            self._spaces[key] = (sch.trace, space)
        return self._spaces[key]

    def structure_of(self, params: dict) -> dict[str, int]:
        """The structural choices in `params` that its trace makes. Which choices a trace makes, and their
        values, can depend on the choices made before them (a stage computed at its consumer's loop gives its
        own producer other loops to choose from), so the structure is found by rebuilding until it is stable."""
        structure: dict[str, int] = {}
        for _ in range(len(params) + 1):
            _, space = self.space(structure)
            made = {c.var: params[c.var] for c in space.structural if c.var in params}
            if made == structure:
                break
            structure = made
        return structure

    def sample(self, rng: random.Random, fixed: dict[str, int] | None = None) -> dict[str, int]:
        """A random annotation: structural choices one at a time in the order the trace makes them (each
        from the values the ones before it leave; those in `fixed` kept), then tile sizes uniform over the
        factorizations of each extent and numeric choices uniform over their values."""
        params: dict[str, int] = dict(fixed or {})
        while True:
            _, space = self.space(params)
            pending = [c for c in space.structural if c.var not in params]
            if not pending:
                break
            params[pending[0].var] = rng.choice(pending[0].values)
        for t in space.tilings:
            params.update(t.sample(rng))
        for c in space.choices:
            params[c.var] = rng.choice(c.values)
        return params

    def default_params(self) -> dict[str, int]:
        """The point the search starts from: every structural and numeric choice its default (for the default
        sketch, the hand-written schedule), every tiling unsplit (inner parts of 1)."""
        return self.completed({})

    def completed(self, params: dict) -> dict[str, int]:
        """`params` made a whole point: each choice the trace makes keeps its value in `params` where that is
        one of its values and takes its default otherwise (a tiling its unsplit point); values of choices the
        trace does not make are dropped. Structural choices are settled in the order the trace makes them."""
        structure: dict[str, int] = {}
        while True:
            _, space = self.space(structure)
            pending = [c for c in space.structural if c.var not in structure]
            if not pending:
                break
            c = pending[0]
            structure[c.var] = params[c.var] if params.get(c.var) in c.values else c.start
        out = dict(structure)
        for c in space.choices:
            out[c.var] = params[c.var] if params.get(c.var) in c.values else c.start
        for t in space.tilings:
            kept = all(v in params for v in t.vars) and t.valid(params)
            out.update({v: params[v] if kept else 1 for v in t.vars})
        return out

    def valid(self, params: dict) -> bool:
        try:
            _, space = self.space(self.structure_of(params))
        except ScheduleError:  # a structural value outside the values its choice has
            return False
        if any(params.get(c.var) not in c.values for c in space.structural):
            return False
        return (all(t.valid(params) for t in space.tilings)
                and all(params.get(c.var) in c.values for c in space.choices))

    def bind(self, params: dict) -> Trace:
        trace, _ = self.space(self.structure_of(params))
        return trace.bind(params)

    def __repr__(self) -> str:
        return f"Sketch({self.name})"
