"""The task scheduler warms every task up, then spends rounds where the weighted latency falls fastest."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from tilegrad.tune.task_scheduler import TaskScheduler

# simulated tasks: (weight, latency before tuning, latency tuning converges to, rounds to improve by a factor e)
SIMULATED = [
    (10, 5.0e-3, 1.0e-3, 8.0),  # heavy and slow to tune: where the rounds should go
    (1, 1.0e-3, 0.5e-3, 2.0),
    (1, 0.2e-3, 0.19e-3, 1.0),  # almost nothing to gain
    (3, 2.0e-3, 0.4e-3, 4.0),
    (1, 0.1e-3, 0.05e-3, 3.0),
    (2, 0.3e-3, 0.25e-3, 2.0),
]


def _simulated_latency(task: int, rounds: int) -> float:
    _, start, floor, tau = SIMULATED[task]
    return floor + (start - floor) * math.exp(-rounds / tau)


def _tune(strategy: str, rounds: int, seed: int = 0) -> TaskScheduler:
    sched = TaskScheduler(
        [w for w, *_ in SIMULATED],
        strategy=strategy,
        initial_latencies=[start for _, start, *_ in SIMULATED],
        rng=np.random.default_rng(seed),
    )
    for _ in range(rounds):
        i = sched.next_task()
        sched.update(i, _simulated_latency(i, sched.rounds[i] + 1))
    return sched


def _visits(sched: TaskScheduler, rounds: int) -> list[int]:
    out = []
    for _ in range(rounds):
        i = sched.next_task()
        out.append(i)
        sched.update(i, 1.0)
    return out


@pytest.mark.parametrize("strategy", ["gradient", "round-robin"])
def test_warmup_visits_every_task_first(strategy):
    assert _visits(TaskScheduler([1, 5, 2, 9], strategy=strategy, eps=1.0), 4) == [0, 1, 2, 3]
    # no latencies: in turn; then every latency 1: the heaviest first
    assert _visits(TaskScheduler([1, 5, 2], strategy=strategy, warmup_rounds=2), 6) == [0, 1, 2, 1, 2, 0]


def test_round_robin_cycles():
    assert _visits(TaskScheduler([1, 5, 2], strategy="round-robin"), 7) == [0, 1, 2, 0, 1, 2, 0]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_beats_round_robin_on_weighted_latency(seed):
    rounds = 36
    gradient = _tune("gradient", rounds, seed)
    round_robin = _tune("round-robin", rounds, seed)
    assert gradient.total_rounds == round_robin.total_rounds == rounds
    assert gradient.estimated_latency() < 0.7 * round_robin.estimated_latency()  # about 0.49
    assert gradient.rounds[0] > gradient.rounds[2]  # the heavy task got the rounds, the flat one did not
    assert round_robin.rounds == [6] * 6


def test_history_records_each_round():
    sched = _tune("gradient", 10)
    assert [r for r, _, _ in sched.history] == list(range(1, 11))
    assert [f for *_, f in sched.history] == sorted((f for *_, f in sched.history), reverse=True)
    assert sched.history[-1][2] == sched.estimated_latency()


@pytest.mark.parametrize("strategy", ["gradient", "round-robin"])
def test_exhausted_tasks_are_skipped(strategy):
    sched = TaskScheduler([1, 100, 1], strategy=strategy, initial_latencies=[1.0, 1.0, 1.0])
    sched.mark_exhausted(1)
    assert 1 not in _visits(sched, 20)
    sched.mark_exhausted(0)
    sched.mark_exhausted(2)
    assert sched.next_task() is None


def test_estimated_latency_is_weighted_sum():
    sched = TaskScheduler([2, 3, 0], initial_latencies=[1.0, 2.0, math.nan])
    assert sched.estimated_latency() == 2 * 1.0 + 3 * 2.0  # a task of weight 0 does not count
    sched.update(0, 0.5)
    sched.update(1, 4.0)  # worse than the best so far: the best stays
    assert sched.best == [0.5, 2.0, math.inf]
    assert sched.estimated_latency() == 2 * 0.5 + 3 * 2.0
    assert TaskScheduler([1, 1], initial_latencies=[1.0, math.inf]).estimated_latency() == math.inf


def test_task_without_latency_is_tuned_first():
    sched = TaskScheduler([1, 1, 1], warmup_rounds=0, eps=0.0, initial_latencies=[1.0, math.inf, 1.0])
    for i in range(3):
        sched.update(i, math.inf if i == 1 else 1.0)
    assert sched.next_task() == 1


def test_gradient_follows_the_formula():
    sched = TaskScheduler([3.0], alpha=0.2, backward_window=2, initial_latencies=[10.0])
    for g in (8.0, 7.0, 4.0):
        sched.update(0, g)
    backward = (4.0 - 8.0) / 2
    forward = -4.0 / 3
    assert sched.gradient(0) == pytest.approx(3.0 * (0.2 * backward + 0.8 * forward))


def test_similar_faster_task_raises_priority():
    # tasks 0 and 2 look alike (weight, FLOPs, latency, history); task 1 does the same kind of work as task 0 at
    # 8x its throughput, so task 0 is known to have room to improve
    kw = {"eps": 0.0, "flops": [1e9, 1e9, 1e9], "initial_latencies": [1.0, 0.125, 1.0]}
    plain = TaskScheduler([1, 1, 1], **kw)
    similar = TaskScheduler([1, 1, 1], kinds=["conv2d", "conv2d", "dense"], **kw)
    for sched in (plain, similar):
        for _ in range(4):
            for i in range(3):
                sched.update(i, sched.best[i])
    assert plain.gradient(0) == plain.gradient(2)
    assert similar.gradient(0) == pytest.approx(0.8 * (2 * 0.125 - 1.0))  # the similar-task bound wins
    assert similar.gradient(0) < similar.gradient(2)
    assert similar.next_task() == 0


def test_bad_arguments_say_what_to_change():
    with pytest.raises(ValueError, match="round-robin"):
        TaskScheduler([1], strategy="greedy")
    with pytest.raises(ValueError, match="one per task"):
        TaskScheduler([1, 2], flops=[1.0])
    with pytest.raises(ValueError, match="at least one round"):
        TaskScheduler([1]).update(0, 1.0, rounds_used=0)


def test_rounds_used_counts_several_rounds():
    sched = TaskScheduler([1, 1], strategy="round-robin", initial_latencies=[1.0, 1.0])
    sched.update(0, 0.5, rounds_used=3)
    assert sched.rounds == [3, 0] and sched.total_rounds == 3
    assert _visits(sched, 3) == [1, 1, 1]


def _conv_task(weight, algorithm=None, convolutions=frozenset({"conv1"})):
    return SimpleNamespace(weight=weight, flops=1e6, node=SimpleNamespace(op="conv"), algorithm=algorithm,
                           convolutions=convolutions)


def _run(sched: TaskScheduler, rounds: int, factors: list[float]) -> list[int]:
    picked = []
    for _ in range(rounds):
        i = sched.next_task()
        picked.append(i)
        sched.update(i, sched.best[i] * factors[i])
    return picked


def test_a_far_slower_algorithm_gets_neither_warmup_nor_rounds():
    tasks = [_conv_task(2), _conv_task(2, "im2col"), _conv_task(1, convolutions=frozenset())]
    sched = TaskScheduler.for_tasks(tasks, eps=0.0, initial_latencies=[1e-3, 10e-3, 1e-3],
                                    rng=np.random.default_rng(0))
    assert sched.weights == [2, 2, 1] and sched.estimated_latency() == pytest.approx(3e-3)  # conv1 counted once
    picked = _run(sched, 30, [0.9, 0.9, 0.9])  # the im2col kernel would keep improving the most in seconds
    assert picked[:2] == [0, 2] and 1 not in picked


def test_a_close_algorithm_draws_rounds_and_counts_once_it_is_the_fastest():
    tasks = [_conv_task(1), _conv_task(1, "winograd"), _conv_task(1, convolutions=frozenset())]
    sched = TaskScheduler.for_tasks(tasks, eps=0.0, initial_latencies=[1e-3, 1.2e-3, 1e-3],
                                    rng=np.random.default_rng(0))
    picked = _run(sched, 12, [0.99, 0.6, 0.99])
    assert picked[:2] == [0, 2] and 1 in picked
    assert sched.best[1] < sched.best[0]
    assert sched.estimated_latency() == pytest.approx(sched.best[1] + sched.best[2])
    assert sched.gradient(0) == 0.0  # the direct kernel no longer leads: a round of it lowers nothing expected


def test_an_algorithm_of_several_kernels_counts_their_sum():
    two = frozenset({"conv1"})
    tasks = [_conv_task(1, convolutions=two), _conv_task(1, "winograd", two), _conv_task(1, "winograd", two)]
    sched = TaskScheduler.for_tasks(tasks, initial_latencies=[3e-3, 1e-3, 1.5e-3])
    assert sched.estimated_latency() == pytest.approx(2.5e-3)
    assert _visits(sched, 2) == [2, 1]  # the warm-up goes to the faster algorithm's kernels only, slower first


def test_a_layout_transform_of_another_algorithms_graph_weighs_nothing():
    tasks = [_conv_task(1), _conv_task(1, "direct@16"), _conv_task(3, "direct@16", frozenset())]
    sched = TaskScheduler.for_tasks(tasks, initial_latencies=[1e-3, 1e-3, 1e-3])
    assert sched.weights == [1, 1, 0.0] and sched.slots[2] is None


def test_warmup_goes_to_the_largest_share_of_the_latency_first():
    sched = TaskScheduler([1, 4, 2, 1], eps=0.0, initial_latencies=[1e-3, 1e-3, 3e-3, math.inf])
    assert _visits(sched, 4) == [3, 2, 1, 0]  # no latency yet, then w x g: 6, 4 and 1 ms
