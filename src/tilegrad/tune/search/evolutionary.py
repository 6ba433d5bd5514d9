"""Ansor's evolutionary search: a population of candidates evolves under the cost model's scores for a few
generations (mutations of tile sizes, parallel grain, unroll budget and compute location, and crossover), and the
best-scored candidates never measured, with a few random ones (epsilon-greedy), make the next measurement batch.

A candidate is scored by its structure's feature formulas (derived once per structure, then evaluated in a batch).
A structure is the set of structural choices (parallel grain per stage, rfactor width, compute location), and
their product can run to thousands per sketch (3^7 parallel grains on a Winograd convolution); a derivation costs
far more than scoring, so a round lets at most `new_structures` structures it has not seen before into its population
and draws the rest of its samples and structural mutations from structures already derived. Without that bound
one round of 2048 x 4 could derive thousands of structures; with it, each round still
widens the set of structures the search knows.
"""

from __future__ import annotations

import dataclasses
import random
from typing import ClassVar

import numpy as np

from ...schedule.space import MAX_INNERMOST, Tiling
from ..cost_model.model import CostModel
from .policy import register_policy
from .space import Candidate, TaskSpace


@register_policy("evolutionary")
@dataclasses.dataclass(frozen=True)
class EvolutionaryPolicy:
    """Ansor's search, with gradient-boosted trees. Ansor's defaults: population 2048, 4 generations, 64
    measurements per round, 5% random picks."""

    name: ClassVar[str] = "evolutionary"
    cost_model: ClassVar[str] = "trees"

    population: int = 2048
    generations: int = 4
    measure_per_round: int = 64
    eps_greedy: float = 0.05
    crossover_prob: float = 0.1
    elite_fraction: float = 0.25  # of the initial population: the best measured candidates
    new_structures: int = 16  # structures not derived before that may enter one round's population
    default_fraction: float = 0.05  # of the initial population: the hand-written point and mutations of it

    def for_task(self, space: TaskSpace, model: CostModel, seed: int) -> EvolutionarySearch:
        return EvolutionarySearch(space, model, self, seed)


