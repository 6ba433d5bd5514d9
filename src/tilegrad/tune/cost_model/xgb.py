"""AutoTVM's cost model: XGBoost trees with a pairwise ranking objective over a config's knob features and its
loop-program features (`autotvm/task_space.py` builds the rows).

As the lambdarank trees of `trees.py`, it ranks the candidates of each task (query groups are task keys, labels
the relevance levels of throughput over the task's best), is retrained from scratch on every row at each update,
and scores at random until a task has two different levels, so the search samples at random while there is no
data. XGBoost comes from the `xgboost-cpu` wheel (no NCCL, no CUDA runtime).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import xgboost as xgb

from .trees import RankingTrees

_FORMAT = "tilegrad.xgb_rank_model/1"


class XGBRankModel(RankingTrees):
    """`rank:pairwise` boosted trees (`num_rounds` of them); `threads` is XGBoost's thread count (1 by default, so
    training does not compete with measurement)."""

    DEFAULT_PARAMS: ClassVar[dict] = {"objective": "rank:pairwise", "eta": 0.3, "max_depth": 6, "min_child_weight": 1,
                      "subsample": 1.0, "gamma": 1e-4, "tree_method": "hist", "verbosity": 0}

    def __init__(self, *, num_rounds: int = 100, threads: int = 1, params: dict | None = None,
                 rng: np.random.Generator | None = None):
        super().__init__(num_rounds, {**self.DEFAULT_PARAMS, **(params or {}), "nthread": threads, "seed": 0}, rng)

    def _fit(self, x: np.ndarray, levels: np.ndarray, sizes: list[int]) -> xgb.Booster:
        data = xgb.DMatrix(x, label=levels, missing=np.nan, nthread=self.params["nthread"])
        data.set_group(sizes)
        return xgb.train(self.params, data, num_boost_round=self.num_rounds)

    def _score(self, x: np.ndarray) -> np.ndarray:
        return self._booster.inplace_predict(x, missing=np.nan)

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
        self._forget_rows()
