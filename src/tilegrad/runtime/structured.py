"""Sequence and optional values at a specializing module's boundary, as the tensors its Modules take and return.

A compiled `Module` moves tensors only. A model's sequence input is given as a list (or tuple) of arrays, an
optional one as its value or None; each call's *form* of such an input (its kind's "tensor", a sequence's length,
or None for an absent optional) is part of the specialisation key, and the input reaches the Module as the tensors
`x.0` ... `x.{n-1}` (a sequence) or `x.value` (a present optional tensor). Outputs come back the other way: each
specialisation records every output's form, and the Module's flat outputs are regrouped into lists and None.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import KernelCallError

TENSOR = "tensor"
Form = object  # TENSOR, a sequence's length (int), or None (an absent optional)
_DESCRIPTIONS = {TENSOR: "a tensor", "sequence": "a sequence of tensors", "optional(tensor)": "an optional tensor",
                 "optional(sequence)": "an optional sequence of tensors"}


def flat_names(name: str, kind: str, form: Form) -> list[str]:
    """The tensors that stand for a value of this kind and form: `x`, `x.value` (an optional's), `x.0` ...
    `x.{n-1}`, or none."""
    if form is None:
        return []
    if form == TENSOR:
        return [name if kind == TENSOR else f"{name}.value"]
    return [f"{name}.{k}" for k in range(form)]


def split(name: str, kind: str, value) -> tuple[Form, list[tuple[str, object]]]:
    """(form, [(tensor name, element)]) of an argument given for an input of `kind` (a tensor, a sequence, or
    an optional of either); a value of the wrong kind is a KernelCallError naming the input."""
    listed = isinstance(value, (list, tuple))
    optional = kind.startswith("optional")
    if optional and value is None:
        return None, []
    kind_said = _DESCRIPTIONS[kind]
    or_none = " or None" if optional else ""
    if kind.endswith("sequence)") or kind == "sequence":
        if not listed:
            raise KernelCallError(f"input {name!r} is {kind_said}: give a list of arrays{or_none}, not "
                                  f"{_what(value)}")
        return len(value), list(zip(flat_names(name, kind, len(value)), value))
    if listed or value is None:
        raise KernelCallError(f"input {name!r} is {kind_said}: give an array{or_none}, not {_what(value)}")
    return TENSOR, [(flat_names(name, kind, TENSOR)[0], value)]


def regroup(forms: Sequence[Form], outputs) -> object:
    """The model's outputs from a Module's flat `outputs` (an array, or a list of them): per output an array, a
    list of arrays or None; one output alone, several as a list."""
    flat = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    values, at = [], 0
    for form in forms:
        n = len(flat_names("", TENSOR, form))
        values.append(flat[at] if form == TENSOR else None if form is None else list(flat[at:at + n]))
        at += n
    return values[0] if len(values) == 1 else values


def _what(value) -> str:
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    return f"a {type(value).__name__}"
