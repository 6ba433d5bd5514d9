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
        results: list = [None] * n
        attempts = [0] * n
        queue = deque(range(n))
        running: list[_Call] = []

        def requeue(call: _Call) -> None:
            queue.extendleft(reversed(call.items))

        while queue or running:
            busy = {id(c.actor) for c in running}
            for actor in [a for a in self.actors if id(a) not in busy]:
                if not queue:
                    break
                take = max(1, size(len(queue), len(self.actors)))
                items = deque(queue.popleft() for _ in range(min(take, len(queue))))
                running.append(start(actor, items, time.monotonic() + limit_s(items[0])))
            if not running:  # items are left and no actor is
                for i in queue:
                    results[i] = failed(i, "lost", "no actor is left to run it")
                break
            wait_s = max(0.0, min(c.deadline for c in running) - time.monotonic())
            ready, _ = ray.wait([c.ref for c in running], num_returns=1, timeout=wait_s)
            for call in [c for c in running if any(r == c.ref for r in ready)]:
                i = call.items[0]
                try:
                    results[i] = ray.get(next(call.stream) if call.stream is not None else call.ref, timeout=0)
                except RayActorError as e:
                    running.remove(call)
                    self._lose(call.actor)
                    attempts[i] += 1
                    if attempts[i] >= self.max_attempts:
                        results[i] = failed(i, "lost", f"{attempts[i]} actors died running it: {e}")
                        call.items.popleft()
                    requeue(call)
                    continue
                except RayTaskError as e:
                    cause = e.cause if e.cause is not None else e
                    results[i] = failed(i, "error", f"{type(cause).__name__}: {cause}")
                    running.remove(call)  # a method that raised has ended its stream
                    call.items.popleft()
                    requeue(call)
                    continue
                except StopIteration:
                    running.remove(call)
                    for j in call.items:
                        results[j] = failed(j, "error", "the actor's batch ended before this item's result")
                    continue
                call.items.popleft()
                if call.items:
                    call.deadline = time.monotonic() + limit_s(call.items[0])
                else:
                    running.remove(call)
            now = time.monotonic()
            for call in [c for c in running if now >= c.deadline]:
                running.remove(call)
                ray.kill(call.actor)
                self._lose(call.actor)
                i = call.items.popleft()
                results[i] = failed(i, "timeout", f"timeout after {limit_s(i):g} s")
                requeue(call)
        return results

    def _lose(self, actor) -> None:
        self.actors = [a for a in self.actors if a is not actor]
        if self.replace is not None:
            self.actors.append(self.replace())
