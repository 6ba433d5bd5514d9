"""The primitives a sketch's structural choices go through: parallel grain, compute location by position, and
Schedule(params=) building a trace whose choices stay variables."""

import numpy as np

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.te import expr as E


def _chain():
    a = te.placeholder((16, 24), name="A")
    b = te.compute((16, 24), lambda i, j: a[i, j] * 2.0, name="B")
    return a, te.compute((16, 24), lambda i, j: b[i, j] + 1.0, name="C")


def test_parallel_outer_fuses_and_keeps_attachments():
    a, c = _chain()
    sch = Schedule(c)
    i0, i1 = sch.split("C", "i", 4)
    sch.compute_at("B", "C", i0)
    fused = sch.parallel_outer("C", 2)
    st = sch.state.stage("C")
    assert st.leaves[0] == fused and st.loops[fused].kind == "parallel"
    assert sch.state.stage("B").attach == ("C", fused)
    x = np.random.rand(16, 24).astype("float32")
    np.testing.assert_allclose(build(sch).run(x), x * 2 + 1)


def test_a_split_moves_what_is_computed_at_the_loop_to_its_inner_part():
    """A sketch picks a stage's location among its consumer's loops before tiling them: computed once per
    iteration of the split loop is computed once per iteration of its inner part (the attention's exp-sum at a
    loop that its output's tiling splits)."""
    a, c = _chain()
    sch = Schedule(c)
    sch.compute_at("B", "C", "i")
    i0, i1 = sch.split("C", "i", 4)
    assert sch.state.stage("B").attach == ("C", i1)
    x = np.random.rand(16, 24).astype("float32")
    np.testing.assert_allclose(build(sch).run(x), x * 2 + 1)


def test_structural_choices_stay_variables_in_the_trace():
    a, c = _chain()
    where, grain = E.Var("where", E.INDEX, 0, 2), E.Var("grain", E.INDEX, 0, 2)
    sch = Schedule(c, params={"where": 1, "grain": 1})
    sch.split("C", "i", 4)
    sch.compute_at("B", "C", where)
    sch.parallel_outer("C", grain)
    assert {v.name for v in sch.trace.variables()} == {"where", "grain"}
    for w, g in [(0, 0), (1, 1), (2, 2)]:
        state = apply_trace(c, sch.trace, {"where": w, "grain": g})
        run = Schedule(c)
        run.state = state
        x = np.random.rand(16, 24).astype("float32")
        np.testing.assert_allclose(build(run).run(x), x * 2 + 1)
