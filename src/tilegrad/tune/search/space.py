"""A task's search space: its sketches, candidates (a sketch and an assignment of its parameters), and their
program features, evaluated in batches from formulas derived once per sketch structure.

Sketch-based search policies (evolutionary, gradient) share this: they propose assignments, score them with the cost
model over these features, and hand the chosen ones to the measurer as concrete traces.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from typing import NamedTuple

import numpy as np

from ...backend import backend_for
from ...extras import require
from ...kernel import lower_kernel
from ...loop.ir import Store, walk
from ...schedule.sketch import generate_sketches
from ...schedule.space import Sketch, Space
from ...schedule.trace import Trace
from ...te import expr as E
from ..features.extract import feature_count, program_vector
from ..features.formulas import FeatureFormulas
from ..task import Task

# Feature formulas grow with the reads of each store and the size of its expression written out; a kernel beyond
# these (a Winograd transform reads 36 taps at indices with min/max over all of them) is scored as unknown
# rather than derived for minutes.
MAX_READS = 48
MAX_TREE = 4000


def _too_big(kernel) -> bool:
    for s in walk(kernel.body):
        if isinstance(s, Store):
            roots = (s.value,) + tuple(s.indices)
            if sum(_tree_size(r, {}) for r in roots) > MAX_TREE or _distinct_reads(s.value) > MAX_READS:
                return True
    return False


def _tree_size(e: E.Expr, memo: dict) -> int:
    """Nodes of the expression written out as a tree (shared subexpressions counted at every use)."""
    stack = [(e, False)]
    while stack:
        x, expanded = stack.pop()
        if id(x) in memo:
            continue
        if expanded:
            memo[id(x)] = 1 + sum(memo[id(k)] for k in x.children())
        else:
            stack.append((x, True))
            stack.extend((k, False) for k in x.children() if id(k) not in memo)
    return memo[id(e)]


def _distinct_reads(e: E.Expr) -> int:
    reads, seen, stack = set(), set(), [e]
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if type(x) is E.Load:
            reads.add((x.buffer.name, x.indices))
        stack.extend(x.children())
    return len(reads)


class Candidate(NamedTuple):
    """A sketch (by index in the task's list) and its parameters, as a sorted tuple so it hashes."""

    sketch: int
    params: tuple[tuple[str, int], ...]

    @staticmethod
    def of(sketch: int, params: dict) -> Candidate:
        return Candidate(sketch, tuple(sorted((k, int(v)) for k, v in params.items())))

    @property
    def values(self) -> dict[str, int]:
        return dict(self.params)


class TaskSpace:
    """Sketches of one task and the features of its candidates."""

    note = ""  # what the tuning summary says of how the task was searched, where a policy's space differs

    def __init__(self, task: Task):
        self.task = task
        self.gpu = task.target is not None and backend_for(task.target).gpu_features
        self.num_features = feature_count(self.gpu)  # a GPU task's vectors carry the GPU features too
        self.sketches: list[Sketch] = generate_sketches(lambda: task.compute()[1], task.target)
        self._default = Candidate.of(0, self.sketches[0].default_params())
        self._formulas: dict[tuple, FeatureFormulas | None] = {}
        self._smooth: dict[tuple, object] = {}

    def sample(self, rng: random.Random) -> Candidate:
        i = rng.randrange(len(self.sketches))
        return Candidate.of(i, self.sketches[i].sample(rng))

    def default(self) -> Candidate:
        """The hand-written schedule: the default sketch at its default point."""
        return self._default

    def neighbour(self, c: Candidate, rng: random.Random) -> Candidate:
        """`c` with one structural or numeric choice re-drawn; what a new structure adds takes its defaults. How
        a search starts looking past the hand-written schedule."""
        sketch = self.sketches[c.sketch]
        params = c.values
        _, space = sketch.space(sketch.structure_of(params))
        choices = space.structural + space.choices
        if not choices:
            return c
        choice = rng.choice(choices)
        params[choice.var] = rng.choice(choice.values)
        return Candidate.of(c.sketch, sketch.completed(params))

    def trace(self, c: Candidate) -> Trace:
        return self.sketches[c.sketch].bind(c.values)

    def valid(self, c: Candidate) -> bool:
        return self.sketches[c.sketch].valid(c.values)

    def origin(self, c: Candidate, policy: str) -> str:
        """What the records database keeps to recover the candidate: policy, sketch and parameters."""
        return json.dumps({"policy": policy, "sketch": self.sketches[c.sketch].name, "params": c.values})

    def from_origin(self, origin: str) -> Candidate | None:
        """The candidate an origin names, or None. A record of the default sketch without parameters (written
        before the default rules had them) is the default point. A record written before a rule made one of its
        structural choices reads with that choice at its first value: a choice added to a rule lists first the
        value that keeps the program the rule made before it (`{name}_apack_in_place`: 0, A packed)."""
        try:
            obj = json.loads(origin)
            names = [s.name for s in self.sketches]
            c = Candidate.of(names.index(obj["sketch"]), obj["params"])
        except (ValueError, KeyError, TypeError):
            return None
        if c == Candidate(0, ()):
            return self.default()
        if not self.valid(c):
            c = Candidate.of(c.sketch, self._with_earlier_choices(c))
        return c if self.valid(c) else None

    def _with_earlier_choices(self, c: Candidate) -> dict[str, int]:
        """`c`'s parameters with each structural choice they lack at its first value, in the order the trace
        makes them."""
        sketch, params = self.sketches[c.sketch], dict(c.values)
        while True:
            _, space = sketch.space(sketch.structure_of(params))
            pending = [choice for choice in space.structural if choice.var not in params]
            if not pending:
                return params
            params[pending[0].var] = pending[0].values[0]

    def structure_key(self, c: Candidate) -> tuple:
        """The sketch and structural choices of `c`: candidates with one key share their feature formulas."""
        return c.sketch, tuple(sorted(self.sketches[c.sketch].structure_of(c.values).items()))

    def parameter_space(self, key: tuple) -> Space:
        """The numeric parameters (tilings, choices) of a structure."""
        return self.sketches[key[0]].space(dict(key[1]))[1]

    def smooth_formulas(self, key: tuple, tau: float):
        """The structure's features as a differentiable PyTorch function of ln(parameters) (`smooth.py`), or
        None where its features are not derived."""
        if (key, tau) not in self._smooth:
            # imported here: PyTorch is needed by the gradient search only, not by every user of a task space
            require("torch", "tune", "Felix's gradient search (the default policy)")
            from ..felix.smooth import SmoothFormulas

            formulas = self._formulas_for(key)
            self._smooth[key, tau] = None if formulas is None else SmoothFormulas(formulas, tau)
        return self._smooth[key, tau]

    def smooth_points(self, key: tuple, tau: float) -> list[tuple[float, object]] | None:
        """(weight, smooth formulas) for each point the structure's objective sums the cost model's scores over:
        here the one program of the task, weight 1 (a kernel over dynamic dimensions has one per sample point:
        `tune/range_task.py`). None where its features are not derived."""
        smooth = self.smooth_formulas(key, tau)
        return None if smooth is None else [(1.0, smooth)]

    def scores(self, model, candidates: list[Candidate]) -> np.ndarray:
        """The cost model's score of each candidate (higher is faster): what the search policies rank by."""
        return model.predict(self.features(candidates))

    def features(self, candidates: list[Candidate]) -> np.ndarray:
        """One program vector (`features.program_vector`) per candidate, evaluated in one batch per sketch structure. A
        structure whose symbolic program cannot be derived gets NaN features (the model treats them as
        missing)."""
        return self._features(candidates, self._formulas_for)

    def _features(self, candidates: list[Candidate], formulas_of) -> np.ndarray:
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, c in enumerate(candidates):
            groups[self.structure_key(c)].append(i)
        out: np.ndarray | None = None
        for key, idx in groups.items():
            formulas = formulas_of(key)
            if formulas is None:
                continue
            batch = {v: np.array([candidates[i].values[v] for i in idx], np.int64) for v in formulas.variables}
            rows = formulas.evaluate(batch) if batch else np.repeat(formulas.evaluate({}), len(idx), axis=0)
            vectors = program_vector(rows)
            if out is None:
                out = np.full((len(candidates), vectors.shape[1]), np.nan)
            out[idx] = vectors
        if out is None:
            return np.full((len(candidates), self.num_features), np.nan)
        return out

    def _formulas_for(self, key: tuple) -> FeatureFormulas | None:
        if key not in self._formulas:
            self._formulas[key] = self._derived(
                key, self.task.compute(), lambda kernel, numeric: FeatureFormulas(kernel, numeric, gpu=self.gpu))
        return self._formulas[key]

    def _derived(self, key: tuple, computation, derive):
        """`derive(kernel, numeric variables)` of the structure's program lowered from `computation` (inputs,
        outputs) with its numeric parameters left as variables; None where the analysis cannot handle it (the
        structure is then scored as unknown)."""
        sketch_index, structure = key
        trace, space = self.sketches[sketch_index].space(dict(structure))
        numeric = [t for tiling in space.tilings for t in tiling.vars] + [c.var for c in space.choices]
        try:
            kernel = lower_kernel(computation, trace.bind(dict(structure)), name="candidate")
            if _too_big(kernel):
                raise ValueError("too many reads for per-read features")
            return derive(kernel, numeric)
        except Exception:  # noqa: BLE001 - a structure the analysis cannot handle is scored as unknown
            return None
