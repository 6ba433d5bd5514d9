"""AutoTVM's cost model: XGBoost trees with a pairwise ranking objective over a config's knob features and its
loop-program features (`autotvm/task_space.py` builds the rows).

As the lambdarank trees of `trees.py`, it ranks the candidates of each task (query groups are task keys, labels
the relevance levels of throughput over the task's best), is retrained from scratch on every row at each update,
and scores at random until a task has two different levels, so the search samples at random while there is no
data. XGBoost comes from the `xgboost-cpu` wheel (no NCCL, no CUDA runtime).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import xgboost as xgb

from .trees import _clean_throughput, _query_groups, relevance

_FORMAT = "tilegrad.xgb_rank_model/1"


class XGBRankModel:
    """`rank:pairwise` boosted trees (`num_rounds` of them); `threads` is XGBoost's thread count (1 by default, so
    training does not compete with measurement)."""

    DEFAULT_PARAMS: ClassVar[dict] = {"objective": "rank:pairwise", "eta": 0.3, "max_depth": 6, "min_child_weight": 1,
                      "subsample": 1.0, "gamma": 1e-4, "tree_method": "hist", "verbosity": 0}

    def __init__(self, *, num_rounds: int = 100, threads: int = 1, params: dict | None = None,
                 rng: np.random.Generator | None = None):
        self.num_rounds = num_rounds
        self.params = {**self.DEFAULT_PARAMS, **(params or {}), "nthread": threads, "seed": 0}
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._booster: xgb.Booster | None = None
        self._x: list[np.ndarray] = []
        self._throughput: list[np.ndarray] = []
        self._groups: list[np.ndarray] = []
        self.num_features: int | None = None

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = self._check_features(x)
        if self._booster is None:
            return self._rng.random(len(x))
        return self._booster.inplace_predict(x, missing=np.nan)

    def update(self, x: np.ndarray, throughput: np.ndarray, groups: Sequence[str]) -> None:
        """Add the rows (features, measured throughput, task key per row) and retrain on everything seen."""
        x = self._check_features(x)
        groups = np.asarray([str(g) for g in groups])
        if not len(x) == len(throughput) == len(groups):
            raise ValueError(f"update: {len(x)} feature rows, {len(throughput)} throughputs and {len(groups)} task "
                             "keys; pass one of each per candidate")
        self._x.append(x)
        self._throughput.append(_clean_throughput(throughput))
        self._groups.append(groups)
        x, groups = np.concatenate(self._x), np.concatenate(self._groups)
        levels = relevance(np.concatenate(self._throughput), groups)
        order, sizes = _query_groups(groups, levels)
        if not sizes:
            return  # no task has two different levels yet: nothing to rank
        data = xgb.DMatrix(x[order], label=levels[order], missing=np.nan, nthread=self.params["nthread"])
        data.set_group(sizes)
        self._booster = xgb.train(self.params, data, num_boost_round=self.num_rounds)

    def save(self, path: str | Path) -> None:
        """Write the trees and settings as JSON (the training rows stay in the records database)."""
        booster = None if self._booster is None else bytes(self._booster.save_raw("json")).decode()
        Path(path).write_text(json.dumps({"format": _FORMAT, "num_rounds": self.num_rounds, "params": self.params,
                                          "num_features": self.num_features, "booster": booster}))

    def load(self, path: str | Path) -> None:
        """Replace this model by the one saved at `path`; later updates retrain on the rows given after loading."""
        state = json.loads(Path(path).read_text())
        if state.get("format") != _FORMAT:
            raise ValueError(f"{path}: not a saved XGBRankModel (format {state.get('format')!r}, want {_FORMAT!r})")
        self.num_rounds, self.params, self.num_features = state["num_rounds"], state["params"], state["num_features"]
        self._booster = None
        if state["booster"] is not None:
            self._booster = xgb.Booster(params=self.params)
            self._booster.load_model(bytearray(state["booster"].encode()))
        self._x, self._throughput, self._groups = [], [], []

    def _check_features(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=np.float64, ndmin=2)
        if self.num_features is None:
            self.num_features = x.shape[1]
        elif x.shape[1] != self.num_features:
            raise ValueError(f"features have {x.shape[1]} columns but this model was trained on "
                             f"{self.num_features}; a new feature set needs a new model")
        x[~np.isfinite(x)] = np.nan
        return x
