"""Knobs for tests of a rule's alternatives: the defaults, some parameters forced."""

from __future__ import annotations

from tilegrad.schedule.knobs import Defaults


class Forced(Defaults):
    """The defaults, with the parameters whose names end in one of `forced`'s keys set to its value."""

    def __init__(self, **forced):
        self.forced = forced

    def pick(self, name, values, default):
        return next((v for k, v in self.forced.items() if name.endswith(k)), super().pick(name, values, default))
