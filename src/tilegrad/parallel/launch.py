"""Run one function on N processes joined in a torch.distributed process group, and collect what each returns.

Every parallel feature is checked and benchmarked the same way: N processes on this machine (gloo on CPU), each
running the same function with its rank, the results compared with a single-process run. `run_workers` spawns
them with a fresh rendezvous port, waits with a timeout (a collective that never completes must not hang the
caller) and raises a worker's exception in the parent with its traceback.
"""

from __future__ import annotations

import os
import pickle
import socket
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ..errors import TilegradError
from .host import threads_per_process, usable_cores

DEFAULT_TIMEOUT_S = 300.0


def free_port() -> int:
    """A TCP port nobody listens on now, for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, backend: str, threads: int, fn: Callable[..., Any],
            args: tuple, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    try:
        dist.init_process_group(backend, rank=rank, world_size=world_size)
        try:
            # pickled here, not by the queue: the queue would pass tensors through shared memory that this
            # process frees when it exits, before the parent has read them
            results.put((rank, True, pickle.dumps(fn(rank, world_size, *args))))
        finally:
            dist.destroy_process_group()
    except BaseException:  # the parent re-raises it: a worker's failure must not look like a hang
        results.put((rank, False, traceback.format_exc()))


def run_workers(fn: Callable[..., Any], world_size: int, *args: Any, backend: str = "gloo",
                threads_per_worker: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Any]:
    """`fn(rank, world_size, *args)` on `world_size` processes in one process group; their results by rank.

    `fn` and `args` must be picklable (a module-level function). Each process gets `threads_per_worker` intra-op
    threads (default: the usable cores shared out, at least one), so that N processes do not oversubscribe the
    machine.
    """
    if world_size < 1:
        raise TilegradError(f"run_workers: world_size must be at least 1, got {world_size}")
    threads = threads_per_worker or threads_per_process(world_size, usable_cores())
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(rank, world_size, port, backend, threads, fn, args, results),
                         daemon=True) for rank in range(world_size)]
    for p in procs:
        p.start()
    got: dict[int, Any] = {}
    try:
        for _ in range(world_size):
            try:
                rank, ok, value = results.get(timeout=timeout_s)
            except Exception as e:  # queue.Empty: someone hangs or died without a word
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in got]
                raise TilegradError(f"run_workers: no result within {timeout_s:.0f} s from ranks "
                                    f"{sorted(set(range(world_size)) - set(got))} (dead: {dead})") from e
            if not ok:
                raise TilegradError(f"run_workers: rank {rank} of {world_size} failed:\n{value}")
            got[rank] = pickle.loads(value)
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    return [got[r] for r in range(world_size)]
