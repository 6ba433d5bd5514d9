"""Traces: printing, JSON round trips, binding variables, and the errors illegal steps raise."""

from __future__ import annotations

import pytest

from tilegrad import te
from tilegrad.errors import LoweringError, ScheduleError
from tilegrad.loop import format_kernel, lower
from tilegrad.schedule import PRIMITIVES, Schedule, Trace, apply_trace


def matmul():
    a = te.placeholder((16, 12), name="A")
    b = te.placeholder((12, 8), name="B")
    k = te.reduce_axis(12, "k")
    return te.compute((16, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")


def scheduled(tile_i=4):
    sch = Schedule(matmul())
    local = sch.cache_write("C")
    i0, j0, i1, j1 = sch.tile("C", "i", "j", tile_i, 8)
    sch.compute_at(local, "C", j0)
    sch.split(local, "k", nparts=3)
    sch.parallel("C", i0)
    sch.vectorize("C", j1)
    return sch


def test_trace_prints_one_line_per_step():
    assert str(scheduled().trace) == """\
C_local = cache_write(C, scope=local)
i_0, j_0, i_1, j_1 = tile(C, x=i, y=j, x_factor=4, y_factor=8)
compute_at(C_local, C.j_0)
k_0, k_1 = split(C_local.k, nparts=3)
parallel(C.i_0)
vectorize(C.j_1)"""


def test_json_round_trip_replays_to_the_same_program():
    sch = scheduled()
    tr = Trace.from_json(sch.trace.to_json())
    assert tr == sch.trace
    assert format_kernel(lower(apply_trace(matmul(), tr), "k")) == format_kernel(lower(sch.state, "k"))


def test_symbolic_trace_serialises_and_binds():
    t = te.Var("tile_i", lo=1, hi=16)
    tr = scheduled(tile_i=t).trace
    again = Trace.from_json(tr.to_json())
    assert [v.name for v in again.variables()] == ["tile_i"]
    bound = again.bind({"tile_i": 4})
    assert bound == scheduled(4).trace
    assert not bound.variables()


def test_loop_ir_printer_golden():
    sch = Schedule(matmul())
    i0, i1 = sch.split("C", "i", 5)
    sch.parallel("C", i0)
    assert format_kernel(lower(sch.state, "mm")) == """\
kernel mm(A: float32[16, 12], B: float32[12, 8], C: float32[16, 8]):
  parallel for i_0 in 0..4:
    for i_1 in 0..5:
      if i_0 * 5 + i_1 < 16:
        for j in 0..8:
          C[i_0 * 5 + i_1, j] = 0.0
          for k in 0..12:
            C[i_0 * 5 + i_1, j] = C[i_0 * 5 + i_1, j] + A[i_0 * 5 + i_1, k] * B[k, j]"""


def test_every_primitive_is_exercised_by_the_tests():
    used = {"split", "fuse", "reorder", "tile", "parallel", "vectorize", "unroll", "auto_unroll", "compute_at",
            "compute_root", "compute_inline", "cache_write", "cache_read", "rfactor", "parallel_outer", "bind",
            "set_scope", "compute_with"}  # bind and set_scope: tests/schedule/test_gpu_primitives.py;
    # compute_with: tests/loop/test_compute_with.py
    assert set(PRIMITIVES) == used


@pytest.mark.parametrize("steps,message", [
    (lambda s: s.split("C", "q", 2), "has no loop 'q'"),
    (lambda s: s.split("C", "i", 0), "must be positive"),
    (lambda s: s.split("C", "i"), "exactly one of factor= or nparts="),
    (lambda s: (s.split("C", "i", 2), s.split("C", "i", 2)), "already split or fused"),
    (lambda s: s.fuse("C", "i", "k"), "not adjacent"),
    (lambda s: s.parallel("C", "k"), "cannot parallelize reduction loop"),
    (lambda s: s.compute_inline("C"), "is a reduction"),
    (lambda s: s.rfactor("C", "k"), "must be a part of the only split"),
    (lambda s: (s.split("C", "i", 2), s.cache_write("C")), "must not be split"),
])
def test_illegal_steps_raise_schedule_error(steps, message):
    with pytest.raises(ScheduleError, match=message) as info:
        steps(Schedule(matmul()))
    assert "step" in str(info.value)


def test_compute_at_outside_every_reader_is_a_lowering_error():
    a = te.placeholder((8,), name="A")
    b = te.compute((8,), lambda i: a[i] * 2.0, name="B")
    c = te.compute((8,), lambda i: b[i] + 1.0, name="C")
    d = te.compute((8,), lambda i: b[i] + c[i], name="D")
    sch = Schedule(d)
    sch.compute_at("B", "C", "i")
    with pytest.raises(LoweringError, match="reads it outside that loop"):
        lower(sch.state, "k")


def test_unknown_primitive_in_json_is_reported():
    with pytest.raises(ScheduleError, match="unknown primitive 'spin'"):
        apply_trace(matmul(), Trace.from_json('[{"kind": "spin", "stage": "C"}]'))
    with pytest.raises(ScheduleError, match="malformed trace JSON"):
        Trace.from_json("[{")
