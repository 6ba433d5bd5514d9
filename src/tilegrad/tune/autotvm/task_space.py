"""A task's configs as the tuner's candidates: the space of the task's template, or, for a task no template
schedules, the task's sketches left at the default schedule.

Both answer what the tuning loop asks of a space (`default`, `trace`, `origin`, `from_origin`, `features`) and a
`note` for the tuning summary. A config's record keeps the template's space name, the config's index and its
knob values in the `origin` JSON, so a rerun recovers it and `compile(db=)` applies its trace like any other.
Features are the config's knob values (padded to KNOB_FEATURES columns) followed by the loop-program features
of its scheduled loop nest (`itervar.py`). An untemplated task's rows have the same columns, all missing (NaN),
so every task of a run feeds one model.
"""

from __future__ import annotations

import json

import numpy as np

from ...errors import ScheduleError
from ...schedule.trace import Trace
from ..search.space import TaskSpace
from ..task import Task
from .itervar import WIDTH, itervar_features
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
        self._traces: dict[int, Trace | ScheduleError] = {}
        self._loop_features: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.configs)

    def get(self, index: int) -> ConfigEntity:
        return self.configs.get(index)

    def default(self) -> ConfigEntity:
        return self.configs.default()

    def trace(self, c: ConfigEntity) -> Trace:
        """The template's schedule at `c` as a trace; a ScheduleError where the primitives refuse it."""
        self._schedule(c)
        trace = self._traces[c.index]
        if isinstance(trace, ScheduleError):
            raise trace
        return trace

    def valid(self, c: ConfigEntity) -> bool:
        """Whether the template's schedule at `c` is one the primitives accept."""
        self._schedule(c)
        return not isinstance(self._traces[c.index], ScheduleError)

    def _schedule(self, c: ConfigEntity) -> None:
        """Build `c`'s schedule once: keep its trace (or the error) and its loop features."""
        if c.index in self._traces:
            return
        try:
            sch = self.template.schedule(c, self.task.compute()[1])
        except ScheduleError as exc:
            self._traces[c.index] = exc
            self._loop_features[c.index] = np.full(WIDTH, np.nan)
            return
        self._traces[c.index] = sch.trace
        self._loop_features[c.index] = itervar_features(sch.state)

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
        for c in candidates:
            self._schedule(c)
        return np.concatenate([knobs, np.stack([self._loop_features[c.index] for c in candidates])], axis=1)


class UntemplatedSpace(TaskSpace):
    """A task no template schedules: its sketches, of which the search proposes none, so the default schedule
    stays; its features (the default's, measured) are all missing, in the templated tasks' columns."""

    def __init__(self, task: Task, reason: str):
        super().__init__(task)
        self.note = f"no autotvm template ({reason}): default schedule kept"

    def features(self, candidates) -> np.ndarray:
        return np.full((len(candidates), KNOB_FEATURES + WIDTH), np.nan)


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
