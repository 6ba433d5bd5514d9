import os
import threading
import time

import pytest

from tilegrad.runtime.worker import Worker, call_all

# A child that echoes, crashes, spins or sleeps on request; it imports nothing heavy, so it starts in ~50 ms.
CHILD = """
import os, sys, time
from tilegrad.runtime.worker import serve

def handle(request):
    action = request.get("do")
    if action == "abort":
        os.abort()
    if action == "spin":
        while True:
            pass
    if action == "sleep":
        time.sleep(request["s"])
    if action == "raise":
        raise ValueError("no such thing")
    if action == "print":
        print("not a reply")
        sys.stderr.write("a diagnostic\\n")
    return {"echo": request.get("x"), "pid": os.getpid()}

time.sleep(float(os.environ.get("CHILD_START_S", "0")))
serve(handle)
"""


@pytest.fixture
def child(tmp_path, monkeypatch):
    (tmp_path / "echo_child.py").write_text(CHILD)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    return "echo_child"


def test_one_child_answers_many_requests(child):
    with Worker(child) as w:
        replies = [w.call({"x": i}, timeout_s=5) for i in range(20)]
    assert [r.value["echo"] for r in replies] == list(range(20))
    assert len({r.value["pid"] for r in replies}) == 1
    assert all(r.failure is None and r.wall_s < 1.0 for r in replies[1:])


def test_a_crash_is_a_reply_and_the_next_request_gets_a_fresh_child(child):
    with Worker(child) as w:
        first = w.call({"x": 1}, timeout_s=5)
        crash = w.call({"do": "abort"}, timeout_s=5)
        after = w.call({"x": 2}, timeout_s=5)
    assert crash.value is None and crash.failure == "crash"
    assert crash.detail.startswith("worker crashed: SIGABRT")
    assert after.value["echo"] == 2 and after.value["pid"] != first.value["pid"]


def test_a_spinning_child_is_killed_at_the_time_limit(child):
    with Worker(child) as w:
        w.call({"x": 0}, timeout_s=5)
        start = time.monotonic()
        reply = w.call({"do": "spin"}, timeout_s=0.5)
        assert 0.5 <= time.monotonic() - start < 1.5
        assert reply.failure == "timeout" and reply.detail == "timeout after 0.5 s"
        assert w.call({"x": 3}, timeout_s=5).value["echo"] == 3


def test_start_up_does_not_count_against_the_time_limit(child, monkeypatch):
    monkeypatch.setenv("CHILD_START_S", "0.6")
    with Worker(child) as w:
        reply = w.call({"x": 4}, timeout_s=0.3)
    assert reply.failure is None and reply.value["echo"] == 4


def test_a_child_that_never_starts_is_a_timeout(child, monkeypatch):
    monkeypatch.setenv("CHILD_START_S", "30")
    with Worker(child, start_timeout_s=0.5) as w:
        reply = w.call({"x": 5}, timeout_s=5)
    assert reply.failure == "timeout" and "did not start within 0.5 s" in reply.detail


def test_exceptions_and_prints_do_not_break_the_protocol(child):
    with Worker(child) as w:
        raised = w.call({"do": "raise"}, timeout_s=5)
        printed = w.call({"do": "print", "x": 6}, timeout_s=5)
    assert raised.value == {"error": "ValueError: no such thing"}
    assert printed.value["echo"] == 6


def test_the_stderr_tail_explains_a_crash(child):
    with Worker(child) as w:
        w.call({"do": "print"}, timeout_s=5)
        crash = w.call({"do": "abort"}, timeout_s=5)
    assert "a diagnostic" not in crash.detail  # only what the failing request wrote


def test_call_all_runs_in_parallel_and_keeps_order(child):
    workers = [Worker(child) for _ in range(2)]
    try:
        call_all(workers, [{"x": 0}, {"x": 0}], timeout_s=5)  # start both
        start = time.monotonic()
        replies = call_all(workers, [{"do": "sleep", "s": 0.3, "x": i} for i in range(4)]
                           + [{"do": "abort"}, {"x": 9}], timeout_s=5)
        elapsed = time.monotonic() - start
    finally:
        for w in workers:
            w.close()
    assert [r.value["echo"] for r in replies[:4]] == [0, 1, 2, 3]
    assert replies[4].failure == "crash" and replies[5].value["echo"] == 9
    assert elapsed < 1.0  # four 0.3 s sleeps on two workers


def _always_waiting(pid):
    """Run-queue waits as a thread that has waited for a core all the time since the epoch of the clock."""
    return {1: time.monotonic()}


def test_a_child_starved_of_a_core_gets_the_time_it_waited(child, monkeypatch):
    """At the deadline, a child whose thread waited for a core (a loaded machine) was not slow: its limit moves on
    by the wait. Starvation is simulated by reading the waits as growing with the clock."""
    from tilegrad.runtime import worker

    monkeypatch.setattr(worker, "runqueue_waits", _always_waiting)
    with Worker(child) as w:
        w.call({"x": 0}, timeout_s=5)
        reply = w.call({"do": "sleep", "s": 0.8, "x": 1}, timeout_s=0.3)
    assert reply.failure is None and reply.value["echo"] == 1 and reply.wall_s >= 0.8


def test_a_starved_child_is_still_killed_after_the_longest_stretch(child, monkeypatch):
    from tilegrad.runtime import worker

    monkeypatch.setattr(worker, "runqueue_waits", _always_waiting)
    monkeypatch.setattr(worker, "MAX_STRETCH", 2.0)
    with Worker(child) as w:
        w.call({"x": 0}, timeout_s=5)
        start = time.monotonic()
        reply = w.call({"do": "sleep", "s": 5, "x": 1}, timeout_s=0.3)
    assert reply.failure == "timeout" and 0.55 <= time.monotonic() - start < 2.0


def test_a_sleeping_child_is_not_starved_and_times_out_at_the_limit(child):
    with Worker(child) as w:
        w.call({"x": 0}, timeout_s=5)
        start = time.monotonic()
        reply = w.call({"do": "sleep", "s": 5, "x": 1}, timeout_s=0.3)
    assert reply.failure == "timeout" and time.monotonic() - start < 1.5


def test_runqueue_waits_are_read_per_thread():
    from tilegrad.runtime.worker import runqueue_waits

    waits = runqueue_waits(os.getpid())
    assert threading.get_native_id() in waits and all(w >= 0.0 for w in waits.values())
