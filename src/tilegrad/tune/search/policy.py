"""The search-policy protocol, and the registry that names its implementations.

A policy is its settings (a frozen dataclass, say) plus `for_task`, which binds it to one task's space and the
cost model, giving the `TaskSearch` that proposes that task's batches round by round. Policies register by name
(`@register_policy("gradient")`) and the tuner takes a name or an instance, so a new policy plugs in without
touching the tuner. A policy never builds or times anything: it sees only the candidates measured so far.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from ...errors import TilegradError

if TYPE_CHECKING:
    from ..cost_model.model import CostModel
    from ..task import Task
    from .space import Candidate, TaskSpace


class TaskSearch(Protocol):
    """One task's search."""

    def propose(self, measured: set[Candidate], best: list[Candidate], n: int) -> list[Candidate]:
        """About `n` candidates to measure next, none of `measured`; `best` are the task's fastest so far, best
        first."""
        ...

    # Optional: `observe(batch, latencies)`, told after each measured batch what it measured (infinite: failed).


class SearchPolicy(Protocol):
    """A way to search, configured once and bound to each task by the tuner."""

    name: str  # the policy named in each record's origin
    cost_model: str  # the registered cost model it searches with, unless the tuner is given one
    measure_per_round: int  # candidates per round, unless the tuner's options say otherwise

    def for_task(self, space: TaskSpace, model: CostModel, seed: int) -> TaskSearch: ...

    # Optional: `space_for(task)`, the policy's own space of candidates for a task (AutoTVM's template configs),
    # used in place of the task's sketches; it answers what the tuner asks of a TaskSpace and has a `note`.


def task_space(policy: SearchPolicy, task: Task) -> TaskSpace:
    """The space the tuner binds `policy` to for `task`: the policy's own (`space_for`), else the task's
    sketches (a dynamic kernel's over its sample points: `range_task.RangeSpace`)."""
    from ..range_task import RangeSpace, RangeTask
    from .space import TaskSpace

    space_for = getattr(policy, "space_for", None)
    if space_for is not None:
        return space_for(task)
    return RangeSpace(task) if isinstance(task, RangeTask) else TaskSpace(task)


POLICIES: dict[str, Callable[[], SearchPolicy]] = {}
"""Name -> a function making the policy with its default settings."""

P = TypeVar("P", bound=Callable[[], SearchPolicy])


def register_policy(name: str) -> Callable[[P], P]:
    """Class decorator: `name` makes the decorated policy with its default settings."""

    def register(cls: P) -> P:
        POLICIES[name] = cls
        return cls

    return register


def make_policy(policy: str | SearchPolicy) -> SearchPolicy:
    """The registered policy named `policy`, with its default settings; an instance is returned as it is."""
    if not isinstance(policy, str):
        return policy
    if policy not in POLICIES:
        raise TilegradError(f"unknown search policy {policy!r}; available: {', '.join(POLICIES)}")
    return POLICIES[policy]()
