"""GPU schedule primitives: bind, shared and local scopes, set_scope; their errors, traces and loop IR."""

from __future__ import annotations

import pytest

from tilegrad import te
from tilegrad.errors import ScheduleError
from tilegrad.loop import lower
from tilegrad.loop.gpu import insert_barriers
from tilegrad.loop.printer import format_kernel
from tilegrad.schedule import Schedule
from tilegrad.schedule.schedule import apply_trace
from tilegrad.schedule.trace import Trace


def _matmul():
    a = te.placeholder((8, 4), name="A")
    b = te.placeholder((4, 8), name="B")
    k = te.reduce_axis(4, "k")
    return te.compute((8, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")


def _cooperative(c):
    """Rows of C over blocks and threads; the rows of A a block reads fetched into shared memory by its threads."""
    sch = Schedule(c)
    i0, i1 = sch.split("C", "i", 4)
    sch.bind("C", i0, "blockIdx.x")
    sch.bind("C", i1, "threadIdx.x")
    a_shared = sch.cache_read("A", "shared", ["C"])
    sch.compute_at(a_shared, "C", i1)
    sch.bind(a_shared, sch.loops(a_shared)[0], "threadIdx.x")
    return sch


def test_shared_region_spans_the_threads_of_a_block_and_barriers_surround_the_fetch():
    sch = _cooperative(_matmul())
    assert format_kernel(insert_barriers(lower(sch.state, "mm"))) == """\
kernel mm(A: float32[8, 4], B: float32[4, 8], C: float32[8, 8]):
  blockIdx.x for i_0 in 0..2:
    threadIdx.x for i_1 in 0..4:
      allocate A_shared: float32[4, 4] shared
      barrier
      threadIdx.x for i0 in 0..4:
        for i1 in 0..4:
          A_shared[i0, i1] = A[i0 + i_0 * 4, i1]
      barrier
      for j in 0..8:
        C[i_0 * 4 + i_1, j] = 0.0
        for k in 0..4:
          C[i_0 * 4 + i_1, j] = C[i_0 * 4 + i_1, j] + A_shared[i_1, k] * B[k, j]"""


def test_a_local_cache_keeps_the_region_of_one_thread():
    sch = Schedule(_matmul())
    i0, i1 = sch.split("C", "i", 4)
    sch.bind("C", i0, "blockIdx.x")
    sch.bind("C", i1, "threadIdx.x")
    a_local = sch.cache_read("A", "local", ["C"])
    sch.compute_at(a_local, "C", i1)
    assert "allocate A_local: float32[1, 4] local" in format_kernel(lower(sch.state, "mm"))


def test_gpu_steps_round_trip_through_json():
    sch = _cooperative(_matmul())
    tr = Trace.from_json(sch.trace.to_json())
    assert tr == sch.trace
    assert "bind(C.i_0, axis=blockIdx.x)" in str(tr)
    replayed = apply_trace(_matmul(), tr)
    assert format_kernel(lower(replayed, "mm")) == format_kernel(lower(sch.state, "mm"))


def test_set_scope_makes_an_rfactor_stage_shared():
    a = te.placeholder((4, 64), name="A")
    k = te.reduce_axis(64, "k")
    s = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")
    sch = Schedule(s)
    local = sch.cache_write("S", "local")
    sch.bind("S", "i", "blockIdx.x")
    _, ki = sch.split(local, "k", factor=16)
    rf = sch.rfactor(local, ki)
    sch.set_scope(rf, "shared")
    sch.compute_at(rf, "S", "i")
    sch.bind(rf, sch.loops(rf)[0], "threadIdx.x")
    sch.compute_at(local, "S", "i")
    text = format_kernel(lower(sch.state, "sum"))
    assert "allocate S_local_rf: float32[16, 1] shared" in text
    assert "allocate S_local: float32[1] local" in text
    assert "set_scope(S_local_rf, scope=shared)" in str(sch.trace)


@pytest.mark.parametrize("steps,message", [
    (lambda s: s.bind("C", "i", "warp.x"), "axis 'warp.x' is not one of blockIdx.x"),
    (lambda s: s.bind("C", "k", "threadIdx.x"), "cannot bind reduction loop C.k"),
    (lambda s: (s.bind("C", "i", "threadIdx.x"), s.bind("C", "j", "threadIdx.x")),
     "threadIdx.x is already bound to C.i"),
    (lambda s: s.cache_read("A", "texture", ["C"]), "scope 'texture' is not one of global, shared, local"),
    (lambda s: s.cache_write("C", "register"), "scope 'register' is not one of"),
    (lambda s: s.set_scope("C", "shared"), "C is an output of the kernel"),
])
def test_illegal_gpu_steps_name_the_step(steps, message):
    with pytest.raises(ScheduleError, match=message):
        steps(Schedule(_matmul()))
