"""A task's configs as the tuner's candidates: the space of the task's template, or, for a task no template
schedules, the task's sketches left at the default schedule.

Both answer what the tuning loop asks of a space (`default`, `trace`, `origin`, `from_origin`, `features`) and a
`note` for the tuning summary. A config's record keeps the template's space name, the config's index and its
knob values in the `origin` JSON, so a rerun recovers it and `compile(db=)` applies its trace like any other.
Features are the config's knob values (padded to KNOB_FEATURES columns) followed by the loop-program features
of its lowered kernel (`features/extract.py`); an untemplated task has no knobs (NaN, missing for the trees),
so every task of a run feeds one model.
"""

from __future__ import annotations

import json

import numpy as np

from ...errors import ScheduleError
from ...kernel import lower_kernel
from ...schedule.trace import Trace
from ..features.extract import FEATURE_NAMES, aggregate, features
from ..search.space import TaskSpace
from ..task import Task
from .space import ConfigEntity, ConfigSpace
from .template import Template, find_template

KNOB_FEATURES = 24


class TemplateSpace:
    """The configs of one task's template; a candidate is a `ConfigEntity`."""

    def __init__(self, task: Task, template: Template, configs: ConfigSpace):
        self.task = task
        self.template = template
        self.configs = configs
        self.note = f"autotvm template {template.name}, {len(configs)} configs"
        self._traces: dict[int, Trace] = {}
        self._loop_features: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.configs)

    def get(self, index: int) -> ConfigEntity:
        return self.configs.get(index)

    def default(self) -> ConfigEntity:
        return self.configs.default()

    def trace(self, c: ConfigEntity) -> Trace:
        if c.index not in self._traces:
            self._traces[c.index] = self.template.schedule(c, self.task.compute()[1]).trace
        return self._traces[c.index]

    def valid(self, c: ConfigEntity) -> bool:
        """Whether the template's schedule at `c` is one the primitives accept."""
        try:
            self.trace(c)
        except ScheduleError:
            return False
        return True

    def origin(self, c: ConfigEntity, policy: str) -> str:
        return json.dumps({"policy": policy, "template": self.template.name, "config": c.to_json()})

    def from_origin(self, origin: str) -> ConfigEntity | None:
        """The config a record names, or None (another policy's record, or a template that changed since)."""
        try:
            return self.configs.from_json(json.loads(origin)["config"])
        except (ValueError, KeyError, TypeError):
            return None

    def features(self, candidates: list[ConfigEntity]) -> np.ndarray:
        indices = [c.index for c in candidates]
        knobs = self.configs.knob_features(indices, KNOB_FEATURES)
        return np.concatenate([knobs, np.stack([self._loop_features_of(c) for c in candidates])], axis=1)

    def _loop_features_of(self, c: ConfigEntity) -> np.ndarray:
        if c.index not in self._loop_features:
            try:
                kernel = lower_kernel(self.task.compute(), self.trace(c), name="candidate")
                self._loop_features[c.index] = aggregate(features(kernel))
            except ScheduleError:  # a config the primitives refuse: scored as unknown, and fails if measured
                self._loop_features[c.index] = np.full(2 * len(FEATURE_NAMES), np.nan)
        return self._loop_features[c.index]


class UntemplatedSpace(TaskSpace):
    """A task no template schedules: its sketches, of which the search proposes none, so the default schedule
    stays; features carry NaN knob columns to match the templated tasks'."""

    def __init__(self, task: Task, reason: str):
        super().__init__(task)
        self.note = f"no autotvm template ({reason}): default schedule kept"

    def features(self, candidates) -> np.ndarray:
        loop = super().features(candidates)
        return np.concatenate([np.full((len(loop), KNOB_FEATURES), np.nan), loop], axis=1)


def task_space(task: Task) -> TemplateSpace | UntemplatedSpace:
    """The task's template space, or the untemplated space with the reason there is none."""
    outputs = task.compute()[1]
    template = find_template(outputs)
    if template is None:
        return UntemplatedSpace(task, "no stage of a templated op")
    try:
        configs = template.space(outputs)
    except ScheduleError as exc:
        return UntemplatedSpace(task, f"template {template.name} refused: {exc}")
    return TemplateSpace(task, template, configs) if len(configs) > 1 else UntemplatedSpace(
        task, f"template {template.name} has one config")
