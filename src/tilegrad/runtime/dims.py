"""A module's dynamic dimensions as the runtime sees them: names with bounds, and the extents computed from them.

A module compiled with dynamic dimensions (DESIGN.md, decision 8) takes each call's values of them from its
inputs' shapes, checks them against the bounds, computes every input's and output's shape (an `Extent`: a sum of
products of dimensions, `seq`, `12 * seq`, `past + seq`) and passes the values to the library. The runtime does
not import the expression system: the compiler hands it these plain forms.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from ..errors import KernelCallError, ModuleFormatError


@dataclasses.dataclass(frozen=True)
class Dim:
    """A dynamic dimension: `key` names it in extents and in the generated C, `name` as the model does."""

    key: str
    name: str
    lo: int
    hi: int

    def to_json(self) -> dict:
        return {"key": self.key, "name": self.name, "lo": self.lo, "hi": self.hi}

    @staticmethod
    def from_json(obj) -> "Dim":
        if not isinstance(obj, dict) or not all(isinstance(obj.get(k), str) for k in ("key", "name")) \
                or not all(type(obj.get(k)) is int for k in ("lo", "hi")):
            raise ModuleFormatError(f"the manifest's dynamic dimension {obj!r} is not a key, a name and bounds")
        return Dim(obj["key"], obj["name"], obj["lo"], obj["hi"])


@dataclasses.dataclass(frozen=True)
class Extent:
    """`const + sum(coefficient * product of dimensions)` over the dimensions' keys."""

    terms: tuple[tuple[int, tuple[str, ...]], ...]
    const: int = 0

    def at(self, values: Mapping[str, int]) -> int:
        return self.const + sum(c * math.prod(values[k] for k in keys) for c, keys in self.terms)

    @property
    def single(self) -> str | None:
        """The key of the dimension this extent is (`seq`), else None (`12 * seq`, `past + seq`)."""
        if self.const == 0 and len(self.terms) == 1 and self.terms[0][0] == 1 and len(self.terms[0][1]) == 1:
            return self.terms[0][1][0]
        return None

    def text(self, names: Mapping[str, str] | None = None) -> str:
        """The extent as a formula, each dimension by its name in `names` (default: its key)."""
        names = names or {}
        parts = [" * ".join(([str(c)] if c != 1 else []) + [names.get(k, k) for k in keys]) for c, keys in self.terms]
        return " + ".join(parts + ([str(self.const)] if self.const else []))

    __str__ = text

    def to_json(self) -> dict:
        return {"terms": [[c, list(keys)] for c, keys in self.terms], "const": self.const}

    @staticmethod
    def from_json(obj) -> "Extent":
        try:
            return Extent(tuple((int(c), tuple(str(k) for k in keys)) for c, keys in obj["terms"]), int(obj["const"]))
        except (KeyError, TypeError, ValueError):
            raise ModuleFormatError(f"the manifest's extent {obj!r} is not a sum of products") from None


def shape_at(shape: Sequence, values: Mapping[str, int]) -> tuple[int, ...]:
    """`shape` (ints and Extents) at the dimensions' `values`."""
    return tuple(d.at(values) if isinstance(d, Extent) else d for d in shape)


def bind(dims: Sequence[Dim], specs: Sequence, shapes: Sequence[tuple[int, ...]]) -> dict[str, int]:
    """Each dimension's value in a call: read from the first input dimension that is it alone, checked against
    its bounds; every input's shape is then checked whole against its spec (`specs`: name and shape)."""
    values: dict[str, int] = {}
    for spec, shape in zip(specs, shapes):
        if len(shape) != len(spec.shape):
            raise KernelCallError(f"input {spec.name!r} expects rank {len(spec.shape)} ({_text(spec.shape, dims)}), "
                                  f"got shape {shape}")
        for d, n in zip(spec.shape, shape):
            if isinstance(d, Extent) and d.single is not None:
                values.setdefault(d.single, n)
    names = {d.key: d for d in dims}
    for key, d in names.items():
        if key not in values:
            raise KernelCallError(f"no input gives the dynamic dimension {d.name!r} alone")
        if not d.lo <= values[key] <= d.hi:
            raise KernelCallError(f"dynamic dimension {d.name!r} is {values[key]}, outside the bounds the module "
                                  f"was compiled for: {d.lo} to {d.hi} (compile with dynamic={{{d.name!r}: (lo, hi)}} "
                                  f"to widen them)")
    for spec, shape in zip(specs, shapes):
        want = shape_at(spec.shape, values)
        if tuple(shape) != want:
            raise KernelCallError(f"input {spec.name!r} expects shape {_text(spec.shape, dims)}, which is {want} "
                                  f"for {_values_text(values, names)}; got {tuple(shape)}")
    return values


def _text(shape: Sequence, dims: Sequence[Dim]) -> str:
    names = {d.key: d.name for d in dims}
    return "(" + ", ".join(d.text(names) if isinstance(d, Extent) else str(d) for d in shape) + ")"


def _values_text(values: Mapping[str, int], names: Mapping[str, Dim]) -> str:
    return ", ".join(f"{names[k].name} = {v}" for k, v in values.items())
