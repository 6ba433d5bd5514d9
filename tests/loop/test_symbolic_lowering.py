"""Symbolic schedules lower to loop IR whose extents are expressions of the parameters: exact splits need no
tail guards, and auto-unroll is left as a condition until the parameters are bound."""

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import ScheduleError
from tilegrad.loop.ir import For, IfThenElse, walk
from tilegrad.loop.lower import lower
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.te import expr as E
from tilegrad.te import nn


def _matmul_schedule(t, u, step):
    a = te.placeholder((64, 48), "float32", "A")
    b = te.placeholder((48, 40), "float32", "B")
    c = nn.matmul(a, b)
    s = Schedule(c)
    i, j, _ = s.loops(c)
    i0, i1 = s.split(c, i, t, exact=True)
    j0, j1 = s.split(c, j, u, exact=True)
    s.reorder(c, i0, j0, i1, j1)
    s.auto_unroll(c, step)
    return s, (a, b)


def test_exact_symbolic_split_has_no_guards_and_binds_to_a_correct_kernel():
    t, u, step = E.Var("T", E.INDEX, 1, 64), E.Var("U", E.INDEX, 1, 40), E.Var("M", E.INDEX, 0, 512)
    s, (a, b) = _matmul_schedule(t, u, step)
    kernel = lower(s.state)
    assert not [x for x in walk(kernel.body) if isinstance(x, IfThenElse)]
    conds = [x.unroll_if for x in walk(kernel.body) if isinstance(x, For) and x.unroll_if is not None]
    assert conds, "auto-unroll with a symbolic budget leaves a condition per loop"
    bound = apply_trace(s.outputs, s.trace, {"T": 8, "U": 20, "M": 64})
    loops = [x for x in walk(lower(bound).body) if isinstance(x, For)]
    assert all(x.unroll_if is None for x in loops)
    kinds = {x.var.name: x.kind for x in loops}
    assert kinds["k"] == "unrolled" and kinds["j_1"] == "serial"  # 48 trips fit in 64, 20 * 48 do not
    sch = Schedule(s.outputs)
    sch.state = bound
    x, y = np.random.rand(64, 48).astype("float32"), np.random.rand(48, 40).astype("float32")
    np.testing.assert_allclose(build(sch).run(x, y), x @ y, rtol=1e-5)


def test_exact_split_that_does_not_divide_is_refused():
    with pytest.raises(ScheduleError, match="does not divide"):
        _matmul_schedule(7, 8, 0)
