"""Tunings by turns: one job runs at a time, each clock counts only its own turns, errors reach the caller."""

import itertools
import threading
import time

import pytest

from tilegrad.tools.turns import run_by_turns


def _worker(log: list, name: str, work_s: float, step_s: float = 0.01):
    """A job that works in small steps, reading its clock between them (as the tuner does between rounds), and
    logs when each step ran."""

    def job(clock):
        readings = [clock()]
        while readings[-1] < work_s:
            start = time.monotonic()
            time.sleep(step_s)
            log.append((name, start, time.monotonic(), threading.current_thread().name))
            readings.append(clock())
        return readings

    return job


def test_jobs_take_turns_and_clocks_exclude_the_others_turns():
    log: list = []
    begun = time.monotonic()
    out = run_by_turns({"a": _worker(log, "a", 0.3), "b": _worker(log, "b", 0.2)}, turn_s=0.05, pause_s=0.01)
    wall = time.monotonic() - begun
    steps = sorted(log, key=lambda x: x[1])
    for (_, _, end, _), (_, start, _, _) in itertools.pairwise(steps):
        assert start >= end  # never two jobs' steps at once
    switches = sum(x[0] != y[0] for x, y in itertools.pairwise(steps))
    assert switches >= 4  # both had several turns, not one run after the other
    for name, work in (("a", 0.3), ("b", 0.2)):
        readings = out[name]
        assert readings == sorted(readings)
        assert work <= readings[-1] < work + 0.15  # its own work only: the run took ~0.5 s of wall-clock time
    assert wall >= 0.5


def test_a_failing_job_hands_over_and_its_error_is_raised():
    log: list = []

    def broken(clock):
        clock()
        raise ValueError("broken tuning")

    with pytest.raises(ValueError, match="broken tuning"):
        run_by_turns({"broken": broken, "fine": _worker(log, "fine", 0.05)}, turn_s=0.01, pause_s=0.0)
    assert log and all(name == "fine" for name, *_ in log)  # the other job ran to its end


def test_a_single_job_never_waits():
    out = run_by_turns({"only": lambda clock: [clock() for _ in range(3)]}, turn_s=0.0, pause_s=0.0)
    assert out["only"] == sorted(out["only"]) and out["only"][-1] < 0.05
