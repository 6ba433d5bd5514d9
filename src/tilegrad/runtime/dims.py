"""A module's dynamic dimensions as the runtime sees them: names with bounds, and the extents computed from them.

A module compiled with dynamic dimensions (DESIGN.md, decision 8) takes each call's values of them from its
inputs' shapes, checks them against the bounds, computes every input's and output's shape (an `Extent`: a
formula of the dimensions in integer arithmetic, `seq`, `12 * seq`, `past + 1`) and passes the values to the
library. The runtime does
not import the expression system: the compiler hands it these plain forms.
"""

from __future__ import annotations

import dataclasses
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


OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "//": lambda a, b: a // b,
       "%": lambda a, b: a % b, "min": min, "max": max}


@dataclasses.dataclass(frozen=True)
class Extent:
    """A formula of the dynamic dimensions: `tree` is an int, a dimension's key, or `[op, left, right]` with op one
    of `OPS` (integer arithmetic, floor division as in Python)."""

    tree: object

    def at(self, values: Mapping[str, int]) -> int:
        return _value(self.tree, values)

    @property
    def single(self) -> str | None:
        """The key of the dimension this extent is (`seq`), else None (`12 * seq`, `past + seq`)."""
        return self.tree if isinstance(self.tree, str) else None

    def text(self, names: Mapping[str, str] | None = None) -> str:
        """The extent as a formula, each dimension by its name in `names` (default: its key)."""
        return _formula_text(self.tree, names or {}, top=True)

    __str__ = text

    def to_json(self) -> dict:
        return {"formula": _frozen_to_list(self.tree)}

    @staticmethod
    def from_json(obj) -> "Extent":
        try:
            tree = _checked(obj["formula"])
        except (KeyError, TypeError, ValueError):
            raise ModuleFormatError(f"the manifest's extent {obj!r} is not a formula of dynamic dimensions") from None
        return Extent(tree)


def _value(tree, values: Mapping[str, int]) -> int:
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        return values[tree]
    op, a, b = tree
    return OPS[op](_value(a, values), _value(b, values))


def _formula_text(tree, names: Mapping[str, str], top: bool = False) -> str:
    if isinstance(tree, int):
        return str(tree)
    if isinstance(tree, str):
        return names.get(tree, tree)
    op, a, b = tree
    if op in ("min", "max"):
        return f"{op}({_formula_text(a, names, True)}, {_formula_text(b, names, True)})"
    text = f"{_formula_text(a, names)} {op} {_formula_text(b, names)}"
    return text if top else f"({text})"


def _frozen_to_list(tree):
    return [tree[0], _frozen_to_list(tree[1]), _frozen_to_list(tree[2])] if isinstance(tree, tuple) else tree


def _checked(tree):
    """A formula read from JSON, as the nested tuples an Extent holds; anything else is a ValueError."""
    if type(tree) is int or isinstance(tree, str):
        return tree
    if isinstance(tree, list) and len(tree) == 3 and tree[0] in OPS:
        return (tree[0], _checked(tree[1]), _checked(tree[2]))
    raise ValueError(f"not a formula: {tree!r}")


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
