"""The cost model's figures for this machine, measured once and cached (as `tune/fusion_costs.py` caches the
stitching explorer's): a thread's matrix-product throughput on a grid of shapes (`gemm.py`), the memory
bandwidth of all cores together and the page-fault cost of a fresh large tensor (torch triads run by one
process per core at once), the fixed cost of one operator's forward and backward in a sharded program, and
alpha (seconds per ring round) and beta (seconds per byte sent) of each collective, fitted to timings of the
torch.distributed collectives on gloo with 2 and 4 processes.

`measured_machine(processes=N)` turns them into one process's figures when N processes share the machine
(`host.core_share`: 4 processes on 2 cores get half a core each), with the links fitted at N processes.
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
from .apply import ShardedProgram
from .capture import capture
from .cost import Link, Machine, ring_volume
from .gemm import GemmRates, measure_rates
from .host import core_share, threads_per_process, usable_cores
from .launch import run_workers

_log = logging.getLogger(__name__)

WORLD_SIZES = (2, 4)
ELEMENTS = (1 << 8, 1 << 14, 1 << 18, 1 << 20)   # float32 elements per device in the timed collectives
KINDS = ("all_gather", "all_to_all", "reduce_scatter", "all_reduce")
REPEATS = 5
TRIAD_ELEMENTS = 1 << 24  # float32 elements per array of the bandwidth triad: 64 MiB, beyond the last-level cache
OVERHEAD_LAYERS = 16  # Linear + ReLU layers of the tiny model whose step gives the per-operator overhead
FORMAT = 4  # the cached figures' layout; a new layout measures again


def cache_path(cfg: _config.Config | None = None) -> Path:
    """The file holding this machine's figures (CPU, core count, torch version)."""
    cfg = cfg or _config.get()
    key = "\n".join([host().identity(), str(usable_cores()), torch.__version__, str(WORLD_SIZES), str(FORMAT)])
    return Path(cfg.cache_dir) / "machine" / f"parallel-costs-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def measured_machine(remeasure: bool = False, memory_bytes: float = float("inf"),
                     processes: int | None = None) -> Machine:
    """One process's figures when `processes` share this machine (default: one per core), from the cache, or
    measured (a minute or so: a few process groups) and cached."""
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
    return machine_for(figures, processes or figures["cores"], memory_bytes)


def machine_for(figures: dict, processes: int, memory_bytes: float = float("inf")) -> Machine:
    """The figures of one of `processes` processes on the measured machine: its threads' compute and its part of
    the bandwidth, both scaled by its share of a core, the per-operator overhead stretched by the time-slicing,
    and the links fitted at that process count (all counts pooled where it was not measured)."""
    cores = figures["cores"]
    threads = threads_per_process(processes, cores)
    share = core_share(processes, cores)
    links = figures["links"].get(str(processes), figures["links"]["pooled"])
    rates = GemmRates(tuple(figures["gemm_rates"]), tuple(figures["gemm_spill"]), threads * share)
    return Machine(max(rates.rates) * threads * share, {k: Link(*v) for k, v in links.items()}, memory_bytes,
                   bandwidth=figures["bandwidth"] * threads * share / cores, op_seconds=figures["op_seconds"] / share,
                   gemm=rates, fresh_seconds_per_byte=figures["fresh_seconds_per_byte"] / share)


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def triad_seconds(elements: int = TRIAD_ELEMENTS) -> tuple[float, float]:
    """Best seconds of a torch triad a = b + 0.5 c over `elements` float32s, into a kept tensor and into a
    fresh one (whose pages, beyond glibc's mmap threshold, are faulted in at each call). The best of a few
    runs, like every figure here but the collectives': what the machine does when nothing else runs on it."""
    a, b, c = torch.empty(elements), torch.ones(elements), torch.ones(elements)
    torch.add(b, c, alpha=0.5, out=a)
    kept = min(_seconds(lambda: torch.add(b, c, alpha=0.5, out=a)) for _ in range(REPEATS))
    fresh = min(_seconds(lambda: torch.add(b, c, alpha=0.5)) for _ in range(REPEATS))
    return kept, fresh


def _time_world(rank: int, world: int, streams: bool) -> dict:
    """With every rank at work at once: if `streams`, this rank's triad bandwidth, page-fault cost per fresh
    byte and matrix-product rates; and (kind, group size, bytes sent per device, seconds) for each collective
    and size, the slowest rank's."""
    got: dict = {}
    if streams:
        dist.barrier()
        kept, fresh = triad_seconds()
        got.update(bandwidth=3 * 4 * TRIAD_ELEMENTS / kept,
                   fresh_seconds_per_byte=max(0.0, fresh - kept) / (4 * TRIAD_ELEMENTS))
        dist.barrier()
        rates = measure_rates()
        got.update(gemm_rates=rates.rates, gemm_spill=rates.spill)
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
    got["collectives"] = out
    return got


class _Tiny(torch.nn.Module):
    """Layers so small that their step is all overhead."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*(m for _ in range(OVERHEAD_LAYERS)
                                            for m in (torch.nn.Linear(4, 4), torch.nn.ReLU())))

    def forward(self, x):
        return self.layers(x)


def _time_overhead(rank: int, world: int) -> float:
    """Seconds per operator of a sharded program's training step (forward, backward, gradient sync and Adam)
    on tiny blocks: the framework's fixed cost per operator."""
    torch.manual_seed(0)
    model, x = _Tiny(), torch.randn(2, 4)
    captured = capture(model, x)
    strategies = tuple(n.op.strategy({}) for n in captured.graph.nodes)
    program = ShardedProgram(captured, strategies, world, dict(model.named_parameters()))
    optimizer = torch.optim.Adam(list(program.parameters.values()))
    weights = torch.ones(2, 4)

    def step():
        optimizer.zero_grad()
        program.local_loss(weights, x).backward()
        program.sync_gradients()
        optimizer.step()

    step()
    return min(_seconds(step) for _ in range(4 * REPEATS)) / len(captured.graph.nodes)


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
    cores = usable_cores()
    # the streaming figures come from every core at work at once: the largest process group whose threads fill
    # the cores without time-slicing them (else the smallest group)
    fitting = [w for w in WORLD_SIZES if w <= cores]
    streams = max(fitting) if fitting else min(WORLD_SIZES)
    points: dict[str, dict[str, list]] = {}
    figures: dict = {"cores": cores}
    for world in WORLD_SIZES:
        results = run_workers(_time_world, world, world == streams)
        if world == streams:
            figures["bandwidth"] = sum(r["bandwidth"] for r in results)
            figures["fresh_seconds_per_byte"] = float(np.median([r["fresh_seconds_per_byte"] for r in results]))
            for key in ("gemm_rates", "gemm_spill"):
                figures[key] = [float(np.median(p)) for p in zip(*(r[key] for r in results))]
        for kind, n, volume, seconds in results[0]["collectives"]:
            for key in (str(world), "pooled"):
                points.setdefault(key, {}).setdefault(kind, []).append((n, volume, seconds))
    figures["op_seconds"] = run_workers(_time_overhead, 1)[0]
    figures["links"] = {key: {k: fit_link(p) for k, p in kinds.items()} for key, kinds in points.items()}
    return figures