class EvolutionarySearch:
    """Proposes measurement batches for one task."""

    def __init__(self, space: TaskSpace, model: CostModel, options: EvolutionaryPolicy | None = None,
                 seed: int = 0):
        self.space = space
        self.model = model
        self.options = options or EvolutionaryPolicy()
        self.rng = random.Random(seed)
        self.known: list[tuple] = []  # structure keys in the order they entered a population
        self._known_set: set[tuple] = set()
        self._room = 0  # new structures this round may still admit

    def propose(self, measured: set[Candidate], best: list[Candidate], n: int) -> list[Candidate]:
        """The next `n` candidates: `measured` are never proposed again; `best` (best first) seed the
        population."""
        opt = self.options
        self._room = opt.new_structures
        population = list(dict.fromkeys(best[:int(opt.population * opt.elite_fraction)]))
        for c in population:
            self._admit(c, force=True)
        population += self._default_and_mutations(int(opt.population * opt.default_fraction))
        population += [self._sample_admitted() for _ in range(opt.population - len(population))]
        scored: dict[Candidate, float] = {}
        for generation in range(opt.generations + 1):
            scores = self._score(population, scored)
            if generation == opt.generations:
                break
            population = self._next_generation(population, scores)
        fresh = sorted((c for c in scored if c not in measured), key=lambda c: -scored[c])
        n_random = int(round(n * opt.eps_greedy))
        batch = fresh[:n - n_random]
        taken = set(batch) | measured
        for c in self._random(4 * n_random + 8):
            if len(batch) >= n:
                break
            if c not in taken:
                batch.append(c)
                taken.add(c)
        return batch

    def _default_and_mutations(self, n: int) -> list[Candidate]:
        """The default sketch's hand-written point and up to n - 1 valid mutations of it: the population starts
        from the hand-written schedule as well as from random points."""
        default = self.space.default()
        self._admit(default, force=True)
        out = [default]
        for _ in range(n - 1):
            child = self._mutate(default)
            if child is not None and self.space.valid(child):
                out.append(child)
        return out[:max(n, 1)]

    def _random(self, n: int) -> list[Candidate]:
        return [self.space.sample(self.rng) for _ in range(max(0, n))]

    def _admit(self, c: Candidate, force: bool = False) -> bool:
        """Whether `c`'s structure may be scored this round (known, or new and within the round's bound)."""
        key = self.space.structure_key(c)
        if key in self._known_set:
            return True
        if not force and self._room <= 0:
            return False
        if not force:
            self._room -= 1
        self._known_set.add(key)
        self.known.append(key)
        return True

    def _sample_admitted(self) -> Candidate:
        """A random annotation; once the round admits no new structure, its numbers on a known structure."""
        if self._room > 0 or not self.known:
            c = self.space.sample(self.rng)
            if self._admit(c) or (not self.known and self._admit(c, force=True)):
                return c
        sketch, structure = self.rng.choice(self.known)
        return Candidate.of(sketch, self.space.sketches[sketch].sample(self.rng, fixed=dict(structure)))

    def _score(self, population: list[Candidate], scored: dict[Candidate, float]) -> np.ndarray:
        new = [c for c in dict.fromkeys(population) if c not in scored]
        if new:
            for c, s in zip(new, self.space.scores(self.model, new)):
                scored[c] = float(s)
        return np.array([scored[c] for c in population])

    def _next_generation(self, population: list[Candidate], scores: np.ndarray) -> list[Candidate]:
        """Parents chosen with probability rising with their score (scores ranked, so the model's scale does
        not matter); each child a mutation, or a crossover of two parents of one sketch."""
        ranks = np.argsort(np.argsort(scores))
        weights = (ranks + 1.0) ** 2
        p = weights / weights.sum()
        parents = self.rng.choices(range(len(population)), weights=p, k=len(population) * 2)
        out = []
        for i in range(len(population)):
            a = population[parents[2 * i]]
            b = population[parents[2 * i + 1]]
            if self.rng.random() < self.options.crossover_prob and a.sketch == b.sketch and a != b:
                child = self._crossover(a, b)
            else:
                child = self._mutate(a)
            out.append(child if child is not None and self.space.valid(child) else a)
        return out

    def _mutate(self, c: Candidate) -> Candidate | None:
        sketch = self.space.sketches[c.sketch]
        params = c.values
        structure = sketch.structure_of(params)
        _, space = sketch.space(structure)
        kinds = (["tile"] * len(space.tilings) + ["choice"] * len(space.choices)
                 + ["structure"] * len(sketch.structural))
        if not kinds:
            return None
        kind = self.rng.choice(kinds)
        if kind == "tile":
            tiling = self.rng.choice(space.tilings)
            moved = _move_factor(tiling, params, self.rng)
            if moved is None:
                return None
            params.update(moved)
        elif kind == "choice":
            choice = self.rng.choice(space.choices)
            params[choice.var] = self.rng.choice(choice.values)
        else:
            choice = self.rng.choice(sketch.structural)
            if choice.var not in params:
                return None
            if self._room > 0:
                params[choice.var] = self.rng.choice(choice.values)
            else:  # no new structure this round: move to a known one that makes this choice otherwise
                others = [dict(k[1]) for k in self.known if k[0] == c.sketch
                          and dict(k[1]).get(choice.var, params[choice.var]) != params[choice.var]]
                if not others:
                    return None
                params.update(self.rng.choice(others))
            params = _refill(sketch, params, self.rng)
            if params is None or not self._admit(Candidate.of(c.sketch, params)):
                return None
        return Candidate.of(c.sketch, params)

    def _crossover(self, a: Candidate, b: Candidate) -> Candidate | None:
        """Each tiling and choice from one parent or the other (structures must agree)."""
        sketch = self.space.sketches[a.sketch]
        pa, pb = a.values, b.values
        if sketch.structure_of(pa) != sketch.structure_of(pb):
            return None
        _, space = sketch.space(sketch.structure_of(pa))
        child = dict(pa)
        for tiling in space.tilings:
            if self.rng.random() < 0.5:
                child.update({v: pb[v] for v in tiling.vars})
        for choice in space.choices:
            if self.rng.random() < 0.5:
                child[choice.var] = pb[choice.var]
        return Candidate.of(a.sketch, child)


def _move_factor(tiling: Tiling, params: dict, rng: random.Random) -> dict | None:
    """Move one prime factor between two levels of a split (Ansor's tile-size mutation)."""
    parts = list(tiling.parts(params))
    sources = [i for i, p in enumerate(parts) if p > 1]
    if not sources or len(parts) < 2:
        return None
    src = rng.choice(sources)
    dst = rng.choice([i for i in range(len(parts)) if i != src])
    factor = _smallest_prime_factor(parts[src]) if rng.random() < 0.5 else rng.choice(_prime_factors(parts[src]))
    parts[src] //= factor
    parts[dst] *= factor
    if parts[-1] > MAX_INNERMOST:
        return None
    values = [int(np.prod(parts[i:])) for i in range(1, len(parts))]
    return dict(zip(tiling.vars, values))


def _prime_factors(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    if n > 1:
        out.append(n)
    return out


def _smallest_prime_factor(n: int) -> int:
    return _prime_factors(n)[0]


def _refill(sketch, params: dict, rng: random.Random) -> dict | None:
    """After a structural change: keep the parameters the new structure still has, sample those it adds."""
    try:
        structure = sketch.structure_of(params)
        _, space = sketch.space(structure)
    except Exception:  # noqa: BLE001 - an impossible structure is just not a child
        return None
    out = dict(structure)
    for t in space.tilings:
        if all(v in params for v in t.vars) and t.valid(params):
            out.update({v: params[v] for v in t.vars})
        else:
            out.update(t.sample(rng))
    for c in space.choices:
        out[c.var] = params[c.var] if params.get(c.var) in c.values else rng.choice(c.values)
    return out
