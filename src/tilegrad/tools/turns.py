"""Tunings that take turns on one machine: one runs at a time, and each one's clock counts only its own turns.

Two search policies compared one after the other can meet different machines: a shared host has slow spells of
minutes, and one of them falls on one policy only. Run by turns of some seconds, both see the same machine on
average. Each
tuning runs in a thread of its own and gets `tune_tasks(clock=...)` a clock that, read after its turn is up (the
tuner reads it between rounds), hands over to the next tuning and waits for its own next turn. A turn starts
counting after a pause, so that the thread pools the previous tuning left spinning (OpenBLAS spins ~0.1 s after a
product) have gone idle.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


def run_by_turns(jobs: Mapping[str, Callable[[Callable[[], float]], T]], *, turn_s: float = 20.0,
                 pause_s: float = 0.5) -> dict[str, T]:
    """Run each `job(clock)` in a thread of its own, one at a time, in turns of about `turn_s` of its own time
    (a turn ends at the first reading of its clock after that); `clock()` gives the job's seconds so far, turns
    of the others excluded. The jobs' results by name, in the order of `jobs`; the first job to raise has its exception raised here,
    once every job has finished."""
    if not jobs:
        return {}
    turns = _Turns(list(jobs), turn_s, pause_s)
    results: dict[str, T] = {}
    errors: list[BaseException] = []

    def body(name: str, job: Callable[[Callable[[], float]], T]) -> None:
        turns.begin(name)
        try:
            results[name] = job(lambda: turns.read(name))
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
            errors.append(e)
        finally:
            turns.finish(name)

    # Threads rather than processes: a tuning's measurer starts worker processes whose parent-death signal is tied
    # to the thread that started them, and each job starts and stops its own inside its thread.
    threads = [threading.Thread(target=body, args=item, name=f"turns-{item[0]}") for item in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return {name: results[name] for name in jobs}


class _Turns:
    """Whose turn it is, since when, and each job's seconds in its finished turns."""

    def __init__(self, order: list[str], turn_s: float, pause_s: float):
        self.order, self.turn_s, self.pause_s = order, turn_s, pause_s
        self.running = list(order)
        self.holder = order[0]
        self.since = 0.0
        self.own = dict.fromkeys(order, 0.0)
        self.cond = threading.Condition()

    def begin(self, name: str) -> None:
        with self.cond:
            self._await(name)

    def read(self, name: str) -> float:
        with self.cond:
            if self.holder != name:
                raise RuntimeError(f"{name} read its clock during {self.holder}'s turn")
            now = time.monotonic()
            if now - self.since >= self.turn_s and len(self.running) > 1:
                self.own[name] += now - self.since
                self._pass(name)
                self._await(name)
                now = self.since
            return self.own[name] + now - self.since

    def finish(self, name: str) -> None:
        with self.cond:
            self.own[name] += time.monotonic() - self.since
            self._pass(name)
            self.running.remove(name)

    def _pass(self, name: str) -> None:
        """Hand the turn to the running job after `name` in order."""
        i = self.running.index(name)
        self.holder = self.running[(i + 1) % len(self.running)]
        self.cond.notify_all()

    def _await(self, name: str) -> None:
        self.cond.wait_for(lambda: self.holder == name)
        time.sleep(self.pause_s)  # the other jobs are waiting for the turn, not for this lock
        self.since = time.monotonic()
