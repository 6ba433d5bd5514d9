import math
import os
import pickle
import statistics
from pathlib import Path

import numpy as np
import pytest

from tilegrad import config
from tilegrad.ir.compute import node_compute
from tilegrad.ir.graph import GraphBuilder
from tilegrad.passes import optimize
from tilegrad.schedule import Schedule, Step, Trace
from tilegrad.te import expr as E
from tilegrad.tune.measure import ERROR_KINDS, MeasureInput, Measurer, MeasureResult
from tilegrad.tune.measure.result import Built
from tilegrad.tune.measure.builder import _WithoutWeights
from tilegrad.runtime.timing import MAX_SPREAD, spread
from tilegrad.tune.measure.runner import cold_parameters, pinned_team, run_each
from tilegrad.tune.task import extract_tasks

REPEATS = 2


def matmul_task(m=32, k=24, n=16):
    b = GraphBuilder()
    g = b.build(b.op("matmul", b.input("x", (m, k)), b.input("w", (k, n))))
    return extract_tasks(g)[0]


def tiled(task, tile_i: int, tile_j: int) -> Trace:
    """A valid schedule of the matmul task: tiles of tile_i x tile_j, the inner j loop vectorised."""
    sch = Schedule(task.compute()[1])
    c = sch.outputs[0]
    i_0, i_1 = sch.split(c, "i", tile_i)
    j_0, j_1 = sch.split(c, "j", tile_j)
    sch.reorder(c, i_0, j_0, "k", i_1, j_1)
    sch.vectorize(c, j_1)
    return sch.trace


# Kernels for `source_override`: the matmul task's parameters are x (32, 24), w (24, 16), out (32, 16).
CRASH = "void candidate(void **args) { volatile float *nowhere = 0; *nowhere = 1.0f; }"
ABORT = "#include <stdlib.h>\nvoid candidate(void **args) { abort(); }"
HANG = "void candidate(void **args) { volatile int spin = 1; while (spin) {} }"
ZEROS = "void candidate(void **args) { float *out = args[2]; for (int i = 0; i < 32 * 16; ++i) out[i] = 0.0f; }"
UNWRITTEN = "void candidate(void **args) { (void)args; }"
NOT_C = "void candidate(void **args) { this is not C; }"
# The right product of x (48, 24) and w (24, 16), 5 ms late: a valid candidate far slower than any real schedule.
SLOW = r"""
#define _POSIX_C_SOURCE 199309L
#include <time.h>
void candidate(void **args) {
    const float *x = args[0], *w = args[1];
    float *out = args[2];
    for (int i = 0; i < 48; ++i)
        for (int j = 0; j < 16; ++j) {
            float s = 0.0f;
            for (int k = 0; k < 24; ++k) s += x[i * 24 + k] * w[k * 16 + j];
            out[i * 16 + j] = s;
        }
    struct timespec late = {0, 5000000};
    nanosleep(&late, 0);
}
"""


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    with config.override(cache_dir=tmp_path_factory.mktemp("cache")) as cfg:
        yield cfg


@pytest.fixture(scope="module")
def measurer(cfg):
    with Measurer(builders=2, repeats=REPEATS, min_repeat_s=0.001, timeout_s=2.0, check_fraction=1.0, cfg=cfg) as m:
        yield m


@pytest.fixture(scope="module")
def task():
    return matmul_task()


def test_valid_candidates_give_costs(measurer, task):
    traces = [task.default_trace()] + [tiled(task, ti, tj) for ti, tj in [(4, 8), (8, 16), (16, 4), (32, 8)]]
    results = measurer.measure([MeasureInput(task, tr) for tr in traces])
    for r in results:
        assert r.valid, r.error
        assert len(r.costs) in (REPEATS, 2 * REPEATS) and all(0 < c < 1 for c in r.costs)  # doubled if far apart
        assert r.noisy == (spread(r.costs) > MAX_SPREAD)
        assert r.checked and r.build_s > 0 and r.run_s > 0
        assert r.latency == statistics.median(r.costs)


