"""Templates: per op family, a schedule with knobs, and the registry that finds one for a kernel.

A template is a function (cfg, sch, stage, target, anchor) written against the schedule primitives, with the
signature of a default rule (`schedule.rules.RULES`): it schedules its op's stage (or the epilogue fused onto
it, `anchor` says which) while the default rules keep the rest of the kernel (padding, packing, other stages).
`Template.schedule(cfg, outputs)` runs the whole kernel's default schedule with the template in place of its
op's rule, so its result is a `Schedule` whose trace is like every other candidate's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from ...errors import ScheduleError
from ...schedule.defaults import default_schedule
from ...schedule.rules import Anchor
from ...schedule.schedule import Schedule
from ...schedule.state import Stage
from ...target import Target, host
from ...te.tensor import ComputeOp, Tensor, topo_order
from .space import ConfigEntity, ConfigSpace

TemplateFn = Callable[[ConfigSpace | ConfigEntity, Schedule, Stage, Target, Anchor], None]


@dataclasses.dataclass(frozen=True)
class Template:
    """A named template and the compute tags (op families) it schedules."""

    name: str
    tags: tuple[str, ...]
    fn: TemplateFn

    def schedule(self, cfg: ConfigSpace | ConfigEntity, outputs: Sequence[Tensor],
                 target: Target | None = None) -> Schedule:
        """The kernel's schedule with this template, at `cfg` (a space: its default)."""
        def rule(sch, s, target, anchor, knobs):
            self.fn(cfg, sch, s, target, anchor)

        return default_schedule(list(outputs), target or host(), rules={t: rule for t in self.tags})

    def space(self, outputs: Sequence[Tensor], target: Target | None = None) -> ConfigSpace:
        """The knobs this template defines on `outputs`: run once on a fresh space, which collects them. A
        kernel where the default rules never reach the template's op (it is only a producer, say) defines none,
        which is an error: there would be nothing to tune."""
        space = ConfigSpace(self.name)
        self.schedule(space, outputs, target)
        if not space.knobs:
            raise ScheduleError(f"template {self.name}: the kernel's schedule never reaches a stage tagged "
                                f"{' or '.join(self.tags)}")
        return space


TEMPLATES: dict[str, Template] = {}
"""Compute tag -> the template that schedules stages with it."""


def register_template(name: str, *tags: str) -> Callable[[TemplateFn], TemplateFn]:
    """Make the decorated function the template `name` for stages tagged `tags`."""
    def register(fn: TemplateFn) -> TemplateFn:
        template = Template(name, tags, fn)
        for t in tags:
            TEMPLATES[t] = template
        return fn

    return register


def extent(s: Stage, loop: str) -> int:
    """A loop's constant extent, as the templates read it to choose their knobs' values."""
    return s.loops[loop].extent.value


def parallelize(sch: Schedule, stage: str, loops: list[str], grain: int) -> None:
    """Fuse the first `grain` of `loops` into one parallel loop (none for 0): the grain knob of every template."""
    if grain:
        sch.parallel(stage, sch.fuse(stage, *loops[:grain]) if grain > 1 else loops[0])


def find_template(outputs: Sequence[Tensor]) -> Template | None:
    """The template of the kernel's op: that of the first stage, from the output back, whose tag has one (an
    epilogue's element-wise stages have none; a packed op's copy-out stage has its op's)."""
    for t in reversed(topo_order(list(outputs))):
        if isinstance(t.op, ComputeOp) and t.op.tag in TEMPLATES:
            return TEMPLATES[t.op.tag]
    return None
