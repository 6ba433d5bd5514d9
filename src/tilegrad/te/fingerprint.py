"""The exact identity of a computation: two with the same fingerprint lower to the same loop IR under the same
schedule, so a model's repeated blocks are lowered and rendered once (graph_plan.GraphPlan.lowered).

Unlike the tuner's workload key (tune/task.py), which groups kernels that share their records, this leaves
nothing out: every tensor's name, shape, dtype, tag and attributes, every variable's bounds, every constant's
dtype and value. A value it cannot spell exactly (an attribute of an unknown type) makes the computation unique,
never equal to another: a fingerprint may miss a repeat, it never confuses two computations.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence

import numpy as np

from . import expr as E
from .tensor import ComputeOp, Tensor, topo_order

_UNIQUE = itertools.count()  # spells what has no exact text: unequal to everything else


def fingerprint(inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> str:
    """A digest of the computation from `inputs` (in argument order) to `outputs`. Tensors are told apart by
    their place, not only by their names, which need not differ."""
    order = topo_order(list(outputs))
    order += [t for t in inputs if all(t is not u for u in order)]
    spell = _Speller({id(t): k for k, t in enumerate(order)})
    lines = [f"args {' '.join(spell.value(t) for t in [*inputs, *outputs])}"]
    for t in order:
        head = f"{spell.value(t)}:{t.shape}:{t.dtype}"
        if isinstance(t.op, ComputeOp):
            op = t.op
            axes = " ".join(spell.expr(a) for a in op.axes)
            lines.append(f"{head}:{op.tag}:{spell.value(op.attrs)}:[{axes}]={spell.expr(op.body)}")
        else:
            lines.append(f"{head}:{type(t.op).__name__}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


class _Speller:
    """Spells expressions (each shared node once) and attribute values exactly."""

    def __init__(self, places: dict[int, int]):
        self.places = places  # a tensor's id -> its place in the computation
        self.spelled: dict[int, str] = {}  # by id: the nodes are alive while their computation is

    def expr(self, e: E.Expr) -> str:
        known = self.spelled.get(id(e))
        if known is not None:
            return known
        parts = [type(e).__name__, e.dtype]
        if type(e) is E.Var:
            upper = "" if e.upper is None else self.expr(e.upper)
            parts += [e.name, repr(e.lo), repr(e.hi), upper]
        else:
            parts += [self.value(getattr(e, f)) for f in e._fields]
        text = f"({' '.join(parts)})"
        self.spelled[id(e)] = text
        return text

    def value(self, v) -> str:
        if isinstance(v, E.Expr):
            return self.expr(v)
        if isinstance(v, Tensor):
            place = self.places.get(id(v))
            return f"tensor {v.name}#{place}" if place is not None else f"unique {next(_UNIQUE)}"
        if v is None or isinstance(v, (bool, int, float, str)):
            return repr(v)
        if isinstance(v, (tuple, list)):
            return f"[{' '.join(self.value(x) for x in v)}]"
        if isinstance(v, dict):
            return "{" + " ".join(f"{self.value(k)}:{self.value(x)}" for k, x in sorted(v.items(), key=repr)) + "}"
        if isinstance(v, np.ndarray):
            return f"array {v.dtype} {v.shape} {hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()}"
        if isinstance(v, np.generic):
            return f"{v.dtype} {v!r}"
        return f"unique {next(_UNIQUE)}"