def test_a_trace_built_before_is_timed_again_without_building(measurer, task):
    trace = tiled(task, 8, 4)
    (first,) = measurer.measure([MeasureInput(task, trace)])
    sent = sum(w.requests_served for w in measurer.builder.workers)
    (again,) = measurer.measure([MeasureInput(task, trace)])
    assert sum(w.requests_served for w in measurer.builder.workers) == sent
    assert first.valid and again.valid and first.build_s > 0 and again.build_s == 0


def test_crashing_and_hanging_candidates_fail_and_the_batch_goes_on(measurer, task):
    good = tiled(task, 8, 8)
    batch = [MeasureInput(task, good), MeasureInput(task, good, source_override=CRASH),
             MeasureInput(task, good, source_override=HANG), MeasureInput(task, good, source_override=ABORT),
             MeasureInput(task, good), MeasureInput(task, tiled(task, 4, 16))]
    results = measurer.measure(batch)
    assert [r.error_kind for r in results] == [None, "crash", "timeout", "crash", None, None]
    assert "SIGSEGV" in results[1].error and "SIGABRT" in results[3].error
    assert results[2].error.startswith("timeout after 2 s")
    for failed in results[1:4]:
        assert failed.costs == () and failed.latency == math.inf and not failed.valid
    assert all(r.costs for r in results[4:])


def test_a_task_limited_by_its_default_times_out_sooner(measurer, task):
    fresh = matmul_task(24, 8, 8)  # its own task key, so the limit does not touch the other tests
    measurer.limit_by_default(fresh, 1e-5)
    hang = measurer.measure([MeasureInput(fresh, tiled(fresh, 8, 8), source_override=HANG)])[0]
    assert hang.error_kind == "timeout" and hang.error.startswith("timeout after 1 s")
    assert measurer.measure_one(fresh, fresh.default_trace()).valid


def test_a_candidate_far_slower_than_the_default_is_abandoned_after_one_warm_call(measurer, cfg):
    fresh = matmul_task(48, 24, 16)
    slow = MeasureInput(fresh, fresh.default_trace(), source_override=SLOW)
    assert len(measurer.measure([slow])[0].costs) in (REPEATS, 2 * REPEATS)  # nothing faster known yet: timed in full
    measurer.limit_by_default(fresh, 1e-4)
    default, late = measurer.measure([MeasureInput(fresh, fresh.default_trace()), slow])
    assert default.valid and not default.abandoned and len(default.costs) in (REPEATS, 2 * REPEATS)
    assert late.valid and late.abandoned and len(late.costs) == 1 and late.latency > 4e-3
    measurer.limit_by_default(fresh, 0.1)  # a new tuning run forgets the fast default of the last
    assert not measurer.measure([slow])[0].abandoned
    with Measurer(builders=1, repeats=REPEATS, min_repeat_s=0.001, abandon_slower_than=None, cfg=cfg) as patient:
        patient.limit_by_default(fresh, 1e-4)
        timed = patient.measure([slow])[0]
    assert not timed.abandoned and len(timed.costs) in (REPEATS, 2 * REPEATS)
    with pytest.raises(ValueError, match="abandon_slower_than"):
        Measurer(abandon_slower_than=1.0, cfg=cfg)


def test_wrong_results_are_caught(measurer, task, monkeypatch):
    good = tiled(task, 8, 8)
    zeros, unwritten = measurer.measure([MeasureInput(task, good, source_override=ZEROS),
                                         MeasureInput(task, good, source_override=UNWRITTEN)])
    assert zeros.error_kind == "wrong" and zeros.checked and "elements differ from the reference" in zeros.error
    assert unwritten.error_kind == "wrong"  # its outputs keep the NaN they were poisoned with

    fresh = matmul_task(16, 8, 8)  # a task whose reference is not cached yet
    monkeypatch.setattr(type(fresh), "reference", lambda self, inputs: [inputs[0] @ inputs[1] + 0.01])
    assert measurer.measure_one(fresh, fresh.default_trace()).error_kind == "wrong"


