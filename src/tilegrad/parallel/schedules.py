"""Pipeline schedules: the order in which one stage runs the forwards and backwards of its micro-batches.

A schedule is data, a tuple of `Action`s per stage, so it can be checked and compared without processes: the
pipeline runtime (`pipeline.py`) only walks it. GPipe runs every forward, then every backward, so a stage holds the
activations of all micro-batches at once. 1F1B (MindSpore §3.1.4, Fig. 3.8) runs `num_stages - stage - 1` warm-up
forwards, then alternates one forward and one backward, then drains the remaining backwards: a stage never holds
more than `num_stages - stage` micro-batches' activations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import TilegradError

FORWARD = "F"
BACKWARD = "B"


@dataclass(frozen=True)
class Action:
    """Run the forward ("F") or the backward ("B") of micro-batch `micro` on this stage."""

    kind: str
    micro: int

    def __str__(self) -> str:
        return f"{self.kind}{self.micro}"


def _check(num_stages: int, num_micro: int, stage: int) -> None:
    if num_stages < 1 or num_micro < 1 or not 0 <= stage < num_stages:
        raise TilegradError(f"pipeline schedule: need num_stages >= 1, num_micro >= 1 and 0 <= stage < num_stages, "
                            f"got num_stages={num_stages}, num_micro={num_micro}, stage={stage}")


def gpipe(num_stages: int, num_micro: int, stage: int) -> tuple[Action, ...]:
    """All forwards, then all backwards in the same micro-batch order."""
    _check(num_stages, num_micro, stage)
    return (tuple(Action(FORWARD, m) for m in range(num_micro))
            + tuple(Action(BACKWARD, m) for m in range(num_micro)))


def one_f_one_b(num_stages: int, num_micro: int, stage: int) -> tuple[Action, ...]:
    """Warm-up forwards, then one forward and one backward in turn, then the cool-down backwards."""
    _check(num_stages, num_micro, stage)
    warmup = min(num_stages - stage - 1, num_micro)
    actions = [Action(FORWARD, m) for m in range(warmup)]
    for i in range(num_micro - warmup):
        actions += [Action(FORWARD, warmup + i), Action(BACKWARD, i)]
    actions += [Action(BACKWARD, m) for m in range(num_micro - warmup, num_micro)]
    return tuple(actions)


SCHEDULES: dict[str, Callable[[int, int, int], tuple[Action, ...]]] = {"gpipe": gpipe, "1f1b": one_f_one_b}


def schedule_for(name: str, num_stages: int, num_micro: int, stage: int) -> tuple[Action, ...]:
    """The named schedule's actions for one stage; an unknown name lists the known ones."""
    if name not in SCHEDULES:
        raise TilegradError(f"pipeline schedule {name!r} is unknown; choose one of {sorted(SCHEDULES)}")
    return SCHEDULES[name](num_stages, num_micro, stage)


def peak_in_flight(actions: Sequence[Action]) -> int:
    """The most micro-batches whose forward has run and backward has not: the activations a stage must hold."""
    live = peak = 0
    for a in actions:
        live += 1 if a.kind == FORWARD else -1
        peak = max(peak, live)
    return peak
