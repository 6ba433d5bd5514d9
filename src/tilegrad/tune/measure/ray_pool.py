"""Calls spread over Ray actors, one call per idle actor, that survive the actors they run on.

A call is one item (`ActorPool.map`) or a batch of items whose results an actor streams back one by one
(`ActorPool.map_batches`, a streaming generator method): a batch costs one call however many items it holds.
An actor that dies (its process was killed, its machine left the cluster) takes the item it was running with it:
that item goes back to the queue and runs on another actor, so nothing is lost, and so do the items of its batch
it had not reached; what it streamed back before it died is kept, so nothing runs twice. An item that killed
`max_attempts` actors is given up as "lost". An actor that does not finish an item within the item's time limit
is killed and the item is given up as "timeout"; an exception raised by the method is the item's "error". A
given-up item becomes whatever `failed(i, kind, detail)` makes of it (the builder and runner make a
`MeasureResult`), so each item has exactly one result. Every wait has a deadline: nothing here waits forever on
a cluster.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError

R = TypeVar("R")
Submit = Callable[[Any, int], "ray.ObjectRef"]  # (actor, item) -> the call's reference
SubmitBatch = Callable[[Any, list[int]], "ray.ObjectRefGenerator"]  # (actor, items) -> a result per item, in order
Failed = Callable[[int, str, str], R]  # (item, "timeout" | "lost" | "error", detail) -> its result


@dataclass
class _Call:
    """A call in flight: its actor, the items it has still to answer (the first is the one running) and when the
    running one is overdue. `stream` is a generator of the items' result references, or None for a one-item call
    whose `ref` is its result."""

    actor: Any
    items: deque[int]
    deadline: float
    ref: Any
    stream: Any = None


class ActorPool:
    """`actors` taking calls; with `replace`, a new actor is made (by `replace()`) for each one lost."""

    def __init__(self, actors: list, *, replace: Callable[[], Any] | None = None, max_attempts: int = 2):
        self.actors = list(actors)
        self.replace = replace
        self.max_attempts = max_attempts

    def map(self, n: int, submit: Submit, limit_s: Callable[[int], float], failed: Failed) -> list[R]:
        """Results of items 0..n-1, in order; item i is one call, `submit(actor, i)`, given `limit_s(i)` seconds."""

        def start(actor, items: deque[int], deadline: float) -> _Call:
            return _Call(actor, items, deadline, submit(actor, items[0]))

        return self._run(n, start, lambda waiting, actors: 1, limit_s, failed)

    def map_batches(self, n: int, submit: SubmitBatch, limit_s: Callable[[int], float], failed: Failed) -> list[R]:
        """Results of items 0..n-1, in order; `submit(actor, items)` starts a streaming call that yields one result
        per item, in order, each given `limit_s(item)` seconds from the one before. Batches shrink as the queue
        does (a share of what is left), so that actors of different speeds finish together."""

        def start(actor, items: deque[int], deadline: float) -> _Call:
            stream = submit(actor, list(items))
            return _Call(actor, items, deadline, stream, stream)

        def size(waiting: int, actors: int) -> int:
            return waiting if actors == 1 else math.ceil(waiting / (2 * actors))

        return self._run(n, start, size, limit_s, failed)

    def _run(self, n: int, start: Callable[[Any, deque, float], _Call], size: Callable[[int, int], int],
             limit_s: Callable[[int], float], failed: Failed) -> list:
        run = _Run(self, n, limit_s, failed)
        while run.queue or run.running:
            busy = {id(c.actor) for c in run.running}
            for actor in [a for a in self.actors if id(a) not in busy]:
                if not run.queue:
                    break
                take = min(max(1, size(len(run.queue), len(self.actors))), len(run.queue))
                items = deque(run.queue.popleft() for _ in range(take))
                run.running.append(start(actor, items, time.monotonic() + limit_s(items[0])))
            if not run.running:  # items are left and no actor is
                for i in run.queue:
                    run.results[i] = failed(i, "lost", "no actor is left to run it")
                break
            wait_s = max(0.0, min(c.deadline for c in run.running) - time.monotonic())
            ready, _ = ray.wait([c.ref for c in run.running], num_returns=1, timeout=wait_s)
            for call in [c for c in run.running if any(r == c.ref for r in ready)]:
                run.collect(call)
            now = time.monotonic()
            for call in [c for c in run.running if now >= c.deadline]:
                run.expire(call)
        return run.results

    def _lose(self, actor) -> None:
        self.actors = [a for a in self.actors if a is not actor]
        if self.replace is not None:
            self.actors.append(self.replace())


class _Run:
    """One `ActorPool` map in progress: the results so far, the attempts per item, the items waiting and the calls
    in flight."""

    def __init__(self, pool: ActorPool, n: int, limit_s: Callable[[int], float], failed: Failed):
        self.pool, self.limit_s, self.failed = pool, limit_s, failed
        self.results: list = [None] * n
        self.attempts = [0] * n
        self.queue = deque(range(n))
        self.running: list[_Call] = []

    def collect(self, call: _Call) -> None:
        """Take the ready result of the call's running item: its value, or its failure."""
        i = call.items[0]
        try:
            self.results[i] = ray.get(next(call.stream) if call.stream is not None else call.ref, timeout=0)
        except RayActorError as e:
            self.pool._lose(call.actor)
            self.attempts[i] += 1
            if self.attempts[i] >= self.pool.max_attempts:
                self._give_up(call, "lost", f"{self.attempts[i]} actors died running it: {e}")
            self._end(call)
            return
        except RayTaskError as e:  # a method that raised has ended its stream
            cause = e.cause if e.cause is not None else e
            self._give_up(call, "error", f"{type(cause).__name__}: {cause}")
            self._end(call)
            return
        except StopIteration:
            while call.items:
                self._give_up(call, "error", "the actor's batch ended before this item's result")
            self._end(call)
            return
        call.items.popleft()
        if call.items:
            call.deadline = time.monotonic() + self.limit_s(call.items[0])
        else:
            self.running.remove(call)

    def expire(self, call: _Call) -> None:
        """The call's actor did not finish its running item in time: kill it, and that item is a timeout."""
        ray.kill(call.actor)
        self.pool._lose(call.actor)
        self._give_up(call, "timeout", f"timeout after {self.limit_s(call.items[0]):g} s")
        self._end(call)

    def _give_up(self, call: _Call, kind: str, detail: str) -> None:
        i = call.items.popleft()
        self.results[i] = self.failed(i, kind, detail)

    def _end(self, call: _Call) -> None:
        """The call is over: the items it had not answered go back to the front of the queue, in order."""
        self.running.remove(call)
        self.queue.extendleft(reversed(call.items))