def test_lowering_and_compiler_errors_are_results(measurer, task):
    bad_step = Trace((Step.make("split", stage="matmul", loop="nowhere", factor=4),))
    symbolic = Trace((Step.make("split", stage="matmul", loop="i", factor=E.Var("tile_i", 1, 32)),))
    results = measurer.measure([MeasureInput(task, bad_step), MeasureInput(task, symbolic),
                                MeasureInput(task, task.default_trace(), source_override=NOT_C),
                                MeasureInput(task, task.default_trace())])
    assert [r.error_kind for r in results] == ["lower", "lower", "build", None]
    assert "ScheduleError" in results[0].error and "nowhere" in results[0].error
    assert "unbound variables: tile_i" in results[1].error
    assert "C compiler failed" in results[2].error
    assert set(r.error_kind for r in results[:3]) <= set(ERROR_KINDS)


def test_a_sample_of_candidates_is_checked(cfg, task):
    with Measurer(builders=1, repeats=1, min_repeat_s=0.0, check_fraction=0.25, cfg=cfg) as m:
        results = m.measure([MeasureInput(task, task.default_trace(), source_override=ZEROS)] * 9)
    assert [r.checked for r in results] == [True, False, False, False, True, False, False, False, True]
    assert all(r.error_kind == ("wrong" if r.checked else None) for r in results)


def test_fused_task_is_shipped_without_its_weights_and_checks_against_its_reference(measurer):
    b = GraphBuilder()
    x = b.input("x", (8, 64))
    w = b.const(np.random.default_rng(0).standard_normal((64, 256)).astype("float32"), "w")
    g, _ = optimize(b.build(b.op("relu", b.op("matmul", x, w))), 2)
    (task,) = extract_tasks(g)
    assert task.node.op == "fused"
    blob = pickle.dumps(task.node)
    light = _pickle_without_weights(task.node)
    assert len(light) < len(blob) // 10
    node = pickle.loads(light)
    body = node.attrs["body"]
    assert all(v.data is None for v in node.inputs + body.inputs)
    assert body.nodes[0].inputs[1] is body.inputs[1]  # identities within the body survive
    assert [t.shape for t in node_compute(node)[1]] == [t.shape for t in task.compute()[1]]
    result = measurer.measure_one(task, task.default_trace())
    assert result.valid and result.checked, result.error


def test_an_input_with_data_is_measured_and_checked_with_it(measurer):
    """A layer norm's epsilon is a kernel input: drawn at random, it sits near minus some row's variance, and the
    check compares quotients by nearly zero (the records' `wrong` layer norms)."""
    b = GraphBuilder()
    x = b.input("x", (64, 96))
    centred = b.op("sub", x, b.op("reduce_mean", x, axes=(1,), keepdims=1))
    variance = b.op("reduce_mean", b.op("mul", centred, centred), axes=(1,), keepdims=1)
    eps = b.const(np.array(1e-5, dtype="float32"), "eps")
    g, _ = optimize(b.build(b.op("div", centred, b.op("sqrt", b.op("add", variance, eps)))), 2)
    (task,) = extract_tasks(g)
    arrays = task.random_inputs(seed=3)
    (slot,) = [i for i, v in enumerate(task.node.inputs) if v.data is not None]
    assert arrays[slot] == np.float32(1e-5)
    assert np.abs(task.reference(arrays)[0]).max() < 96 ** 0.5
    result = measurer.measure_one(task, task.default_trace())
    assert result.valid and result.checked, result.error


def test_results_sort_failures_last():
    assert MeasureResult((3.0, 1.0, 2.0)).latency == 2.0
    assert MeasureResult((), "crash", "boom").latency == math.inf


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="check_fraction"):
        Measurer(check_fraction=2.0)


