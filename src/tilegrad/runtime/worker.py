"""Persistent worker processes that answer JSON requests line by line, and survive nothing they should not.

A `Worker` starts `python -m MODULE ARGS...` (fork+exec, so no child inherits a half-copied OpenMP thread pool or
a parent's locks) in its own session. The child calls `serve(handle)`: it says it is ready once its imports are
done, then answers each request line with one reply line. One interpreter serves many requests, so a request
costs milliseconds, not an interpreter's start-up.

Failures are values. A child that dies (a kernel that segfaults or aborts) or overruns its time (a kernel that
spins, a compiler that never finishes) is killed with its whole process group and the request comes back as
`Reply(failure="crash" | "timeout", detail=...)` with the tail of its stderr; the next request starts a fresh
child. The time limit starts when the child is ready, so interpreter start-up never counts against a request.

The limit is counted in the child's time on a core, not the clock's: on a loaded machine (two test processes, a
tuning run beside a build) a child can wait seconds for a core, and a fast kernel would time out. So at the
deadline the limit moves on by the longest time one of the child's threads has waited on a run queue since the
request (/proc/PID/task/*/schedstat; a kernel runs at the pace of its slowest thread), up to `MAX_STRETCH`
limits in all. A spinning or sleeping child that had its cores is killed on time.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding `tilegrad`, for the child's sys.path
_STDERR_TAIL_CHARS = 2000
MAX_STRETCH = 10.0  # a starved child's deadline moves to at most this many limits after the start
_READY = {"ready": True}


@dataclass(frozen=True)
class Reply:
    """The child's answer (`value`), or `failure` ("crash" or "timeout") with a `detail` that says what happened."""

    value: dict | None
    failure: str | None = None
    detail: str = ""
    wall_s: float = 0.0


