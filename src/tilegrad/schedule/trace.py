"""A schedule is a trace: the recorded list of primitive applications, replayable and serialisable.

Step arguments are stage and loop names, integers, lists of names, or expression Vars (symbolic parameters), or
integer expressions of Vars (a GPU sketch's threads per block: the quotient of two tile sizes). `bind` fills Vars
from an assignment; replaying an unbound trace gives loop IR whose extents are expressions of
the Vars. JSON and printing are generic over the arguments.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..errors import ScheduleError
from ..te import expr as E
from ..te.simplify import simplify

Args = tuple[tuple[str, Any], ...]


def _freeze(value):
    return tuple(value) if isinstance(value, list) else value


@dataclasses.dataclass(frozen=True)
class Step:
    kind: str
    args: Args
    outputs: tuple[str, ...] = ()

    @staticmethod
    def make(kind: str, outputs=(), **args) -> "Step":
        return Step(kind, tuple((k, _freeze(v)) for k, v in args.items() if v is not None), tuple(outputs))

    def kwargs(self, params: dict | None = None) -> dict:
        return {k: _bind(v, params) for k, v in self.args}

    def variables(self) -> list[E.Var]:
        out: list[E.Var] = []
        for _, v in self.args:
            if isinstance(v, E.Var):
                out.append(v)
            elif isinstance(v, E.Expr):
                out.extend(sorted(E.free_vars(v), key=lambda x: x.name))
        return out

    def __str__(self) -> str:
        args = dict(self.args)
        if "target" in args:  # compute_at(stage, target.loop)
            positional = [args["stage"], f"{args['target']}.{args['loop']}"]
            rest = []
        else:
            positional = [_fmt_target(args)]
            rest = [f"{k}={_fmt(v)}" for k, v in self.args if k not in ("stage", "loop", "tensor")]
        call = f"{self.kind}({', '.join(positional + rest)})"
        return f"{', '.join(self.outputs)} = {call}" if self.outputs else call


def _fmt_target(args: dict) -> str:
    if "tensor" in args:
        return args["tensor"]
    if "loop" in args:
        return f"{args['stage']}.{args['loop']}"
    return args["stage"]


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _bind(v, params: dict | None):
    if params is not None and isinstance(v, E.Expr) and not isinstance(v, (E.Var, E.Const)):
        values = {x.name: _bind(x, params) for x in E.free_vars(v)}
        bound = simplify(E.substitute(v, {n: x for n, x in values.items() if isinstance(x, int)}))
        return int(bound.value) if type(bound) is E.Const else bound
    if params is None or not isinstance(v, E.Var):
        return list(v) if isinstance(v, tuple) else v
    if v.name in params:
        return int(params[v.name])
    if v in params:
        return int(params[v])
    return v


@dataclasses.dataclass(frozen=True)
class Trace:
    steps: tuple[Step, ...] = ()

    def append(self, step: Step) -> "Trace":
        return Trace(self.steps + (step,))

    def variables(self) -> list[E.Var]:
        """The symbolic parameters, in order of first use."""
        seen: dict[str, E.Var] = {}
        for st in self.steps:
            for v in st.variables():
                seen.setdefault(v.name, v)
        return list(seen.values())

    def bind(self, params: dict) -> "Trace":
        """The same trace with its variables replaced by the integers in `params` (keyed by Var or name)."""
        steps = []
        for st in self.steps:
            args = tuple((k, _bind(v, params) if isinstance(v, E.Expr) else v) for k, v in st.args)
            steps.append(Step(st.kind, args, st.outputs))
        return Trace(tuple(steps))

    def __str__(self) -> str:
        return "\n".join(str(s) for s in self.steps)

    # -- JSON --
    def to_json(self) -> str:
        return json.dumps([_step_to_obj(s) for s in self.steps])

    @staticmethod
    def from_json(text: str) -> "Trace":
        try:
            objs = json.loads(text)
            return Trace(tuple(_step_from_obj(o) for o in objs))
        except (ValueError, KeyError, TypeError) as exc:
            raise ScheduleError(f"malformed trace JSON: {exc}") from None


def _value_to_obj(v):
    if isinstance(v, E.Var):
        return {"var": v.name, "lo": _finite(v.lo), "hi": _finite(v.hi)}
    if isinstance(v, tuple):
        return list(v)
    return v


def _finite(x):
    return None if x in (E.INF, -E.INF) else x


def _value_from_obj(v):
    if isinstance(v, dict):
        return E.Var(v["var"], E.INDEX, v.get("lo"), v.get("hi"))
    return _freeze(v)


def _step_to_obj(s: Step) -> dict:
    obj = {"kind": s.kind, **{k: _value_to_obj(v) for k, v in s.args}}
    if s.outputs:
        obj["outputs"] = list(s.outputs)
    return obj


def _step_from_obj(o: dict) -> Step:
    o = dict(o)
    kind = o.pop("kind")
    outputs = tuple(o.pop("outputs", ()))
    return Step(kind, tuple((k, _value_from_obj(v)) for k, v in o.items()), outputs)
