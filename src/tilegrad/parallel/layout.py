"""Tensor layouts (MindSpore §3.1.6): how the slices of a full tensor lie on a cluster of devices.

A layout is a device matrix (the devices arranged as an N-D grid, rank = row-major index) and a tensor map: for
each tensor dimension, the device-matrix axes that split it, major first (none: not split). Axes used by no
dimension replicate the tensor; axes in `partial` hold partial sums that add up to the tensor (a split reduction
dimension leaves them, e.g. MatMul with its inner dimension split).

Layouts are compared and redistributed in canonical form: each axis factored into prime axes and axes of size 1
dropped, so (4,) splitting rows and (2, 2) splitting rows by both axes are the same placement.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..errors import ShapeError, TilegradError


@dataclass(frozen=True)
class Layout:
    device_matrix: tuple[int, ...]
    tensor_map: tuple[tuple[int, ...], ...]
    partial: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if any(s < 1 for s in self.device_matrix):
            raise TilegradError(f"layout: device matrix {self.device_matrix} has an axis below 1")
        used = [a for axes in self.tensor_map for a in axes] + list(self.partial)
        if any(not 0 <= a < len(self.device_matrix) for a in used):
            raise TilegradError(f"layout: tensor map {self.tensor_map} or partial {self.partial} names an axis "
                                f"outside device matrix {self.device_matrix}")
        if len(used) != len(set(used)):
            raise TilegradError(f"layout: tensor map {self.tensor_map} with partial {self.partial} uses an axis "
                                "twice; each device-matrix axis splits one dimension or none")

    @classmethod
    def of(cls, device_matrix, tensor_map, partial=()) -> Layout:
        """From MindSpore-style entries: -1 (not split), an axis, or a tuple of axes (major first)."""
        def axes(entry):
            if isinstance(entry, int):
                return () if entry == -1 else (entry,)
            return tuple(entry)
        return cls(tuple(device_matrix), tuple(axes(e) for e in tensor_map), tuple(partial))

    @classmethod
    def replicated(cls, ndim: int, devices: int) -> Layout:
        return cls((devices,), ((),) * ndim)

    @classmethod
    def from_slices(cls, slices: tuple[int, ...], devices: int) -> Layout:
        """Dimension i cut into slices[i] pieces, the devices left over holding replicas (device matrix
        (replicas, *slices), as MindSpore derives it from a strategy)."""
        count = math.prod(slices)
        if count < 1 or devices % count:
            raise TilegradError(f"layout: slices {slices} ({count} pieces) do not divide {devices} devices")
        return cls((devices // count, *slices), tuple((i + 1,) for i in range(len(slices))))

    @property
    def devices(self) -> int:
        return math.prod(self.device_matrix)

    @property
    def ndim(self) -> int:
        return len(self.tensor_map)

    def slices(self, dim: int) -> int:
        return math.prod(self.device_matrix[a] for a in self.tensor_map[dim])

    @property
    def replication(self) -> int:
        """How many devices hold each element (partial sums count as holders, not replicas)."""
        used = {a for axes in self.tensor_map for a in axes} | set(self.partial)
        return math.prod(s for a, s in enumerate(self.device_matrix) if a not in used)

    def check_fits(self, shape: tuple[int, ...], what: str = "tensor") -> None:
        if len(shape) != self.ndim:
            raise ShapeError(f"{what}: layout {self} is for {self.ndim}-D tensors, shape {shape} is {len(shape)}-D")
        for d, n in enumerate(shape):
            if n % self.slices(d):
                raise ShapeError(f"{what}: dimension {d} of size {n} cannot be cut into {self.slices(d)} equal "
                                 f"slices (layout {self})")

    def local_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        self.check_fits(shape)
        return tuple(n // self.slices(d) for d, n in enumerate(shape))

    def coords(self, rank: int) -> tuple[int, ...]:
        return tuple(int(c) for c in _unravel(rank, self.device_matrix))

    def block(self, rank: int) -> tuple[int, ...]:
        """Which slice of each dimension device `rank` holds."""
        c = self.coords(rank)
        return tuple(_ravel([c[a] for a in axes], [self.device_matrix[a] for a in axes]) for axes in self.tensor_map)

    def local_index(self, shape: tuple[int, ...], rank: int) -> tuple[slice, ...]:
        local = self.local_shape(shape)
        return tuple(slice(b * n, (b + 1) * n) for b, n in zip(self.block(rank), local))

    def canonical(self) -> Layout:
        """The same placement on prime axes, size-1 axes dropped."""
        new_axes: list[tuple[int, ...]] = []
        matrix: list[int] = []
        for s in self.device_matrix:
            primes = _prime_factors(s)
            new_axes.append(tuple(range(len(matrix), len(matrix) + len(primes))))
            matrix.extend(primes)
        return Layout(tuple(matrix), tuple(tuple(b for a in axes for b in new_axes[a]) for axes in self.tensor_map),
                      tuple(b for a in self.partial for b in new_axes[a]))

    def same_placement(self, other: Layout) -> bool:
        return self.canonical() == other.canonical()

    def __str__(self) -> str:
        entries = ["-1" if not axes else str(axes[0]) if len(axes) == 1 else str(axes) for axes in self.tensor_map]
        extra = f", partial {list(self.partial)}" if self.partial else ""
        return f"Layout({list(self.device_matrix)}, [{', '.join(entries)}]{extra})"


def all_layouts(shape: tuple[int, ...], devices: int) -> list[Layout]:
    """Every distinct placement of a tensor of `shape` on `devices` devices (canonical, no partial sums): each prime
    axis splits one dimension, in some order, or replicates; dimensions must divide evenly."""
    primes = tuple(_prime_factors(devices))
    ndim = len(shape)
    seen: dict[Layout, None] = {}
    for owner in itertools.product(range(-1, ndim), repeat=len(primes)):
        per_dim = [[a for a, o in enumerate(owner) if o == d] for d in range(ndim)]
        for orders in itertools.product(*(itertools.permutations(axes) for axes in per_dim)):
            layout = Layout(primes, tuple(orders))
            if all(n % layout.slices(d) == 0 for d, n in enumerate(shape)):
                seen.setdefault(layout, None)
    return list(seen)


def shard(full, layout: Layout) -> list:
    """Each device's local block of `full` (NumPy or torch), by rank."""
    return [full[layout.local_index(tuple(full.shape), r)] for r in range(layout.devices)]


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _unravel(index: int, sizes) -> list[int]:
    out = []
    for s in reversed(list(sizes)):
        out.append(index % s)
        index //= s
    return out[::-1]


def _ravel(coords, sizes) -> int:
    index = 0
    for c, s in zip(coords, sizes):
        index = index * s + c
    return index
