"""The cost model's figures for this machine, measured once and cached (as `tune/fusion_costs.py` caches the
stitching explorer's): a process's matmul throughput with the cores shared out among the processes, and alpha
(seconds per ring round) and beta (seconds per byte sent) of each collective, fitted to timings of the
torch.distributed collectives on gloo with 2 and 4 processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from .. import config as _config
from ..target import host
from .cost import Link, Machine, ring_volume
from .launch import run_workers

_log = logging.getLogger(__name__)

WORLD_SIZES = (2, 4)
ELEMENTS = (1 << 8, 1 << 14, 1 << 18, 1 << 20)   # float32 elements per device in the timed collectives
KINDS = ("all_gather", "all_to_all", "reduce_scatter", "all_reduce")
REPEATS = 5


def cache_path(cfg: _config.Config | None = None) -> Path:
    """The file holding this machine's figures (CPU, core count, torch version)."""
    cfg = cfg or _config.get()
    key = "\n".join([host().identity(), str(os.cpu_count()), torch.__version__, str(WORLD_SIZES)])
    return Path(cfg.cache_dir) / "machine" / f"parallel-costs-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def measured_machine(remeasure: bool = False, memory_bytes: float = float("inf")) -> Machine:
    """The cached figures, or measured (tens of seconds: a few process groups) and cached."""
    path = cache_path()
    figures = None
    if not remeasure:
        try:
            figures = json.loads(path.read_text())
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            _log.warning("ignoring the unreadable parallel costs in %s (%s): measuring again", path, exc)
    if figures is None:
        figures = _measure()
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.tmp")
        try:
            part.write_text(json.dumps(figures, indent=1))
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)
    return Machine(figures["flops"], {k: Link(*v) for k, v in figures["links"].items()}, memory_bytes)


def matmul_flops(threads: int, n: int = 384) -> float:
    """Best-of-five float32 matmul throughput with `threads` intra-op threads."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        best = min(_seconds(lambda: torch.mm(a, b)) for _ in range(REPEATS))
    finally:
        torch.set_num_threads(before)
    return 2.0 * n ** 3 / best


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _time_collectives(rank: int, world: int) -> list[tuple[str, int, float, float]]:
    """(kind, group size, bytes sent per device, seconds) for each collective and size; the slowest rank's."""
    out = []
    for n in ELEMENTS:
        x = torch.randn(n)
        for kind in KINDS:
            run = _collective(kind, x, world)
            run()
            times = []
            for _ in range(REPEATS):
                dist.barrier()
                times.append(_seconds(run))
            t = torch.tensor([float(np.median(times))])
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            nbytes = n * 4 * (world if kind == "all_gather" else 1)
            out.append((kind, world, ring_volume(kind, world, nbytes), t.item()))
    return out


def _collective(kind: str, x: torch.Tensor, world: int):
    chunks = list(x.chunk(world))
    if kind == "all_gather":
        parts = [torch.empty_like(x) for _ in range(world)]
        return lambda: dist.all_gather(parts, x)
    if kind == "all_to_all":
        received = [torch.empty_like(c) for c in chunks]
        return lambda: dist.all_to_all(received, chunks)
    if kind == "reduce_scatter":
        out = torch.empty_like(chunks[0])
        return lambda: dist.reduce_scatter(out, chunks)
    return lambda: dist.all_reduce(x)


def fit_link(points: list[tuple[int, float, float]]) -> tuple[float, float]:
    """Least-squares alpha, beta (both at least zero) of seconds = alpha (n - 1) + beta volume."""
    a = np.array([[n - 1, v] for n, v, _ in points], float)
    y = np.array([s for _, _, s in points], float)
    alpha, beta = np.linalg.lstsq(a, y, rcond=None)[0]
    if alpha < 0:
        alpha, beta = 0.0, float(np.dot(a[:, 1], y) / np.dot(a[:, 1], a[:, 1]))
    if beta < 0:
        alpha, beta = float(np.dot(a[:, 0], y) / np.dot(a[:, 0], a[:, 0])), 0.0
    return float(alpha), float(beta)


def _measure() -> dict:
    cores = os.cpu_count() or 1
    points: dict[str, list] = {k: [] for k in KINDS}
    for world in WORLD_SIZES:
        for kind, n, volume, seconds in run_workers(_time_collectives, world)[0]:
            points[kind].append((n, volume, seconds))
    flops = matmul_flops(max(1, cores // max(WORLD_SIZES)))
    return {"flops": flops, "links": {k: fit_link(p) for k, p in points.items()}}
