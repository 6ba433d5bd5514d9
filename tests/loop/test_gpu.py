"""GPU facts of loop IR: launch shapes, barriers inserted where threads share data, and the race check."""

from __future__ import annotations

import dataclasses

import pytest

from tilegrad import te
from tilegrad.errors import LoweringError
from tilegrad.loop import lower
from tilegrad.loop.gpu import Launch, check_races, insert_barriers, launch_of, rewrite_for_gpu, shared_bytes
from tilegrad.loop.ir import Barrier, IfThenElse, Seq, walk
from tilegrad.loop.printer import format_kernel
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import GPUS
from tilegrad.workloads import WORKLOADS


def _cooperative():
    a = te.placeholder((8, 4), name="A")
    b = te.placeholder((4, 8), name="B")
    k = te.reduce_axis(4, "k")
    c = te.compute((8, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    sch = Schedule(c)
    i0, i1 = sch.split("C", "i", 4)
    sch.bind("C", i0, "blockIdx.x")
    sch.bind("C", i1, "threadIdx.x")
    a_shared = sch.cache_read("A", "shared", ["C"])
    sch.compute_at(a_shared, "C", i1)
    sch.bind(a_shared, sch.loops(a_shared)[0], "threadIdx.x")
    return lower(sch.state, "mm")


def test_launch_takes_the_largest_extent_bound_to_each_axis():
    k = _cooperative()
    assert launch_of(k) == Launch((2, 1, 1), (4, 1, 1))
    assert shared_bytes(k) == 4 * 4 * 4


def test_a_fetch_without_barriers_is_a_race():
    k = _cooperative()
    with pytest.raises(LoweringError, match="kernel mm: shared buffer A_shared is read before a barrier"):
        check_races(k)
    check_races(insert_barriers(k))


def test_a_write_after_reads_without_a_barrier_is_a_race():
    """Dropping the barrier before the fetch: the next block row's fetch overwrites what others still read."""
    a = te.placeholder((8, 4), name="A")
    k = te.reduce_axis(4, "k")
    c = te.compute((8, 2), lambda i, j: te.sum(a[i, k] * 2.0, axis=k), name="C")
    sch = Schedule(c)
    _, i1 = sch.split("C", "i", 4)
    sch.bind("C", i1, "threadIdx.x")
    a_shared = sch.cache_read("A", "shared", ["C"])
    sch.compute_at(a_shared, "C", i1)
    sch.bind(a_shared, sch.loops(a_shared)[0], "threadIdx.x")
    kernel = insert_barriers(lower(sch.state, "mm"))  # i_0 is a serial loop around the thread loop
    check_races(kernel)
    first = next(s for s in walk(kernel.body) if isinstance(s, Seq) and isinstance(s.stmts[0], Barrier))
    without = _replace(kernel.body, first, Seq(first.stmts[1:]))
    with pytest.raises(LoweringError, match="A_shared is written while other threads may still read it"):
        check_races(dataclasses.replace(kernel, body=without))


def test_a_barrier_some_threads_skip_is_refused():
    k = insert_barriers(_cooperative())
    seq = next(s for s in walk(k.body) if isinstance(s, Seq) and isinstance(s.stmts[0], Barrier))
    thread = next(s.var for s in walk(k.body) if getattr(s, "kind", None) == "threadIdx.x")
    guarded = _replace(k.body, seq, IfThenElse(thread < 2, seq))
    with pytest.raises(LoweringError, match="a barrier only some threads reach"):
        check_races(dataclasses.replace(k, body=guarded))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_gpu_schedules_are_race_free(name):
    inputs, output = WORKLOADS[name]()
    sch = default_schedule(output, GPUS["sm_90"])
    k = rewrite_for_gpu(lower(sch.state, name, inputs + [sch.state.outputs[0]]))
    check_races(k)
    assert launch_of(k).threads <= GPUS["sm_90"].max_threads_per_block
    assert any(s.kind.startswith("blockIdx") for s in walk(k.body) if hasattr(s, "kind"))


def _replace(s, old, new):
    """`s` with statement `old` (by identity) replaced by `new`."""
    if s is old:
        return new
    if isinstance(s, Seq):
        return Seq(tuple(_replace(x, old, new) for x in s.stmts))
    if hasattr(s, "body"):
        return dataclasses.replace(s, body=_replace(s.body, old, new))
    if isinstance(s, IfThenElse):
        return dataclasses.replace(s, then=_replace(s.then, old, new))
    return s


def test_partial_sums_combine_as_a_tree():
    a = te.placeholder((4, 64), name="A")
    k = te.reduce_axis(64, "k")
    s = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="S")
    sch = Schedule(s)
    local = sch.cache_write("S", "local")
    sch.bind("S", "i", "blockIdx.x")
    _, ki = sch.split(local, "k", factor=8)
    rf = sch.rfactor(local, ki)
    sch.set_scope(rf, "shared")
    sch.compute_at(rf, "S", "i")
    sch.bind(rf, sch.loops(rf)[0], "threadIdx.x")
    sch.compute_at(local, "S", "i")
    kernel = rewrite_for_gpu(lower(sch.state, "sum"))
    check_races(kernel)
    text = format_kernel(kernel)
    combine = text[text.index("S_local[S_local_i] = 0.0"):]
    assert combine == """\
S_local[S_local_i] = 0.0
      threadIdx.x for S_local_rf_t4 in 0..4:
        S_local_rf[S_local_rf_t4, S_local_i] = S_local_rf[S_local_rf_t4, S_local_i] + S_local_rf[S_local_rf_t4 + 4, S_local_i]
      barrier
      threadIdx.x for S_local_rf_t2 in 0..2:
        S_local_rf[S_local_rf_t2, S_local_i] = S_local_rf[S_local_rf_t2, S_local_i] + S_local_rf[S_local_rf_t2 + 2, S_local_i]
      barrier
      threadIdx.x for S_local_rf_t1 in 0..1:
        S_local_rf[S_local_rf_t1, S_local_i] = S_local_rf[S_local_rf_t1, S_local_i] + S_local_rf[S_local_rf_t1 + 1, S_local_i]
      barrier
      S_local[S_local_i] = S_local[S_local_i] + S_local_rf[0, S_local_i]
      barrier
    S[i] = S_local[0]"""


class _SerialWarps:
    """The C renderer with a serial spelling of the warp reductions: lane 0's result, combined in order, so a
    GPU kernel with warp steps still runs on the CPU."""

    HELPERS = """\
static void tg_serial_warp(float* first, float* second, int n, int op) {
  long s = second - first; float v = first[0];
  for (int i = 1; i < n; ++i) { float x = first[i * s]; v = op == 0 ? v + x : op == 1 ? (x > v ? x : v) : (x < v ? x : v); }
  first[0] = v;
}
"""

    @classmethod
    def renderer(cls):
        from tilegrad.codegen.c import CRenderer

        ops = {"sum": 0, "max": 1, "min": 2}
        macros = "".join(f"#define TG_WARP_{op.upper()}{n}(a, b) tg_serial_warp(a, b, {n}, {code})\n"
                         for op, code in ops.items() for n in (2, 4, 8, 16, 32))

        class Serial(CRenderer):
            intrinsics = {f"warp_{op}{n}": f"TG_WARP_{op.upper()}{n}" for op in ops for n in (2, 4, 8, 16, 32)}
            intrinsic_helpers = cls.HELPERS + macros

        return Serial()


H100 = GPUS["sm_90"]
REDUCTIONS = ["reduce_mean_keepdims", "softmax_4x6x40", "layernorm_6x64", "global_avg_pool_7x7"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_warp_steps_compute_the_tree_s_result_serially_and_compile_to_ptx(name):
    import numpy as np

    from tilegrad.codegen.cuda import CudaRenderer
    from tilegrad.loop.ir import Intrinsic
    from tilegrad.runtime.build import build
    from tilegrad.runtime.kernel import BufferSpec, Kernel
    from tilegrad.runtime.nvrtc import compile_ptx
    from tilegrad.te.interpret import interpret

    inputs, output = WORKLOADS[name]()
    sch = default_schedule(output, H100)
    k = lower(sch.state, name, inputs + [sch.state.outputs[0]])
    warped = rewrite_for_gpu(k, warp_shuffles=True)
    steps = [s for s in walk(warped.body) if isinstance(s, Intrinsic)]
    assert steps and all(s.name.startswith("warp_") for s in steps)
    check_races(warped)
    src = CudaRenderer(H100).render(k)
    assert "__shfl_down_sync" in src and src.count("tg_warp_reduce<") == len(steps)
    assert "shfl.sync.down" in compile_ptx(src, H100.arch)
    rng = np.random.default_rng(0)
    values = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in inputs}
    kernel = Kernel(build(_SerialWarps.renderer().render(warped)), name,
                    [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in k.params])
    out = np.empty(output.shape, output.dtype)
    kernel(*[values[t.name] for t in inputs], out)
    np.testing.assert_allclose(out, interpret(output, values), rtol=1e-4, atol=1e-5)


def test_a_warp_step_takes_the_last_32_partials_of_a_longer_tree():
    from tilegrad.loop.ir import Intrinsic

    inputs, output = WORKLOADS["softmax_4x6x40"]()  # each row's 40 elements over 64 threads
    k = lower(default_schedule(output, H100).state, "softmax", inputs + [output])
    plain = sum(isinstance(s, Barrier) for s in walk(rewrite_for_gpu(k).body))
    warped = rewrite_for_gpu(k, warp_shuffles=True)
    names = [s.name for s in walk(warped.body) if isinstance(s, Intrinsic)]
    assert names == ["warp_max32", "warp_sum32"]
    # the tree's steps of widths 16, 8, 4, 2, 1 (a barrier each) became one warp step and its barrier
    assert sum(isinstance(s, Barrier) for s in walk(warped.body)) == plain - 2 * 4


def test_a_read_of_the_warp_result_before_a_barrier_is_a_race():
    from tilegrad.loop.ir import Intrinsic

    inputs, output = WORKLOADS["reduce_mean_keepdims"]()
    k = lower(default_schedule(output, H100).state, "mean", inputs + [output])
    warped = rewrite_for_gpu(k, warp_shuffles=True)

    def drop_barrier_after_warp(s):
        if isinstance(s, Seq):
            out = []
            for x in s.stmts:
                if isinstance(x, Barrier) and out and isinstance(out[-1], Intrinsic):
                    continue
                out.append(drop_barrier_after_warp(x))
            return Seq(tuple(out))
        if hasattr(s, "body"):
            return dataclasses.replace(s, body=drop_barrier_after_warp(s.body))
        return s

    with pytest.raises(LoweringError, match="read before a barrier"):
        check_races(dataclasses.replace(warped, body=drop_barrier_after_warp(warped.body)))
