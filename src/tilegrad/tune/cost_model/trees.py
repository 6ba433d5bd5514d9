"""Ansor's cost model: gradient-boosted ranking trees over program features, and ranking metrics for any model.

`TreeCostModel` is Ansor's: gradient-boosted trees trained with a ranking objective (LightGBM's `lambdarank`),
with query groups made of one task's candidates. Labels are relevance levels from throughput normalised per task:

    level = round(RELEVANCE_LEVELS * throughput / best throughput of the task)        (0 .. 30)

so the best candidate of every task is level 30 and a failed one (throughput 0) level 0, whatever the task's
absolute speed. The gain of a level is the level itself (LightGBM's default, 2^level - 1, cares almost only about
the top few and ranks mid-table candidates worse), and every pair of a query counts, not just the top 30.
A task's rows are shuffled (fixed seed) into queries of at most MAX_GROUP_ROWS, which keeps the pairwise cost
linear in the rows. The model is retrained from scratch on every row seen so far at each `update` (the data is
small: a tuning run's rows train in seconds on one thread). Until it has seen a task with two different levels it
scores at random, so the first rounds of a search sample at random, as in Ansor.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

import lightgbm as lgb
import numpy as np

from .model import CostModel

RELEVANCE_LEVELS = 30  # labels are 0..30; label_gain below has one entry per level
MAX_GROUP_ROWS = 256  # a task's rows are cut into query groups of at most this many (lambdarank cost per group)
_FORMAT = "tilegrad.tree_cost_model/1"


def relevance(throughput: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    """Integer levels 0..RELEVANCE_LEVELS: throughput over the best of its task, scaled and rounded."""
    tp = _clean_throughput(throughput)
    keys = np.asarray(groups)
    levels = np.zeros(len(tp), dtype=np.int64)
    for key in np.unique(keys):
        rows = keys == key
        best = tp[rows].max()
        if best > 0:
            levels[rows] = np.rint(RELEVANCE_LEVELS * tp[rows] / best)
    return levels


class RankingTrees(abc.ABC):
    """What the ranking-tree models share: the rows seen so far (features, throughput, task key), relevance levels
    and query groups made from them, and random scores until a task has two different levels. A subclass fits its
    booster on (rows, levels, query sizes) in `_fit` and scores rows with it in `_score`."""

    def __init__(self, num_rounds: int, params: dict, rng: np.random.Generator | None):
        self.num_rounds = num_rounds
        self.params = params
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._booster = None
        self._forget_rows()
        self.num_features: int | None = None

    @property
    def trained(self) -> bool:
        return self._booster is not None

    @property
    def num_rows(self) -> int:
        """Rows seen by `update` since construction (or since `load`)."""
        return sum(len(t) for t in self._throughput)

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = self._check_features(x)
        if self._booster is None:
            return self._rng.random(len(x))
        return self._score(x)

    def update(self, x: np.ndarray, throughput: np.ndarray, groups: Sequence[str]) -> None:
        """Add the rows (features, measured throughput, task key per row) and retrain on everything seen."""
        x = self._check_features(x)
        throughput = _clean_throughput(throughput)
        groups = np.asarray([str(g) for g in groups])
        if not len(x) == len(throughput) == len(groups):
            raise ValueError(
                f"update: {len(x)} feature rows, {len(throughput)} throughputs and {len(groups)} task keys;"
                " pass one of each per candidate"
            )
        self._x.append(x)
        self._throughput.append(throughput)
        self._groups.append(groups)
        x, groups = np.concatenate(self._x), np.concatenate(self._groups)
        levels = relevance(np.concatenate(self._throughput), groups)
        order, sizes = _query_groups(groups, levels)
        if sizes:  # else no task has two different levels yet: nothing to rank
            self._booster = self._fit(x[order], levels[order], sizes)

    @abc.abstractmethod
    def _fit(self, x: np.ndarray, levels: np.ndarray, sizes: list[int]):
        """A booster trained on `x` with relevance `levels`, the rows in query groups of `sizes` rows."""

    @abc.abstractmethod
    def _score(self, x: np.ndarray) -> np.ndarray:
        """The trained booster's scores of the rows `x` (higher: faster)."""

    def _forget_rows(self) -> None:
        self._x: list[np.ndarray] = []
        self._throughput: list[np.ndarray] = []
        self._groups: list[np.ndarray] = []

    def _check_features(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64, ndmin=2)
        if x.ndim != 2:
            raise ValueError(f"features must be a matrix (rows x features), got shape {x.shape}")
        if self.num_features is None:
            self.num_features = x.shape[1]
        elif x.shape[1] != self.num_features:
            raise ValueError(
                f"features have {x.shape[1]} columns but this model was trained on {self.num_features};"
                " a new feature set needs a new model"
            )
        x[~np.isfinite(x)] = np.nan  # both tree libraries treat nan as missing
        return x


