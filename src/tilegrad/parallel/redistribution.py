"""Tensor redistribution (MindSpore §3.1.6, Figs. 3.14-3.16): the collectives that turn one layout of a tensor into
another, and their execution on simulated devices (NumPy shards, one array per rank).

Both layouts are taken in canonical form (prime axes). Partial sums are reduced first (ReduceScatter where the
target splits a dimension by that axis next, AllReduce otherwise). Then every axis that splits a dimension beyond
what source and target share is released, minor axis first: by AllToAll where the target splits another
dimension by that axis next, by AllGather otherwise. Last, the axes the target still lacks split their dimension
locally (no communication). Consecutive gathers or splits of one dimension merge into one step over several axes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..errors import TilegradError
from .layout import Layout

KINDS = ("all_gather", "all_to_all", "reduce_scatter", "all_reduce", "split")


@dataclass(frozen=True)
class Step:
    """One collective over the device groups that differ only in `axes` (ordered major first): `dim` is the
    dimension gathered (AllGather, AllToAll), scattered (ReduceScatter) or split locally; `split_dim` the
    dimension AllToAll splits."""
    kind: str
    axes: tuple[int, ...]
    dim: int | None = None
    split_dim: int | None = None

    def __str__(self) -> str:
        extra = "" if self.dim is None else f", dim={self.dim}"
        extra += "" if self.split_dim is None else f", split_dim={self.split_dim}"
        return f"{self.kind}(axes={list(self.axes)}{extra})"


@dataclass(frozen=True)
class Redistribution:
    source: Layout
    target: Layout
    device_matrix: tuple[int, ...]
    steps: tuple[Step, ...]

    @property
    def communicates(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.kind != "split")

    def group_size(self, step: Step) -> int:
        return int(np.prod([self.device_matrix[a] for a in step.axes]))


def plan(source: Layout, target: Layout) -> Redistribution:
    """The steps turning `source` into `target` (which holds no partial sums)."""
    if source.devices != target.devices or source.ndim != target.ndim:
        raise TilegradError(f"redistribution: {source} ({source.devices} devices, {source.ndim}-D) cannot become "
                            f"{target} ({target.devices} devices, {target.ndim}-D)")
    if target.partial:
        raise TilegradError(f"redistribution: target {target} holds partial sums; a consumer needs whole values")
    src, dst = source.canonical(), target.canonical()
    if src.device_matrix != dst.device_matrix:
        raise TilegradError(f"redistribution: device matrices {source.device_matrix} and {target.device_matrix} "
                            "factor into different prime axes; give both layouts one device-matrix order")
    cur = [list(axes) for axes in src.tensor_map]
    want = [list(axes) for axes in dst.tensor_map]
    steps: list[Step] = []

    def next_wanted(d):
        n = len(cur[d])
        return want[d][n] if cur[d] == want[d][:n] and n < len(want[d]) else None

    reduce_axes = []
    for a in src.partial:
        scatter_dim = next((d for d in range(len(cur)) if next_wanted(d) == a), None)
        if scatter_dim is None:
            reduce_axes.append(a)
        else:
            steps.append(Step("reduce_scatter", (a,), scatter_dim))
            cur[scatter_dim].append(a)
    if reduce_axes:
        steps.append(Step("all_reduce", tuple(reduce_axes)))

    def surplus(d):
        shared = 0
        while shared < min(len(cur[d]), len(want[d])) and cur[d][shared] == want[d][shared]:
            shared += 1
        return len(cur[d]) > shared

    while True:
        d = next((d for d in range(len(cur)) if surplus(d)), None)
        if d is None:
            break
        a = cur[d].pop()
        e = next((e for e in range(len(cur)) if e != d and next_wanted(e) == a), None)
        if e is None:
            steps.append(Step("all_gather", (a,), d))
        else:
            steps.append(Step("all_to_all", (a,), d, e))
            cur[e].append(a)
    for d in range(len(cur)):
        extra = want[d][len(cur[d]):]
        for a in extra:
            steps.append(Step("split", (a,), d))
        cur[d].extend(extra)
    return Redistribution(source, target, src.device_matrix, _merged(steps))


def _merged(steps: list[Step]) -> tuple[Step, ...]:
    """Gathers of one dimension in a row (minor axis first) become one gather over both axes; splits of one
    dimension (major axis first) and AllReduces likewise."""
    out: list[Step] = []
    for s in steps:
        last = out[-1] if out else None
        if last and s.kind == last.kind == "all_gather" and s.dim == last.dim:
            out[-1] = replace(last, axes=s.axes + last.axes)
        elif last and s.kind == last.kind and (s.kind == "all_reduce" or s.kind == "split" and s.dim == last.dim):
            out[-1] = replace(last, axes=last.axes + s.axes)
        else:
            out.append(s)
    return tuple(out)


@lru_cache(maxsize=4096)
def group(device_matrix: tuple[int, ...], axes: tuple[int, ...], rank: int) -> list[int]:
    """The ranks that share `rank`'s coordinates off `axes`, ordered by their coordinates on `axes` (major first)."""
    coords = np.array(np.unravel_index(rank, device_matrix)) if device_matrix else np.zeros(0, int)
    members = []
    for index in np.ndindex(*[device_matrix[a] for a in axes]):
        c = coords.copy()
        c[list(axes)] = index
        members.append(int(np.ravel_multi_index(tuple(c), device_matrix)))
    return members


def all_groups(device_matrix: tuple[int, ...], axes: tuple[int, ...]) -> list[list[int]]:
    """The distinct groups of one step, each ordered as `group` orders it."""
    seen: dict[tuple[int, ...], None] = {}
    for r in range(int(np.prod(device_matrix))):
        seen.setdefault(tuple(group(device_matrix, axes, r)), None)
    return [list(g) for g in seen]


def simulate(redist: Redistribution, shards: list[np.ndarray]) -> list[np.ndarray]:
    """Run the steps on NumPy shards (one per rank), as the devices would."""
    m = redist.device_matrix
    for s in redist.steps:
        new = []
        for r in range(len(shards)):
            g = group(m, s.axes, r)
            pos, n = g.index(r), len(g)
            if s.kind == "all_gather":
                new.append(np.concatenate([shards[q] for q in g], axis=s.dim))
            elif s.kind == "all_reduce":
                new.append(sum(shards[q] for q in g))
            elif s.kind == "reduce_scatter":
                new.append(np.split(sum(shards[q] for q in g), n, axis=s.dim)[pos])
            elif s.kind == "all_to_all":
                new.append(np.concatenate([np.split(shards[q], n, axis=s.split_dim)[pos] for q in g], axis=s.dim))
            else:
                new.append(np.split(shards[r], n, axis=s.dim)[pos])
        shards = new
    return shards


def step_shapes(redist: Redistribution, shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each step's local shape before and after, for the cost model."""
    local = list(redist.source.local_shape(shape))
    out = []
    for s in redist.steps:
        before = tuple(local)
        n = redist.group_size(s)
        if s.kind == "all_gather":
            local[s.dim] *= n
        elif s.kind in ("reduce_scatter", "split"):
            local[s.dim] //= n
        elif s.kind == "all_to_all":
            local[s.dim] *= n
            local[s.split_dim] //= n
        out.append((before, tuple(local)))
    return out


