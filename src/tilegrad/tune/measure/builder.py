"""Building candidates: a pool of persistent build workers (`_builder.py`, one per core by default) replays
each trace on its task's computation, lowers it, renders C and compiles it.

The workers get a task as a pickled node whose weights are stripped (a tuning task needs shapes, not a model's
parameters). A trace built before is not sent again: re-timings measure the same few traces pass after pass, and
a worker would lower each one anew (its compiler cache only skips the compiling).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ...config import Config
from ...ir.graph import Value
from ...runtime.worker import Reply, Worker, call_all
from ..task import Task
from .result import KERNEL_NAME, Built, MeasureInput, MeasureResult


class Builder(Protocol):
    """Builds candidates: `LocalBuilder` on this machine, `ray_builder.RayBuilder` on a Ray cluster."""

    def build(self, inputs: Sequence[MeasureInput]) -> list[Built | MeasureResult]:
        """Per input, its library (a file on this machine), or the failed result it stands for."""
        ...

    def close(self) -> None: ...


class LocalBuilder:
    """`workers` build processes on this machine, each compiling with `cfg`."""

    def __init__(self, cfg: Config, *, workers: int | None = None, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self._dir = tempfile.TemporaryDirectory(prefix="tilegrad-build-")
        cfg_path = Path(self._dir.name) / "config.pkl"
        cfg_path.write_bytes(pickle.dumps(cfg))
        n = workers or os.cpu_count() or 1
        self.workers = [Worker("tilegrad.tune.measure._builder", [cfg_path]) for _ in range(n)]
        self._nodes: dict[str, Path] = {}  # per task key, its pickled node
        self._built: dict[tuple, Built] = {}

    def build(self, inputs: Sequence[MeasureInput]) -> list[Built | MeasureResult]:
        """Per input, its library, or the failed result it stands for."""
        keys = [build_key(inp) for inp in inputs]
        out: list[Built | MeasureResult | None] = [
            dataclasses.replace(self._built[k], build_s=0.0) if k in self._built else None for k in keys]
        misses = [i for i, b in enumerate(out) if b is None]
        requests = [self._request(inputs[i]) for i in misses]
        for i, reply in zip(misses, call_all(self.workers, requests, self.timeout_s)):
            out[i] = _build_failure(reply)
            if out[i] is None:
                out[i] = self._built[keys[i]] = Built(**reply.value)
        return out

    def close(self) -> None:
        for w in self.workers:
            w.close()
        self._dir.cleanup()

    def _request(self, inp: MeasureInput) -> dict:
        return {"task": str(self._node(inp.task)), "trace": inp.trace.to_json(), "name": KERNEL_NAME,
                "source": inp.source_override}

    def _node(self, task: Task) -> Path:
        path = self._nodes.get(task.key)
        if path is None:
            path = self._nodes[task.key] = Path(self._dir.name) / f"{task.key}.node.pkl"
            with open(path, "wb") as f:
                _WithoutWeights(f, protocol=pickle.HIGHEST_PROTOCOL).dump(task.node)
        return path


class _WithoutWeights(pickle.Pickler):
    """Pickles a node with its constants' data left out: the build workers need only shapes and dtypes."""

    def reducer_override(self, obj):
        if type(obj) is Value and obj.data is not None:
            return Value, (obj.name, obj.type)  # memoised like any object, so identities within a body hold
        return NotImplemented


def build_key(inp: MeasureInput) -> tuple:
    """What makes two inputs the same build (`RayBuilder` keeps its builds by it too)."""
    return inp.task.key, inp.trace.to_json(), inp.source_override


def _build_failure(reply: Reply) -> MeasureResult | None:
    """The failed result a build reply stands for, or None when it built."""
    if reply.failure == "timeout":
        return MeasureResult((), "timeout", f"build {reply.detail}", reply.wall_s)
    if reply.failure:
        return MeasureResult((), "build", f"the build worker died: {reply.detail}", reply.wall_s)
    if "failure" in reply.value:
        return MeasureResult((), reply.value["failure"], reply.value["error"], reply.wall_s)
    if "error" in reply.value:  # the worker itself failed (an unreadable task file)
        return MeasureResult((), "build", reply.value["error"], reply.wall_s)
    return None
