"""Calls spread over Ray actors, one call per idle actor, that survive the actors they run on.

An actor that dies (its process was killed, its machine left the cluster) takes its call with it: the call goes
back to the queue and runs on another actor, so nothing is lost; a call that killed `max_attempts` actors is
given up as "lost". An actor that does not answer within the call's time limit is killed and its call is
given up as "timeout"; an exception raised by the method is given up as "error". A given-up call becomes
whatever `failed(i, kind, detail)` makes of it (the builder and runner make a `MeasureResult`), so each call has
exactly one result. Every wait has a deadline: nothing here waits forever on a cluster.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError

R = TypeVar("R")
Submit = Callable[[Any, int], "ray.ObjectRef"]  # (actor, call index) -> the call's reference
Failed = Callable[[int, str, str], R]  # (call index, "timeout" | "lost" | "error", detail) -> its result


class ActorPool:
    """`actors` taking calls; with `replace`, a new actor is made (by `replace()`) for each one lost."""

    def __init__(self, actors: list, *, replace: Callable[[], Any] | None = None, max_attempts: int = 2):
        self.actors = list(actors)
        self.replace = replace
        self.max_attempts = max_attempts

    def map(self, n: int, submit: Submit, limit_s: Callable[[int], float], failed: Failed) -> list[R]:
        """Results of calls 0..n-1, in order; call i made by `submit(actor, i)`, given `limit_s(i)` seconds."""
        results: list = [None] * n
        attempts = [0] * n
        queue = deque(range(n))
        running: dict[ray.ObjectRef, tuple[Any, int, float]] = {}  # reference -> (actor, call, deadline)
        while queue or running:
            busy = {id(a) for a, _, _ in running.values()}
            for actor in [a for a in self.actors if id(a) not in busy]:
                if not queue:
                    break
                i = queue.popleft()
                running[submit(actor, i)] = (actor, i, time.monotonic() + limit_s(i))
            if not running:  # calls are left and no actor is
                for i in queue:
                    results[i] = failed(i, "lost", "no actor is left to run it")
                break
            wait_s = max(0.0, min(deadline for _, _, deadline in running.values()) - time.monotonic())
            ready, _ = ray.wait(list(running), num_returns=1, timeout=wait_s)
            for ref in ready:
                actor, i, _ = running.pop(ref)
                try:
                    results[i] = ray.get(ref, timeout=0)
                except RayActorError as e:
                    self._lose(actor)
                    attempts[i] += 1
                    if attempts[i] >= self.max_attempts:
                        results[i] = failed(i, "lost", f"{attempts[i]} actors died running it: {e}")
                    else:
                        queue.appendleft(i)
                except RayTaskError as e:
                    cause = e.cause if e.cause is not None else e
                    results[i] = failed(i, "error", f"{type(cause).__name__}: {cause}")
            now = time.monotonic()
            for ref, (actor, i, deadline) in list(running.items()):
                if now >= deadline:
                    del running[ref]
                    ray.kill(actor)
                    self._lose(actor)
                    results[i] = failed(i, "timeout", f"timeout after {limit_s(i):g} s")
        return results

    def _lose(self, actor) -> None:
        self.actors = [a for a in self.actors if a is not actor]
        if self.replace is not None:
            self.actors.append(self.replace())
