"""The `Schedule` facade: primitives as methods, each call applied and recorded through one path."""

from __future__ import annotations

from typing import Sequence

from ..errors import ScheduleError
from ..te.tensor import Tensor
from .primitives import PRIMITIVES
from .state import LoopState
from .trace import Step, Trace


def _name(x) -> str:
    return x.name if isinstance(x, Tensor) else x


def _apply(st: LoopState, step: Step, index: int, params: dict | None = None):
    fn = PRIMITIVES.get(step.kind)
    if fn is None:
        raise ScheduleError(f"step {index}: unknown primitive {step.kind!r}")
    try:
        return fn(st, **step.kwargs(params))
    except ScheduleError as exc:
        raise ScheduleError(f"step {index} ({step}): {exc}") from None
    except TypeError as exc:
        raise ScheduleError(f"step {index} ({step}): bad arguments: {exc}") from None


def apply_trace(outputs: Sequence[Tensor] | Tensor, trace: Trace, params: dict | None = None) -> LoopState:
    """Replay `trace` on a fresh state of `outputs`; `params` binds its variables (None keeps them symbolic)."""
    if isinstance(outputs, Tensor):
        outputs = [outputs]
    st = LoopState(outputs)
    for i, step in enumerate(trace.steps):
        _apply(st, step, i, params)
    return st


class Schedule:
    """Build a schedule by calling primitives; `trace` holds what was done, `state` the result.

    Arguments may be expression Vars (a sketch's parameters); the trace keeps them, and the state is built with
    those named in `params` bound (a choice of location or parallel grain must be concrete to be applied, a tile
    size may stay symbolic)."""

    def __init__(self, outputs: Sequence[Tensor] | Tensor, params: dict | None = None):
        self.outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        self.state = LoopState(self.outputs)
        self.trace = Trace()
        self.params = params

    def _record(self, kind: str, **args):
        step = Step.make(kind, **args)
        out = _apply(self.state, step, len(self.trace.steps), self.params)
        names = (out,) if isinstance(out, str) else tuple(out or ())
        self.trace = self.trace.append(Step(step.kind, step.args, names))
        return out

    def loops(self, stage) -> list[str]:
        """The current loop order of a stage, outermost first."""
        return list(self.state.stage(_name(stage)).leaves)

    def split(self, stage, loop: str, factor=None, *, nparts=None, exact: bool = False):
        return self._record("split", stage=_name(stage), loop=loop, factor=factor, nparts=nparts,
                            exact=True if exact else None)

    def tile(self, stage, x: str, y: str, x_factor, y_factor):
        return self._record("tile", stage=_name(stage), x=x, y=y, x_factor=x_factor, y_factor=y_factor)

    def fuse(self, stage, *loops: str) -> str:
        return self._record("fuse", stage=_name(stage), loops=list(loops))

    def reorder(self, stage, *order: str) -> None:
        self._record("reorder", stage=_name(stage), order=list(order))

    def parallel(self, stage, loop: str) -> None:
        self._record("parallel", stage=_name(stage), loop=loop)

    def vectorize(self, stage, loop: str) -> None:
        self._record("vectorize", stage=_name(stage), loop=loop)

    def bind(self, stage, loop: str, axis: str) -> None:
        self._record("bind", stage=_name(stage), loop=loop, axis=axis)

    def unroll(self, stage, loop: str) -> None:
        self._record("unroll", stage=_name(stage), loop=loop)

    def auto_unroll(self, stage, max_step) -> None:
        self._record("auto_unroll", stage=_name(stage), max_step=max_step)

    def parallel_outer(self, stage, count) -> str | None:
        return self._record("parallel_outer", stage=_name(stage), count=count)

    def compute_at(self, stage, target, loop) -> None:
        self._record("compute_at", stage=_name(stage), target=_name(target), loop=loop)

    def compute_with(self, stage, target, loop: str) -> None:
        self._record("compute_with", stage=_name(stage), target=_name(target), loop=loop)

    def compute_root(self, stage) -> None:
        self._record("compute_root", stage=_name(stage))

    def compute_inline(self, stage) -> None:
        self._record("compute_inline", stage=_name(stage))

    def cache_write(self, stage, scope: str = "local") -> str:
        return self._record("cache_write", stage=_name(stage), scope=scope)

    def cache_read(self, tensor, scope: str, readers: Sequence) -> str:
        return self._record("cache_read", tensor=_name(tensor), scope=scope, readers=[_name(r) for r in readers])

    def set_scope(self, stage, scope: str) -> None:
        self._record("set_scope", stage=_name(stage), scope=scope)

    def rfactor(self, stage, loop: str) -> str:
        return self._record("rfactor", stage=_name(stage), loop=loop)
