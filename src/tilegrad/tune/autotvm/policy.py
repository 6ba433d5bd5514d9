"""The "autotvm" search policy: a task's template configs ranked by the XGBoost model and explored by parallel
simulated annealing (`annealing.py`), as TVM's model-based tuner does.

Each round, while the task has fewer than `warmup` measured configs (no data to rank by), the batch is random
configs; after that, the chains anneal under the model's scores (starting from the best measured configs and
random ones) and the batch is the best-scored configs not yet measured, a share `eps_greedy` of it random. The
model is retrained after every round by the tuner's callbacks. A task no template schedules keeps its default
schedule: its search proposes nothing else, and the tuning summary says so (`task_space.UntemplatedSpace`).
"""

from __future__ import annotations

import dataclasses
import random
from typing import ClassVar

import numpy as np

from ..cost_model.model import CostModel
from ..search.policy import register_policy
from ..task import Task
from .annealing import AnnealingOptions, anneal
from .space import ConfigEntity
from .task_space import TemplateSpace, UntemplatedSpace, task_space


@register_policy("autotvm")
@dataclasses.dataclass(frozen=True)
class AutoTVMPolicy:
    """AutoTVM's tuner with its XGBoost rank model. `plan_size` is how many of the best-scored configs the
    annealing keeps per round."""

    name: ClassVar[str] = "autotvm"
    cost_model: ClassVar[str] = "xgb-rank"

    measure_per_round: int = 16
    eps_greedy: float = 0.05
    warmup: int = 8
    plan_size: int = 64
    annealing: AnnealingOptions = dataclasses.field(default_factory=AnnealingOptions)

    def space_for(self, task: Task) -> TemplateSpace | UntemplatedSpace:
        return task_space(task)

    def for_task(self, space: TemplateSpace | UntemplatedSpace, model: CostModel,
                 seed: int) -> AutoTVMSearch | KeepDefault:
        if isinstance(space, UntemplatedSpace):
            return KeepDefault(space)
        return AutoTVMSearch(space, model, self, seed)


class KeepDefault:
    """The search of an untemplated task: the default schedule, where it is not measured yet (a search from
    nothing, `TuneOptions(from_defaults=False)`), and nothing after it."""

    def __init__(self, space: UntemplatedSpace):
        self.space = space

    def propose(self, measured: set, best: list, n: int) -> list:
        return [] if self.space.default() in measured else [self.space.default()]


class AutoTVMSearch:
    """Proposes one task's measurement batches."""

    def __init__(self, space: TemplateSpace, model: CostModel, options: AutoTVMPolicy, seed: int):
        self.space = space
        self.model = model
        self.options = options
        self.rng = random.Random(seed)

    def propose(self, measured: set[ConfigEntity], best: list[ConfigEntity], n: int) -> list[ConfigEntity]:
        opt = self.options
        taken = {c.index for c in measured}
        batch: list[ConfigEntity] = []
        if len(measured) >= opt.warmup:
            top = anneal(len(self.space), self.space.configs.neighbour, self._score, opt.plan_size, taken,
                         self.rng, opt.annealing, starts=[c.index for c in best])
            for i in top:
                if len(batch) >= n - round(n * opt.eps_greedy):
                    break
                self._take(i, batch, taken)
        for _ in range(20 * n):  # random configs: warm-up, the epsilon share, or what the annealing left short
            if len(batch) >= n or len(taken) >= len(self.space):
                break
            self._take(self.rng.randrange(len(self.space)), batch, taken)
        return batch

    def _take(self, index: int, batch: list[ConfigEntity], taken: set[int]) -> None:
        if index in taken:
            return
        taken.add(index)
        c = self.space.get(index)
        if self.space.valid(c):
            batch.append(c)

    def _score(self, indices) -> np.ndarray:
        return self.model.predict(self.space.features([self.space.get(i) for i in indices]))
