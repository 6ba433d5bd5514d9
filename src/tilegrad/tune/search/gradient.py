"""Felix's gradient search: schedule parameters optimised by gradient descent on the cost model's prediction.

A sketch structure's features are formulas of its numeric parameters (tile sizes, the auto-unroll budget). Made
smooth (`smooth.py`) and written in x' = ln x, they give a differentiable objective per point

    O(x') = -C(log-features(e^x')) + lambda * sum_r max(p_r(x'), 0)^2

with C the MLP cost model (higher is faster) and p_r <= 0 the constraints of the parameter space: each tile
variable at least 1 and at most the one outside it (the inner products of a split shrink inwards), the outermost at
most its loop's extent, the innermost at most MAX_INNERMOST, each choice within its values, and the target's
limits a sketch declares as linear in x' (`Space.limit`: a GPU's threads per block, registers, shared tiles).
Divisibility is not a constraint of the optimisation: every visited point is rounded, each tile variable to the
divisor of the one outside it nearest in log space, each choice to its nearest value.

One round (Algorithm 1 of Felix) for a task: start from the best measured points, the default sketch's hand-written
point and a neighbour of it, and the cost model's favourites among valid points drawn by rejection sampling
(`seed_pool` drawn per seed; structures whose features are not derived are rejected; at most `new_structures`
structures new to the search per round), so that a pretrained model's knowledge picks where the descent starts,
run Adam for `steps` steps from all of them at once (one batch per structure, the structures in lockstep), round
every point visited, drop duplicates and points already measured, rank the rest by the model on their exact
features, and propose the best (as many as the tuner asks: `measure_per_round` by default). The objective and its
gradient are chained by hand in NumPy (`_objective_gradients`): the smoothed formulas' C tape, the program vector,
the MLP's layers (one call for the points of every structure, which costs hardly more than a call for one), the
penalties, then Adam; PyTorch's autograd would spend most of a step on dispatch.
Structural choices (compute location, parallel grain) stay those of each seed; Felix's objective sums over
sketches, which here are the seeds' structures.

A task's first batch, measured before anything of the task is known, is short (`first_measure`) and led by the
hand-written point, so that every task of a network has a figure after fewer measurements; its round descends
from the hand-written point and its neighbour only, since the random seeds' new structures cost a derivation of
their formulas each, most of a round's proposal, and a network's estimate waits on every task's first figure.
The cost model's favourite random seeds enter from the task's second round on. Later measurements go
only where the model may be wrong (`screen`): once the tuner has reported `screen_after` of the
task's batches (`observe`), a proposal the model scores below the task's fastest measured candidate by more than
the model's own confusion on this task is not measured, unless its structure has never been measured here (a new
candidate, where this task's data has not corrected the model yet). The confusion is read off the model's past
mistakes: within each measured batch, the pairs it ordered wrongly (the one it scored higher ran slower by more
than NOISE), and the `confusion_quantile` of their score gaps over the last CONFUSION_BATCHES batches; a batch
is never cut below `min_measure`. A slow candidate costs more to time than a fast one, so the measurements the
model can vouch for are the costliest to spend.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections import defaultdict
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ...schedule.space import MAX_INNERMOST, Space, divisors
from ..adam import Adam
from ..features.extract import STORE_SLOTS, fold_stores, signed_log
from .policy import register_policy
from .space import Candidate, TaskSpace


NOISE = 0.03  # latencies closer than this (relative) are one speed: an order between them is no mistake
CONFUSION_BATCHES = 4  # the recent batches whose misordered pairs set the confusion (the model learns as it goes)


@register_policy("gradient")
@dataclasses.dataclass(frozen=True)
class GradientPolicy:
    """Felix's search, with the pretrained MLP cost model. Felix's defaults: 8 seeds, 200 Adam steps, 16
    measurements per round. `best_seeds` of the seeds start from the best measured candidates (the rest are
    random), `penalty` is lambda, `tau` the smoothing width."""

    name: ClassVar[str] = "gradient"
    cost_model: ClassVar[str] = "mlp"

    seeds: int = 8
    steps: int = 200
    measure_per_round: int = 16
    learning_rate: float = 0.05
    penalty: float = 4.0
    tau: float = 1.0
    best_seeds: int = 2
    default_seeds: int = 2  # the hand-written point and neighbours of it (one choice re-drawn)
    patience: int = 50  # stop a structure's descent once this many steps round to no point not seen before
    new_structures: int = 2  # structures of a sketch not derived before that one round's seeds may open
    seed_pool: int = 4  # random points drawn per random seed, the cost model's favourites kept
    screen: bool = True  # measure only the proposals the model cannot rule out, and new structures
    screen_after: int = 2  # batches of the task measured before the model's confusion is trusted
    confusion_quantile: float = 0.9
    min_measure: int = 2  # proposals measured a round at least, screened or not
    first_measure: int = 2  # a task's first batch: the hand-written point and the descent's favourite

    def for_task(self, space: TaskSpace, model, seed: int) -> GradientSearch:
        return GradientSearch(space, model, self, seed)


class ParameterBox:
    """The numeric parameters of one sketch structure in log space: penalties for leaving the space, and the
    rounding of real points to valid integer assignments."""

    def __init__(self, space: Space, variables: tuple[str, ...]):
        self.variables = variables
        self.index = {v: j for j, v in enumerate(variables)}
        self.tilings = [t for t in space.tilings if t.vars]
        self.choices = list(space.choices)
        # Columns of the lower and upper bounds of each variable (another column, or a constant).
        lo, hi, hi_col = np.zeros(len(variables)), np.full(len(variables), np.inf), np.full(len(variables), -1)
        for t in self.tilings:
            hi[self.index[t.vars[0]]] = math.log(t.extent)
            for outer, inner in zip(t.vars, t.vars[1:]):
                hi_col[self.index[inner]] = self.index[outer]
            last = self.index[t.vars[-1]]
            hi[last] = min(hi[last], math.log(MAX_INNERMOST))
        for c in self.choices:
            j = self.index[c.var]
            lo[j], hi[j] = _log(min(c.values)), _log(max(c.values))
        self._lo, self._hi = lo, hi
        # the target's limits the sketch declared (`Space.limit`), as rows of coefficients over the columns
        limits = [(c, b) for c, b in space.limits if set(c) <= set(self.index)]
        self._limit_rows = np.zeros((len(limits), len(variables)))
        self._limit_bounds = np.array([b for _, b in limits], np.float64)
        for r, (coefficients, _) in enumerate(limits):
            for v, c in coefficients.items():
                self._limit_rows[r, self.index[v]] += c
        self._nested = np.flatnonzero(hi_col >= 0)
        self._outer = hi_col[self._nested].astype(np.intp)
        # What `round` picks from, built once (`round` runs at every step of a descent): per tiling, the extent's
        # divisors d (ascending), which d_j divide which d_i, and per variable outermost first (column, how many of
        # the d it may take: the innermost only those up to MAX_INNERMOST); per choice (column, values, their logs).
        self._tile_rounding = []
        for t in self.tilings:
            cands = np.array(divisors(t.extent), np.int64)
            fits = cands[:, None] % cands[None, :] == 0
            allowed = [len(cands)] * (len(t.vars) - 1) + [int(np.sum(cands <= MAX_INNERMOST))]
            self._tile_rounding.append((cands, np.log(cands), fits,
                                        [(self.index[v], n) for v, n in zip(t.vars, allowed)]))
        self._choice_rounding = [(self.index[c.var], np.array(c.values, np.int64),
                                  np.array([_log(v) for v in c.values])) for c in self.choices]

    def penalty(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """sum_r max(p_r, 0)^2 per point of x (batch, variables), and its gradient in x."""
        above, below = np.maximum(x - self._hi, 0), np.maximum(self._lo - x, 0)  # 0 where a bound is infinite
        value = (above ** 2 + below ** 2).sum(axis=1)
        grad = 2 * (above - below)
        if len(self._nested):
            inside = np.maximum(x[:, self._nested] - x[:, self._outer], 0)  # an inner tile above its outer one
            value = value + (inside ** 2).sum(axis=1)
            grad[:, self._nested] += 2 * inside
            grad[:, self._outer] -= 2 * inside  # each variable is the outer one of at most one tile
        if len(self._limit_bounds):
            over = np.maximum(x @ self._limit_rows.T - self._limit_bounds, 0)  # (batch, limits)
            value = value + (over ** 2).sum(axis=1)
            grad = grad + 2 * over @ self._limit_rows
        return value, grad

    def encode(self, params: list[dict[str, int]]) -> np.ndarray:
        return np.array([[_log(p[v]) for v in self.variables] for p in params], np.float64).reshape(
            len(params), len(self.variables))

    def round(self, x: np.ndarray) -> np.ndarray:
        """Integer assignments (rows of x rounded), each tile variable a divisor of the one outside it and the
        innermost at most MAX_INNERMOST, each choice one of its values."""
        out = np.zeros(x.shape, np.int64)
        for cands, logs, fits, columns in self._tile_rounding:
            outer = np.full(len(x), len(cands) - 1)  # index of the divisor outside: the extent itself
            for j, n in columns:
                dist = np.where(fits[outer, :n], np.abs(logs[:n] - x[:, j:j + 1]), np.inf)
                outer = np.argmin(dist, axis=1)
                out[:, j] = cands[outer]
        for j, values, logs in self._choice_rounding:
            out[:, j] = values[np.argmin(np.abs(logs[None, :] - x[:, j:j + 1]), axis=1)]
        return out


def _log(v: int) -> float:
    """ln of a parameter value; a choice of 0 (no unrolling) sits at ln 1, below every positive value."""
    return math.log(max(v, 1))


def log_features(rows: np.ndarray) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """`features.program_vector` of rows (batch, stores, features), and the function taking a gradient with
    respect to it to one with respect to `rows`. Its aggregate part is sign(x) log2(1 + |x|) of the sum, then of
    the max, over the stores (the max's gradient goes to the first store that attains it); its slots are the same
    of each store's row (the stores past the last slot summed into it; an absent store's slot passes nothing)."""
    batch, stores, width = rows.shape
    at = (np.arange(batch)[:, None], rows.argmax(axis=1), np.arange(width)[None, :])  # each max's (point, store, f)
    stacked = np.concatenate([rows.sum(axis=1), rows[at]], axis=1)
    slots = fold_stores(rows)
    kept = slots.shape[1]
    slope, slot_slope = _signed_log_slope(stacked), _signed_log_slope(slots)
    value = np.concatenate([signed_log(stacked), np.full((batch, STORE_SLOTS * width), np.nan)], axis=1)
    value[:, 2 * width:(2 + kept) * width] = signed_log(slots).reshape(batch, -1)

    def vjp(grad: np.ndarray) -> np.ndarray:
        g = grad[:, :2 * width] * slope
        out = np.repeat(g[:, None, :width], stores, axis=1)
        out[at] += g[:, width:]
        per_slot = grad[:, 2 * width:(2 + kept) * width].reshape(batch, kept, width) * slot_slope
        out[:, :kept - 1] += per_slot[:, :-1]
        out[:, kept - 1:] += per_slot[:, -1:]
        return out

    return value, vjp


def _signed_log_slope(x: np.ndarray) -> np.ndarray:
    """d/dx of sign(x) log2(1 + |x|) (0 at 0, where the sign's square is)."""
    return np.sign(x) ** 2 / ((1.0 + np.abs(x)) * math.log(2))


class _Descent:
    """One structure's points under Adam: where they are, and the distinct rounded points visited so far.
    `smooth` holds (weight, smooth formulas) per point of the task's dimensions (`TaskSpace.smooth_points`)."""

    def __init__(self, key: tuple, smooth: list[tuple[float, object]], box: ParameterBox, seeds: list[Candidate],
                 learning_rate: float):
        self.key, self.smooth, self.box = key, smooth, box
        self.x = box.encode([c.values for c in seeds])
        self.learning_rate = learning_rate
        self.adam = Adam([self.x])
        self.seen = {tuple(r) for r in box.round(self.x)}
        self.points = list(self.seen)
        self.quiet = 0  # steps in a row that rounded to no point not seen before

    def step(self, grad: np.ndarray) -> None:
        self.adam.step([grad], self.learning_rate)  # moves self.x in place
        new = {tuple(r) for r in self.box.round(self.x)} - self.seen
        self.seen |= new
        self.points += new
        self.quiet = 0 if new else self.quiet + 1


class GradientSearch:
    """Proposes measurement batches for one task by gradient descent on the cost model."""

    def __init__(self, space: TaskSpace, model, options: GradientPolicy | None = None, seed: int = 0):
        self.space = space
        self.model = model
        self.options = options or GradientPolicy()
        self.rng = random.Random(seed)
        self._boxes: dict[tuple, ParameterBox] = {}
        self._known: dict[tuple, None] = {}  # structures whose smooth features this search has derived
        self._proposed: dict[Candidate, float] = {}  # the last batch, with the scores it was proposed on
        self._mistakes: list[list[float]] = []  # per measured batch: the score gaps of the pairs it misordered

    def propose(self, measured: set[Candidate], best: list[Candidate], n: int) -> list[Candidate]:
        """The next `n` candidates: `measured` are never proposed again; `best` (best first) give some of the
        seeds."""
        opt = self.options
        seeds = [c for c in best[:opt.best_seeds] if self._smooth(c) is not None]
        seeds += [c for c in self._default_seeds() if c not in seeds]
        if measured:  # a first round descends from the hand-written point alone (the module doc says why)
            seeds += self._model_seeds(opt.seeds - len(seeds), measured | set(seeds))
        groups: dict[tuple, list[Candidate]] = defaultdict(list)
        for c in seeds:
            groups[self.space.structure_key(c)].append(c)
        found = dict.fromkeys(c for c in self._descend(groups) if c not in measured)
        ranked, scores = self._ranked(list(found))
        if not measured:  # nothing of the task known yet: a short batch led by the hand-written point
            n = min(n, opt.first_measure)
            if self.space.default() in ranked:
                first = ranked.index(self.space.default())
                order = [first] + [k for k in range(len(ranked)) if k != first]
                ranked, scores = [ranked[k] for k in order], scores[order]
        batch = self._screened(ranked, scores, measured, best, n)
        taken = set(batch) | measured
        for _ in range(8 * n):  # too few distinct points: random valid ones fill the batch
            if len(batch) >= n or len(batch) < len(ranked):
                break
            c = self.space.sample(self.rng)
            if c not in taken:
                batch.append(c)
                taken.add(c)
        self._proposed = dict(zip(ranked, scores))
        return batch

    def observe(self, batch: list[Candidate], latencies: list[float]) -> None:
        """The latencies the tuner measured for `batch` (infinite: failed): the pairs of it that the model, at
        proposal, ordered wrongly (`screen`)."""
        timed = [(self._proposed[c], t) for c, t in zip(batch, latencies) if c in self._proposed and math.isfinite(t)]
        gaps = [si - sj for si, ti in timed for sj, tj in timed if si > sj and ti > tj * (1 + NOISE)]
        if len(timed) > 1:
            self._mistakes = [*self._mistakes[1 - CONFUSION_BATCHES:], gaps]

    def _screened(self, ranked: list[Candidate], scores: np.ndarray, measured: set[Candidate],
                  best: list[Candidate], n: int) -> list[Candidate]:
        """The first `n` of `ranked` that the model cannot rule out: scored no lower than the fastest measured
        candidate's score less the model's confusion on this task, or of a structure not measured here yet; at
        least `min_measure` of them. All of them while the confusion is not known."""
        opt = self.options
        incumbent = next((c for c in best if c in measured), None)
        if not opt.screen or incumbent is None or len(self._mistakes) < opt.screen_after:
            return ranked[:n]
        gaps = [g for batch in self._mistakes for g in batch]
        confusion = float(np.quantile(gaps, opt.confusion_quantile)) if gaps else 0.0
        bar = float(self.space.scores(self.model, [incumbent])[0]) - confusion
        known = {self.space.structure_key(c) for c in measured}
        keep = [c for c, s in zip(ranked, scores) if s >= bar or self.space.structure_key(c) not in known]
        return (keep + [c for c in ranked if c not in keep])[:max(min(n, opt.min_measure), min(n, len(keep)))]

    def _default_seeds(self) -> list[Candidate]:
        """The default point and `default_seeds - 1` neighbours of it, those whose smooth features exist: the
        descent starts from the hand-written schedule and moves away from it."""
        default = self.space.default()
        points = [default] + [self.space.neighbour(default, self.rng) for _ in range(self.options.default_seeds - 1)]
        out = []
        for c in dict.fromkeys(points[:self.options.default_seeds]):
            if self._smooth(c) is not None:
                self._known[self.space.structure_key(c)] = None
                out.append(c)
        return out

    def _sample_seeds(self, n: int) -> list[Candidate]:
        """Rejection sampling: random valid candidates of structures whose smooth features exist. Deriving a
        structure's features costs more than descending on it, so
        at most `new_structures` structures of each sketch that the search has not derived before enter a
        round; once they have, further seeds of that sketch are random numbers on one of its structures already
        derived (the evolutionary search bounds its new structures the same way). The bound is per sketch so that
        the hand-written default's sketch keeps its share of the seeds in a task's first round."""
        out: list[Candidate] = []
        room = [self.options.new_structures] * len(self.space.sketches)
        for _ in range(20 * max(n, 0)):
            if len(out) >= n:
                break
            c = self.space.sample(self.rng)
            key = self.space.structure_key(c)
            known = [k for k in self._known if k[0] == c.sketch]
            if key not in self._known and room[c.sketch] <= 0 and known:
                structure = self.rng.choice(known)[1]
                c = Candidate.of(c.sketch, self.space.sketches[c.sketch].sample(self.rng, fixed=dict(structure)))
            elif key not in self._known:
                room[c.sketch] -= 1
            if self._smooth(c) is not None:
                self._known[self.space.structure_key(c)] = None
                out.append(c)
        return out

    def _model_seeds(self, n: int, taken: set[Candidate]) -> list[Candidate]:
        """The `n` seeds the cost model likes best among `seed_pool` times as many valid random ones (a pretrained
        model's knowledge of the space, before this task's first measurement): the descent starts from points
        that already look fast, and explores from there."""
        if n <= 0:
            return []
        pool = [c for c in dict.fromkeys(self._sample_seeds(n * self.options.seed_pool)) if c not in taken]
        return self._rank(pool)[:n] if len(pool) > n else pool

    def _smooth(self, c: Candidate):
        return self.space.smooth_points(self.space.structure_key(c), self.options.tau)

    def _box(self, key: tuple) -> ParameterBox:
        if key not in self._boxes:
            formulas = self.space.smooth_formulas(key, self.options.tau)
            self._boxes[key] = ParameterBox(self.space.parameter_space(key), formulas.variables)
        return self._boxes[key]

    def _descend(self, groups: dict[tuple, list[Candidate]]) -> list[Candidate]:
        """Adam from each structure's seeds, every structure in lockstep so that each step calls the cost model
        once on all their points (a call on a few rows costs about as much as on a few dozen); every visited
        point, rounded, as a valid candidate."""
        opt = self.options
        runs = [_Descent(key, self.space.smooth_points(key, opt.tau), self._box(key), seeds, opt.learning_rate)
                for key, seeds in groups.items()]
        moving = [r for r in runs if r.x.shape[1]]
        for _ in range(opt.steps):
            if not moving:
                break
            for r, grad in zip(moving, self._objective_gradients([(r.smooth, r.box, r.x) for r in moving])):
                r.step(grad)
            moving = [r for r in moving if r.quiet < opt.patience]
        out = []
        for r in runs:
            sketch, structure = r.key[0], dict(r.key[1])
            for row in r.points:
                c = Candidate.of(sketch, {**structure, **dict(zip(r.box.variables, row))})
                if self.space.valid(c):
                    out.append(c)
        return out

    def _objective_gradients(self, parts: list[tuple]) -> list[np.ndarray]:
        """d/dx of -sum_p w_p C(log-features_p(x)) + penalty * sum_r max(p_r(x), 0)^2 per point x, for each
        (weighted smooth formulas of the dimensions' points, box, points x) of `parts` (a task without dynamic
        dimensions has one point of weight 1), with one call of the cost model on the points of all of them."""
        vjps, features = [], []
        for points, _, x in parts:
            for weight, smooth in points:
                rows, rows_vjp = smooth.value_and_vjp(x)
                f, features_vjp = log_features(rows)
                vjps.append((weight, rows_vjp, features_vjp))
                features.append(f)
        _, score_grad = self.model.score_and_gradient(np.concatenate(features))
        out, start, parts_vjps = [], 0, iter(vjps)
        for points, box, x in parts:
            grad = self.options.penalty * box.penalty(x)[1]
            for _ in points:
                weight, rows_vjp, features_vjp = next(parts_vjps)
                grad = grad + rows_vjp(features_vjp(-weight * score_grad[start:start + len(x)]))
                start += len(x)
            out.append(grad)
        return out

    def _rank(self, cands: list[Candidate]) -> list[Candidate]:
        return self._ranked(cands)[0]

    def _ranked(self, cands: list[Candidate]) -> tuple[list[Candidate], np.ndarray]:
        """`cands` best-scored first, and their scores in that order."""
        if not cands:
            return [], np.zeros(0)
        scores = self.space.scores(self.model, cands)
        order = np.argsort(-scores, kind="stable")
        return [cands[i] for i in order], scores[order]
