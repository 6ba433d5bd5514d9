"""AutoTVM's configuration space: the knobs a template defines, and one point of the space.

A template calls `cfg.define_split`, `define_reorder`, `define_annotate` and `define_knob`, then reads each knob's
value with `cfg["name"]`. Run on a `ConfigSpace`, the definitions are collected and every read answers the knob's
default, so the schedule built is the template's default; run on a `ConfigEntity`, the same reads answer that
point's values. The space is the product of the knobs' choices and a point's index is its mixed-radix number
(the first knob the least significant digit), as in TVM, so a search walks plain integers.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Iterable, Sequence

import numpy as np

from ...errors import ScheduleError
from ...schedule.schedule import Schedule

ANNOTATIONS = ("none", "unroll", "vec", "parallel")
_ANNOTATE_POLICIES = {  # per axis, the annotations it may take (the last axis has its own list)
    "try_unroll": (("none", "unroll"), ("none", "unroll")),
    "try_vec": (("none",), ("none", "vec")),
    "try_unroll_vec": (("none", "unroll"), ("none", "unroll", "vec")),
    "try_parallel": (("none",), ("none", "parallel")),
}


@dataclasses.dataclass(frozen=True)
class SplitEntity:
    """A loop split into len(factors) + 1 loops: first by factors[0] (the extent of everything inside the
    outermost loop), that inner part by factors[1], and so on, as the default rules split a block and then its
    register tile. A factor that does not divide leaves a guarded tail."""

    factors: tuple[int, ...]

    def apply(self, sch: Schedule, stage: str, loop: str) -> list[str]:
        """Split `loop` of `stage`; the loops made, outermost first."""
        loops: list[str] = []
        for f in self.factors:
            outer, loop = sch.split(stage, loop, f)
            loops.append(outer)
        return [*loops, loop]

    def sizes(self, extent: int) -> tuple[int, ...]:
        """The loops' extents, outermost first (rounded up where a factor leaves a tail)."""
        parts = (extent, *self.factors)
        return (*(-(-a // b) for a, b in itertools.pairwise(parts)), parts[-1])

    def features(self) -> list[float]:
        return [math.log2(f) for f in self.factors]


@dataclasses.dataclass(frozen=True)
class ReorderEntity:
    """A permutation of the loops a template names."""

    perm: tuple[int, ...]

    def apply(self, sch: Schedule, stage: str, loops: Sequence[str]) -> list[str]:
        order = [loops[i] for i in self.perm]
        sch.reorder(stage, *order)
        return order

    def features(self) -> list[float]:
        return [float(p) for p in self.perm]


@dataclasses.dataclass(frozen=True)
class AnnotateEntity:
    """One annotation per loop: none, unroll, vec(torize) or parallel."""

    anns: tuple[str, ...]

    def apply(self, sch: Schedule, stage: str, loops: Sequence[str]) -> None:
        apply = {"unroll": sch.unroll, "vec": sch.vectorize, "parallel": sch.parallel}
        for loop, ann in zip(loops, self.anns):
            if ann != "none":
                apply[ann](stage, loop)

    def features(self) -> list[float]:
        return [float(ANNOTATIONS.index(a)) for a in self.anns]


@dataclasses.dataclass(frozen=True)
class OtherOptionEntity:
    """A value of a plain knob."""

    val: int

    def features(self) -> list[float]:
        return [float(self.val)]


Entity = SplitEntity | ReorderEntity | AnnotateEntity | OtherOptionEntity


@dataclasses.dataclass(frozen=True)
class Knob:
    """A named dimension of the space: its kind, its choices and the index of the template's default."""

    name: str
    kind: str  # split, reorder, annotate or knob
    entities: tuple[Entity, ...]
    default: int

    def to_json(self, e: Entity) -> list | int:
        return list(dataclasses.astuple(e)[0]) if self.kind != "knob" else e.val


class ConfigSpace:
    """The knobs of one template on one workload; reads answer the defaults (see the module docstring)."""

    def __init__(self, name: str):
        self.name = name
        self.knobs: dict[str, Knob] = {}

    def define_split(self, name: str, axis_extent: int, num_outputs: int, policy: str = "factors", *,
                     candidates: Iterable[Sequence[int]] = (), max_innermost: int | None = None,
                     default: Sequence[int] | None = None) -> None:
        """Split a loop of `axis_extent` into `num_outputs` loops (`SplitEntity`: num_outputs - 1 factors).
        Policy "factors": every way of writing the extent as a product of that many loop extents (the innermost
        at most `max_innermost`); "candidate": the factors given in `candidates`. `default` (factors) is added
        when the policy does not produce it, so a template's hand-written split is always a point."""
        if policy == "factors":
            entities = [SplitEntity(_nested(s)) for s in _factorizations(axis_extent, num_outputs - 1)
                        if max_innermost is None or s[-1] <= max_innermost]
        elif policy == "candidate":
            entities = [SplitEntity(tuple(c)) for c in candidates]
        else:
            raise ScheduleError(f"define_split {name!r}: unknown policy {policy!r} (factors or candidate)")
        self._add(name, "split", entities, None if default is None else SplitEntity(tuple(default)))

    def define_reorder(self, name: str, axes: Sequence[str], policy: str = "all", *,
                       candidates: Iterable[Sequence[int]] = (), default: Sequence[int] | None = None) -> None:
        """Orders of `axes`: every permutation ("all") or the permutations in `candidates` ("candidate"); by
        default the order given."""
        if policy == "all":
            perms = list(itertools.permutations(range(len(axes))))
        elif policy == "candidate":
            perms = [tuple(c) for c in candidates]
        else:
            raise ScheduleError(f"define_reorder {name!r}: unknown policy {policy!r} (all or candidate)")
        self._add(name, "reorder", [ReorderEntity(p) for p in perms],
                  ReorderEntity(tuple(default if default is not None else range(len(axes)))))

    def define_annotate(self, name: str, axes: Sequence[str], policy: str = "try_unroll", *,
                        default: Sequence[str] | None = None) -> None:
        """Annotations of `axes` (policy "try_unroll", "try_vec", "try_unroll_vec" or "try_parallel", see
        `_ANNOTATE_POLICIES`); by default none."""
        if policy not in _ANNOTATE_POLICIES:
            raise ScheduleError(f"define_annotate {name!r}: unknown policy {policy!r}; "
                                f"known: {', '.join(_ANNOTATE_POLICIES)}")
        others, last = _ANNOTATE_POLICIES[policy]
        choices = [others] * (len(axes) - 1) + [last]
        self._add(name, "annotate", [AnnotateEntity(a) for a in itertools.product(*choices)],
                  AnnotateEntity(tuple(default if default is not None else ("none",) * len(axes))))

    def define_knob(self, name: str, values: Iterable[int], default: int | None = None) -> None:
        """A plain knob taking one of `values` (by default the first)."""
        entities = [OtherOptionEntity(int(v)) for v in values]
        self._add(name, "knob", entities, None if default is None else OtherOptionEntity(int(default)))

    def _add(self, name: str, kind: str, entities: list[Entity], default: Entity | None) -> None:
        if name in self.knobs:
            raise ScheduleError(f"template {self.name}: knob {name!r} defined twice")
        entities = list(dict.fromkeys(entities))
        if default is not None and default not in entities:
            entities.append(default)
        if not entities:
            raise ScheduleError(f"template {self.name}: knob {name!r} has no choices")
        self.knobs[name] = Knob(name, kind, tuple(entities), 0 if default is None else entities.index(default))

    def __getitem__(self, name: str) -> Entity:
        knob = self.knobs[name]
        return knob.entities[knob.default]

    def __len__(self) -> int:
        return math.prod(len(k.entities) for k in self.knobs.values())

    @property
    def dims(self) -> list[int]:
        return [len(k.entities) for k in self.knobs.values()]

    def get(self, index: int) -> ConfigEntity:
        if not 0 <= index < len(self):
            raise ScheduleError(f"template {self.name}: config index {index} outside the space of {len(self)}")
        return ConfigEntity(index, self)

    def default(self) -> ConfigEntity:
        return self.get(self.index_of([k.default for k in self.knobs.values()]))

    def choices(self, index: int) -> list[int]:
        """Each knob's choice at `index` (mixed radix, first knob least significant)."""
        out = []
        for d in self.dims:
            index, c = divmod(index, d)
            out.append(c)
        return out

    def index_of(self, choices: Sequence[int]) -> int:
        index = 0
        for c, d in zip(reversed(choices), reversed(self.dims)):
            index = index * d + c
        return index

    def neighbour(self, index: int, rng: random.Random) -> int:
        """`index` with one knob (of those with a choice) changed to another of its values."""
        dims = self.dims
        free = [i for i, d in enumerate(dims) if d > 1]
        if not free:
            return index
        choices = self.choices(index)
        k = rng.choice(free)
        choices[k] = (choices[k] + rng.randrange(1, dims[k])) % dims[k]
        return self.index_of(choices)

    def knob_features(self, indices: Sequence[int], width: int) -> np.ndarray:
        """Per config, its knobs' values as numbers (split sizes in log2, orders and annotations by position),
        padded with NaN (missing, for the trees) to `width` columns."""
        out = np.full((len(indices), width), np.nan)
        for row, index in enumerate(indices):
            values = [f for k, c in zip(self.knobs.values(), self.choices(index)) for f in k.entities[c].features()]
            out[row, :min(width, len(values))] = values[:width]
        return out

    def to_json(self, index: int) -> dict:
        """The config as the records keep it: the space, its index and each knob's value."""
        return {"space": self.name, "index": index,
                "knobs": {k.name: k.to_json(k.entities[c]) for k, c in zip(self.knobs.values(), self.choices(index))}}

    def from_json(self, obj: dict) -> ConfigEntity | None:
        """The config a record names, or None where this space differs (another template or workload)."""
        try:
            if obj["space"] != self.name or not 0 <= obj["index"] < len(self):
                return None
            return self.get(obj["index"]) if self.to_json(obj["index"]) == obj else None
        except (KeyError, TypeError):
            return None


@dataclasses.dataclass(frozen=True, order=True)
class ConfigEntity:
    """One point of a space: the template reads its knob values; definitions must match the space's."""

    index: int
    space: ConfigSpace = dataclasses.field(compare=False, repr=False)

    def __getitem__(self, name: str) -> Entity:
        knob = self.space.knobs[name]
        return knob.entities[self.space.choices(self.index)[list(self.space.knobs).index(name)]]

    def _check(self, name: str, *_, **__) -> None:
        if name not in self.space.knobs:
            raise ScheduleError(f"template {self.space.name}: knob {name!r} is not in the space it was defined with")

    define_split = define_reorder = define_annotate = define_knob = _check

    def to_json(self) -> dict:
        return self.space.to_json(self.index)


def _nested(inner: tuple[int, ...]) -> tuple[int, ...]:
    """The split factors of inner loop extents: each the product of the extents inside a loop."""
    return tuple(math.prod(inner[k:]) for k in range(len(inner)))


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    """Every tuple of `parts` inner loop extents whose product divides n (the outermost loop is the rest)."""
    if parts == 0:
        return [()]
    out = []
    for d in (d for d in range(1, n + 1) if n % d == 0):
        out += [(*rest, d) for rest in _factorizations(n // d, parts - 1)]
    return out