class Worker:
    """One child process running `python -m module *args`, started on first use and again after a failure."""

    def __init__(self, module: str, args: Sequence[str] = (), *, start_timeout_s: float = 120.0,
                 env: Mapping[str, str] | None = None):
        self.module = module
        self.args = [str(a) for a in args]
        self.env = dict(env or {})  # set in the child's environment, over this process's
        self.start_timeout_s = start_timeout_s
        self.requests_served = 0  # by the current child
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self._buffer = b""
        self._finalizer = None
        self._deadline = 0.0
        self._started_at = 0.0  # when the request's limit started (sent, or the child ready) ...
        self._waits_at_start: dict[int, float] = {}  # ... and its threads' run-queue waits then
        self._timeout_s = 0.0
        self._ready = False
        self._sent_at = 0.0
        self._stderr_mark = 0

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def call(self, request: dict, timeout_s: float) -> Reply:
        """Send `request` and wait for its reply, at most `timeout_s` after the child is ready."""
        self.submit(request, timeout_s)
        while True:
            reply = self.poll(self._wait_s())
            if reply is not None:
                return reply

    def submit(self, request: dict, timeout_s: float) -> None:
        """Send `request`, starting a child first if none is running; collect the reply with `poll`."""
        if not self.alive:
            self._spawn()
        self._stderr_mark = self._stderr.seek(0, os.SEEK_END)
        self._timeout_s = timeout_s
        self._sent_at = time.monotonic()
        if self._ready:
            self._start_limit(self._sent_at)
        try:
            self._proc.stdin.write(json.dumps(request).encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died since poll() last looked; the next read sees end-of-file and reports why

    def poll(self, wait_s: float = 0.0) -> Reply | None:
        """The reply to the request in flight if it has come (waiting up to `wait_s`), else None."""
        while True:
            line = self._take_line()
            if line is not None:
                value = json.loads(line)
                if value == _READY:
                    self._ready = True
                    self._start_limit(time.monotonic())
                    continue
                self.requests_served += 1
                return Reply(value, wall_s=time.monotonic() - self._sent_at)
            now = time.monotonic()
            if now >= self._deadline and not self._stretched(now):
                return self._fail_timeout()
            with selectors.DefaultSelector() as sel:
                sel.register(self._proc.stdout, selectors.EVENT_READ)
                ready = sel.select(min(max(0.0, wait_s), self._deadline - now))
            if not ready:
                now = time.monotonic()
                return None if now < self._deadline or self._stretched(now) else self._fail_timeout()
            chunk = os.read(self._proc.stdout.fileno(), 1 << 16)
            if not chunk:
                return self._fail_crash()
            self._buffer += chunk

    def close(self) -> None:
        """End the child: end-of-input asks it to exit; it is killed if it does not within a second."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(proc)
        self._finalizer.detach()
        self._stderr.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals --
    def _spawn(self) -> None:
        if self._proc is not None:
            self.close()
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
        self._stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty child cannot block on a full pipe
        self._proc = subprocess.Popen(
            [sys.executable, "-P", "-m", self.module, *self.args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, start_new_session=True,
        )
        self._finalizer = weakref.finalize(self, _kill_group, self._proc)
        self._buffer = b""
        self._ready = False
        self._deadline = time.monotonic() + self.start_timeout_s
        self.requests_served = 0

    def _start_limit(self, now: float) -> None:
        self._started_at, self._deadline = now, now + self._timeout_s
        self._waits_at_start = runqueue_waits(self._proc.pid)

    def _stretched(self, now: float) -> bool:
        """At the deadline: whether the child's limit, moved on by the longest run-queue wait of one of its threads
        since the start (within `MAX_STRETCH` limits), is still ahead; if so it becomes the deadline."""
        if not self._ready:
            return False
        waits = runqueue_waits(self._proc.pid)
        waited = max((w - self._waits_at_start.get(tid, 0.0) for tid, w in waits.items()), default=0.0)
        deadline = min(self._started_at + self._timeout_s + waited, self._started_at + MAX_STRETCH * self._timeout_s)
        if now >= deadline:
            return False
        self._deadline = deadline
        return True

    def _wait_s(self) -> float:
        return max(0.0, self._deadline - time.monotonic())

    def _take_line(self) -> bytes | None:
        head, newline, rest = self._buffer.partition(b"\n")
        if not newline:
            return None
        self._buffer = rest
        return head

    def _fail_timeout(self) -> Reply:
        what = f"timeout after {self._timeout_s:g} s" if self._ready else (
            f"worker {self.module} did not start within {self.start_timeout_s:g} s")
        _kill_group(self._proc)
        return self._failure("timeout", what)

    def _fail_crash(self) -> Reply:
        code = self._proc.wait()
        if code < 0:
            try:
                what = f"worker crashed: {signal.Signals(-code).name}"
            except ValueError:
                what = f"worker crashed: signal {-code}"
        else:
            what = f"worker exited with status {code}"
        if not self._ready:
            what += " before it was ready"
        return self._failure("crash", what)

    def _failure(self, kind: str, what: str) -> Reply:
        wall_s = time.monotonic() - self._sent_at
        self._stderr.seek(max(self._stderr_mark, self._stderr.seek(0, os.SEEK_END) - _STDERR_TAIL_CHARS))
        tail = self._stderr.read().decode(errors="replace").strip()
        self.close()
        return Reply(None, kind, f"{what}\n{tail}" if tail else what, wall_s)


def runqueue_waits(pid: int) -> dict[int, float]:
    """Seconds each thread of process `pid` has waited on a run queue for a core, by thread id, from
    /proc/PID/task/*/schedstat (empty where there is none: off Linux, or the process gone)."""
    waits = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            waits[int(stat.parent.name)] = int(stat.read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return waits


def call_all(workers: Sequence[Worker], requests: Sequence[dict], timeout_s: float) -> list[Reply]:
    """Answer `requests` on `workers` in parallel, each request on the next idle worker; replies in request order."""
    replies: list[Reply | None] = [None] * len(requests)
    pending = list(range(len(requests)))[::-1]
    busy: dict[int, int] = {}  # worker index -> request index
    while pending or busy:
        for w in range(len(workers)):
            if w not in busy and pending:
                busy[w] = pending.pop()
                workers[w].submit(requests[busy[w]], timeout_s)
        with selectors.DefaultSelector() as sel:
            for w in busy:
                sel.register(workers[w]._proc.stdout, selectors.EVENT_READ, w)
            wait_s = min(workers[w]._wait_s() for w in busy)
            readable = {key.data for key, _ in sel.select(wait_s)}
        for w in list(busy):
            if w in readable or workers[w]._wait_s() == 0.0 or workers[w]._buffer:
                reply = workers[w].poll(0.0)
                if reply is not None:
                    replies[busy.pop(w)] = reply
    return replies


def serve(handle: Callable[[dict], dict]) -> None:
    """The child's loop: announce readiness, then answer each request line with `handle(request)`.

    An exception in `handle` becomes `{"error": "Type: message"}`; the loop ends when the parent closes stdin.
    Anything the child's code prints goes to stderr, never into a reply.
    """
    _die_with_parent()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crashing kernel must not write a core file

    def answer(value: dict) -> None:
        replies.write(json.dumps(value) + "\n")
        replies.flush()

    answer(_READY)
    for line in sys.stdin:
        try:
            value = handle(json.loads(line))
        except Exception as e:  # the reply carries it; the parent turns it into an error result
            value = {"error": f"{type(e).__name__}: {e}"}
        answer(value)


def _die_with_parent() -> None:
    """On Linux, ask for SIGKILL when the parent dies, so a spinning child never outlives a killed tuner."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill `proc` and everything it started (a compiler, OpenMP threads are in-process anyway)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
