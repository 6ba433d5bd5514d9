"""The floating-point work of a computation, counted over its tensor expressions.

One counter serves the tuner (a task's FLOP/s), the op registry (an op's FLOPs where it declares none) and the
CLI's `info`, so that all three report the same number for the same computation.
"""

from __future__ import annotations

import math

from . import expr as E
from .dims import dim, upper
from .tensor import ComputeOp, Tensor, topo_order


def compute_flops(outputs: list[Tensor], extent=upper):
    """Floating-point operations of one run: per stage, its elements x its reduction's trips x the float
    arithmetic in its body (a multiply-add counts two). `extent` reads each extent: by default a dynamic dimension
    at its upper bound (an int); `te.dims.dim` keeps the count a formula of them (an int where there are none)."""
    total = 0
    for t in topo_order(outputs):
        if not isinstance(t.op, ComputeOp):
            continue
        body = t.op.body
        trips = 1
        if type(body) is E.Reduce:
            trips = math.prod(extent(a.upper) for a in body.axes)
            ops = _float_ops(body.source) + E.is_float(body.dtype)  # an int32 sum (int8 products) is no FLOP
        else:
            ops = _float_ops(body)
        total += math.prod(extent(d) for d in t.shape) * trips * ops
    return dim(total)


def _float_ops(e: E.Expr) -> int:
    """The float arithmetic one evaluation of `e` runs: a select runs one of its branches (the costlier counted),
    so Winograd's transforms, one select case per tile position, count the case that runs, not all of them."""
    if type(e) is E.Load:
        return 0  # indices are integer arithmetic
    if type(e) is E.Select:
        return _float_ops(e.cond) + max(_float_ops(e.t), _float_ops(e.f))
    own = int(E.is_float(e.dtype) and (isinstance(e, E.Call) or type(e) in (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max)))
    return own + sum(_float_ops(c) for c in e.children())
