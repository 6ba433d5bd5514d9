"""Where the default rules take their degrees of freedom from.

A rule asks for each parameter by name, with the values it may take and the hand-written default: `choice` for a
numeric one (a tile size, which may stay an expression Var in the trace) and `pick` for a structural one (a loop
order, a parallel grain: it shapes the trace, so it is always an integer). Compiling asks `Defaults`, which answers
every request with its default, so the rules give the hand-written schedule; the default sketch asks a
`sketch.Space`, which records each parameter with its default, so the same rules give a space whose default point
is that schedule.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ..errors import ScheduleError
from ..te import expr as E


class Knobs(Protocol):
    def choice(self, name: str, values: Iterable[int], default: int) -> int | E.Var: ...

    def pick(self, name: str, values: Iterable[int], default: int) -> int: ...


class Defaults:
    """The hand-written point: every parameter its default."""

    def choice(self, name: str, values: Iterable[int], default: int) -> int:
        return checked_default(name, values, default)

    def pick(self, name: str, values: Iterable[int], default: int) -> int:
        return checked_default(name, values, default)


def checked_default(name: str, values: Iterable[int], default: int) -> int:
    """`default`, after checking that it is one of `values` (a rule whose default lies outside its own space
    would make a default point the search cannot return to)."""
    values = tuple(values)
    if default not in values:
        raise ScheduleError(f"parameter {name}: default {default} is not one of {values}")
    return default