class TreeCostModel(RankingTrees):
    """LightGBM lambdarank trees over per-task relevance levels; random scores before the first useful update.

    `params` override the LightGBM defaults below (e.g. `{"num_leaves": 63}`); `num_rounds` is the number of trees.
    `threads` is LightGBM's thread count: 1 by default, so training does not compete with measurement. `read`, where
    given, picks the columns the trees read from each matrix handed in (`features.aggregate_part`: the sums and
    maxes of program vectors alone).
    """

    DEFAULT_PARAMS: ClassVar[dict] = {
        "objective": "lambdarank",
        "learning_rate": 0.1,
        "num_leaves": 31,
        "min_data_in_leaf": 5,  # early rounds have tens of rows
        "lambdarank_truncation_level": MAX_GROUP_ROWS,  # every pair in a group, not just the top
        "label_gain": list(range(RELEVANCE_LEVELS + 1)),
        "feature_pre_filter": False,
        "deterministic": True,
        "verbose": -1,
    }

    def __init__(
        self,
        *,
        num_rounds: int = 150,
        threads: int = 1,
        params: dict | None = None,
        rng: np.random.Generator | None = None,
        read: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        super().__init__(num_rounds, {**self.DEFAULT_PARAMS, **(params or {}), "num_threads": threads}, rng)
        self.read = read

    def _check_features(self, x: np.ndarray) -> np.ndarray:
        return super()._check_features(x if self.read is None else self.read(np.asarray(x)))

    def _fit(self, x: np.ndarray, levels: np.ndarray, sizes: list[int]) -> lgb.Booster:
        data = lgb.Dataset(x, label=levels, group=sizes, params={"verbose": -1})
        return lgb.train(self.params, data, num_boost_round=self.num_rounds)

    def _score(self, x: np.ndarray) -> np.ndarray:
        return self._booster.predict(x, num_threads=self.params["num_threads"])

    def save(self, path: str | Path) -> None:
        """Write the trees and settings as JSON. The training rows are not saved: the records database has them."""
        state = {
            "format": _FORMAT,
            "num_rounds": self.num_rounds,
            "params": self.params,
            "num_features": self.num_features,
            "booster": None if self._booster is None else self._booster.model_to_string(),
        }
        Path(path).write_text(json.dumps(state))

    def load(self, path: str | Path) -> None:
        """Replace this model by the one saved at `path`; later updates retrain on the rows given after loading."""
        state = json.loads(Path(path).read_text())
        if state.get("format") != _FORMAT:
            raise ValueError(f"{path}: not a saved TreeCostModel (format {state.get('format')!r}, want {_FORMAT!r})")
        self.num_rounds = state["num_rounds"]
        self.params = state["params"]
        self.num_features = state["num_features"]
        self._booster = None if state["booster"] is None else lgb.Booster(model_str=state["booster"])
        self._forget_rows()


def _clean_throughput(throughput: np.ndarray) -> np.ndarray:
    tp = np.asarray(throughput, dtype=np.float64).reshape(-1)
    return np.where(np.isfinite(tp) & (tp > 0), tp, 0.0)


def _query_groups(groups: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Row order and query sizes for LightGBM: each task's rows, in chunks of at most MAX_GROUP_ROWS, keeping
    only tasks with two different levels (a query with one level teaches the ranking nothing)."""
    rng = np.random.default_rng(0)  # which rows share a query; fixed, so retraining is deterministic
    order, sizes = [], []
    for key in np.unique(groups):
        rows = np.flatnonzero(groups == key)
        if len(np.unique(levels[rows])) < 2:
            continue
        rows = rng.permutation(rows)  # each query mixes early (random) and late (searched) candidates
        for start in range(0, len(rows), MAX_GROUP_ROWS):
            chunk = rows[start : start + MAX_GROUP_ROWS]
            order.append(chunk)
            sizes.append(len(chunk))
    return (np.concatenate(order) if order else np.zeros(0, dtype=np.int64)), sizes


def ranking_accuracy(model: CostModel, x: np.ndarray, throughput: np.ndarray, groups: Sequence[str]) -> float:
    """Fraction of same-task pairs with different throughput that the model orders correctly (a tie in the
    model's scores counts half), pooled over tasks, i.e. tasks weighted by their number of pairs; nan if none."""
    scores = model.predict(x)
    tp = _clean_throughput(throughput)
    keys = np.asarray([str(g) for g in groups])
    correct = pairs = 0.0
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        c, p = pair_counts(scores[rows], tp[rows])
        correct += c
        pairs += p
    return correct / pairs if pairs else float("nan")


def pair_counts(scores: np.ndarray, tp: np.ndarray, block: int = 512) -> tuple[float, int]:
    """(correctly ordered pairs, ties counting half; pairs with different throughput), in row blocks."""
    correct = 0.0
    pairs = 0
    for start in range(0, len(tp), block):
        t_diff = np.sign(tp[start : start + block, None] - tp[None, :])
        s_diff = np.sign(scores[start : start + block, None] - scores[None, :])
        counted = t_diff > 0  # each unordered pair once, from its faster member
        pairs += int(counted.sum())
        correct += float((s_diff[counted] > 0).sum() + 0.5 * (s_diff[counted] == 0).sum())
    return correct, pairs


def top_k_recall(model: CostModel, x: np.ndarray, throughput: np.ndarray, groups: Sequence[str], k: int) -> float:
    """Per task, the share of the k fastest candidates that are among the model's k best; averaged over tasks."""
    scores = model.predict(x)
    tp = _clean_throughput(throughput)
    keys = np.asarray([str(g) for g in groups])
    recalls = []
    for key in np.unique(keys):
        rows = np.flatnonzero(keys == key)
        kk = min(k, len(rows))
        true_top = set(rows[np.argsort(-tp[rows], kind="stable")[:kk]])
        pred_top = set(rows[np.argsort(-scores[rows], kind="stable")[:kk]])
        recalls.append(len(true_top & pred_top) / kk)
    return float(np.mean(recalls)) if recalls else float("nan")
