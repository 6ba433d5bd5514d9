"""Kernels as team functions (codegen/team.py): every thread of one parallel region runs the kernel, a parallel
loop shares its iterations out, serial statements run on thread 0, a buffer around parallel loops is shared,
and barriers order the steps, whatever the thread count (uneven shares included)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import config
from tilegrad.codegen.c import render_c
from tilegrad.kernel import buffer_specs, build_sources
from tilegrad.loop.ir import Allocate, Buffer, For, Kernel, Seq, Store
from tilegrad.runtime import Kernel as NativeKernel
from tilegrad.te import expr as E

N = 37  # shares of 13, 13, 11 on three threads; 8, 8, 8, 8, 5 on five


def _index(name: str, extent: int) -> E.Var:
    return E.Var(name, E.INDEX, 0, extent - 1)


def _c(v: int) -> E.Expr:
    return E.Const(v, E.INDEX)


def _steps_kernel() -> Kernel:
    """A serial store, two parallel loops through a shared temporary (the second reads what other threads wrote),
    then a serial store reading both."""
    x, y = Buffer("X", (_c(N),), "float32"), Buffer("Y", (_c(N),), "float32")
    t = Buffer("T", (_c(N),), "float32")  # global scope: around the parallel loops, on the heap, shared
    i, j = _index("i", N), _index("j", N)
    body = Allocate(t, Seq((
        Store(y, (_c(0),), E.const(-1.0, "float32")),
        For(i, _c(N), "parallel", Store(t, (i,), E.Load(x, (i,)) * 2.0)),
        For(j, _c(N), "parallel", Store(y, (j,), E.Load(t, (_c(N - 1) - j,)) + 1.0)),
        Store(y, (_c(0),), E.Load(y, (_c(N - 1),)) + E.Load(t, (_c(0),))),
    )))
    return Kernel("team_steps", (x, y), body)


def _rounds_kernel(rounds: int) -> Kernel:
    """A serial loop around two parallel loops: every thread runs the rounds; each round shifts Y by one."""
    x, y = Buffer("X", (_c(N),), "float32"), Buffer("Y", (_c(N),), "float32")
    t = Buffer("T", (_c(N),), "float32")
    r, i, j = _index("r", rounds), _index("i", N), _index("j", N)
    shift = For(r, _c(rounds), "serial", Seq((
        For(i, _c(N), "parallel", Store(t, (i,), E.Load(y, (E.floormod(i + 1, N),)) + E.Load(x, (i,)))),
        For(j, _c(N), "parallel", Store(y, (j,), E.Load(t, (j,)))),
    )))
    init = For(i, _c(N), "parallel", Store(y, (i,), E.Load(x, (i,))))
    return Kernel("team_rounds", (x, y), Allocate(t, Seq((init, shift))))


def _run(k: Kernel, threads: int, x: np.ndarray) -> np.ndarray:
    with config.override(num_threads=threads):
        native = NativeKernel(build_sources([render_c(k)]), k.name, buffer_specs(k))
    y = np.zeros(N, np.float32)
    native(x, y)
    return y


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_steps_see_each_others_results_at_any_thread_count(threads):
    x = np.arange(N, dtype=np.float32)
    want = x[::-1] * 2 + 1
    want[0] = want[-1] + x[0] * 2
    np.testing.assert_array_equal(_run(_steps_kernel(), threads, x), want)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_every_thread_runs_a_serial_loop_around_parallel_ones(threads):
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    y = x.copy()
    for _ in range(5):
        y = np.roll(y, -1) + x
    np.testing.assert_allclose(_run(_rounds_kernel(5), threads, x), y, rtol=1e-6)


def _shared_buffers_kernel(count: int, rounds: int) -> Kernel:
    """`count` shared temporaries, each broadcast in turn (one barrier each, the slots alternating), then rounds of
    parallel loops that pass values through all of them: a thread that read a stale slot writes the wrong buffer."""
    x, y = Buffer("X", (_c(N),), "float32"), Buffer("Y", (_c(N),), "float32")
    ts = [Buffer(f"T{n}", (_c(N),), "float32") for n in range(count)]
    r = _index("r", rounds)
    chain, prev = [], x
    for n, t in enumerate(ts):
        i = _index(f"i{n}", N)
        chain.append(For(i, _c(N), "parallel", Store(t, (i,), E.Load(prev, (_c(N - 1) - i,)) + float(n + 1))))
        prev = t
    j = _index("j", N)
    chain.append(For(j, _c(N), "parallel", Store(y, (j,), E.Load(prev, (j,)) + E.Load(y, (j,)))))
    body: object = For(r, _c(rounds), "serial", Seq(tuple(chain)))
    for t in reversed(ts):
        body = Allocate(t, body)
    return Kernel("team_shared", (x, y), body)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_consecutive_shared_buffers_each_reach_every_thread(threads):
    count, rounds = 5, 20
    x = np.arange(N, dtype=np.float32)
    t = x
    for n in range(count):
        t = t[::-1] + (n + 1)
    np.testing.assert_array_equal(_run(_shared_buffers_kernel(count, rounds), threads, x), t * rounds)
    assert render_c(_shared_buffers_kernel(count, rounds)).count("tg_broadcast(tg, ") == count


def test_serial_statements_run_on_thread_zero_and_every_step_ends_at_a_barrier():
    source = render_c(_steps_kernel())
    team = source[source.index("void team_steps_team"):source.index("void team_steps(")]
    assert team.count("tg_barrier(tg);") == 4  # the two serial statements and the two parallel loops
    assert team.count("if (tg->tid == 0) {") == 2  # the two serial statements
    assert "if (tg->tid == 0 && !tg_kept_T) tg_kept_T = " in team  # thread 0 allocates the shared buffer...
    assert "tg_broadcast(tg, tg_kept_T)" in team and "#pragma omp parallel" not in team  # ...and shares it


def test_a_kernel_without_a_parallel_loop_called_alone_opens_no_region():
    """A team of one: no thread is woken (and a process forked later does not inherit libgomp's threads)."""
    x, y = Buffer("X", (_c(N),), "float32"), Buffer("Y", (_c(N),), "float32")
    i = _index("i", N)
    k = Kernel("team_serial", (x, y), For(i, _c(N), "serial", Store(y, (i,), E.Load(x, (i,)) + 1.0)))
    source = render_c(k)
    assert "TG_TEAM_ALONE team_serial_team(args, tg);" in source and "TG_TEAM_BEGIN" not in source.split("#endif")[-1]
    x_ = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(_run(k, 2, x_), x_ + 1)


def _counting_kernel(n: int, rounds: int) -> Kernel:
    """Rounds of one parallel loop adding 1 to each of Y's `n` elements: an iteration run twice (two threads
    taking the same block) or never (a block lost between them) leaves a count other than `rounds`. The work per
    iteration grows with its index, so the shares are uneven and threads take from each other."""
    x, y = Buffer("X", (_c(n),), "float32"), Buffer("Y", (_c(n),), "float32")
    r, i, k = _index("r", rounds), _index("i", n), _index("k", n)
    work = For(k, i, "serial", Store(x, (i,), E.Load(x, (i,)) * 1.0))  # i steps of busy work
    count = Store(y, (i,), E.Load(y, (i,)) + 1.0)
    return Kernel("team_counting", (x, y), For(r, _c(rounds), "serial", For(i, _c(n), "parallel", Seq((work, count)))))


@pytest.mark.parametrize("threads,n", [(2, 1), (2, 300), (3, 2), (5, 300), (70, 9)])
def test_a_parallel_loop_runs_every_iteration_once_however_threads_take_from_each_other(threads, n):
    """Blocks are taken dynamically (codegen/team.py: each thread's own share first, then the others'): more
    threads than cores, so some are descheduled mid-loop and the others take their blocks; 70 threads, past
    TG_MAX_THREADS, share statically."""
    rounds = 200
    with config.override(num_threads=threads):
        k = _counting_kernel(n, rounds)
        native = NativeKernel(build_sources([render_c(k)]), k.name, buffer_specs(k))
    x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
    native(x, y)
    np.testing.assert_array_equal(y, np.full(n, rounds, np.float32))