def _pickle_without_weights(node) -> bytes:
    import io

    buf = io.BytesIO()
    _WithoutWeights(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(node)
    return buf.getvalue()


def test_a_build_over_its_time_limit_is_a_timeout(measurer, task, monkeypatch):
    monkeypatch.setattr(measurer.builder, "timeout_s", 0.02)  # gcc takes longer than that to start
    slow = MeasureInput(task, task.default_trace(), source_override=ZEROS + "/* not in the build cache */")
    (result,) = measurer.measure([slow])
    assert result.error_kind == "timeout" and result.error.startswith("build timeout after 0.02 s")
    monkeypatch.undo()
    assert measurer.measure_one(task, tiled(task, 16, 16)).valid


class _CountingRunner:
    """A runner elsewhere, as the measurer sees one: every kernel takes 1 ms per call."""

    def __init__(self):
        self.prepared, self.ran, self.closed = [], [], False

    def prepare(self, task):
        self.prepared.append(task.key)

    def run(self, inp, built: Built, check):
        self.ran.append((built.library, check))
        return MeasureResult((1e-3,), build_s=built.build_s, checked=check)

    def run_all(self, jobs, on_result=None):
        return run_each(self, jobs, on_result)

    def limit_by_default(self, task, default_latency):
        pass

    def close(self):
        self.closed = True


def test_another_runner_plugs_into_the_measurer(cfg, task):
    runner = _CountingRunner()
    told = []
    with Measurer(runner=runner, builders=1, check_fraction=0.5, cfg=cfg) as m:
        results = m.measure([MeasureInput(task, tiled(task, 8, 4)), MeasureInput(task, tiled(task, 4, 8)),
                             MeasureInput(task, task.default_trace(), source_override=NOT_C)],
                            on_result=lambda i, r: told.append((i, r)))
    assert [r.latency for r in results[:2]] == [1e-3, 1e-3] and results[2].error_kind == "build"
    assert told == [(2, results[2]), (0, results[0]), (1, results[1])]  # the failed build first, as each is known
    assert runner.prepared == [task.key, task.key] and [c for _, c in runner.ran] == [True, False]
    assert all(Path(lib).is_file() for lib, _ in runner.ran) and runner.closed


def test_the_weights_are_timed_cold_and_the_activations_as_their_producer_left_them(cfg):
    b = GraphBuilder()
    # 256 KiB: warm, it sits in L2 on every CPU this runs on (Zen 3's 512 KiB up); at 1 MiB (as big as Zen 5's L2)
    # the warm timing came partly from L3 and the margin over the threshold was thin
    w = b.const(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32), "w")
    task = extract_tasks(b.build(b.op("matmul", b.input("x", (1, 256)), w)))[0]
    assert cold_parameters(task, "weights") == [1]
    assert cold_parameters(task, "all") == [0, 1, 2]
    assert cold_parameters(task, "none") == []
    latency = {}
    for cold in ("none", "weights"):
        with Measurer(builders=1, repeats=5, min_repeat_s=0.002, check_fraction=1.0, cold=cold, num_threads=1,
                      cfg=cfg) as m:  # one thread: a busy neighbour core (another test) does not stall it
            r = m.measure_one(task, task.default_trace())
        assert r.valid, r.detail
        latency[cold] = min(r.costs)  # the floor: a busy host's stalls inflate a median of either, never a cold floor
    assert latency["weights"] > 1.3 * latency["none"]  # the weights come from memory, not from the caches


def _cpus_of_threads(pid: int) -> list[set[int]]:
    """The CPUs each thread of process `pid` may run on (its Cpus_allowed_list)."""
    out = []
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        line = next(ln for ln in status.read_text().splitlines() if ln.startswith("Cpus_allowed_list:"))
        cpus = set()
        for part in line.split(":")[1].strip().split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
        out.append(cpus)
    return out


@pytest.mark.skipif(not Path("/proc/self/task").exists() or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux's /proc and two CPUs for a team of two threads")
def test_the_timing_workers_threads_each_hold_a_cpu_of_their_own(cfg, monkeypatch):
    monkeypatch.delenv("OMP_PROC_BIND", raising=False)
    monkeypatch.delenv("OMP_PLACES", raising=False)
    task = matmul_task(256, 256, 256)
    with Measurer(builders=1, num_threads=2, repeats=1, min_repeat_s=0.001, cfg=cfg) as m:
        (result,) = m.measure([MeasureInput(task, task.default_trace())])
        assert result.valid, result.error
        pinned = [cpus for cpus in _cpus_of_threads(m.runner._worker.pid) if len(cpus) == 1]
    assert len(pinned) >= 2 and len({min(c) for c in pinned}) == len(pinned)  # the team: one CPU each, all apart


def test_a_binding_the_environment_chose_is_left_alone(monkeypatch):
    monkeypatch.delenv("OMP_PLACES", raising=False)
    monkeypatch.setenv("OMP_PROC_BIND", "false")
    assert pinned_team() == {}
    monkeypatch.delenv("OMP_PROC_BIND")
    assert pinned_team() == {"OMP_PROC_BIND": "spread", "OMP_PLACES": "threads"}
