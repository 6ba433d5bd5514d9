"""Where a compiled graph's buffers are: the slots its kernel calls name, and the outputs copied at the end.

One assignment for every backend (`graph_plan.py` makes it): the C entry point spells a slot as an expression
over its `args`, the CUDA module resolves it to a device pointer.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Slot:
    """Where a kernel argument's bytes are: `kind` "input", "output" or "weight" with its index, or
    "workspace" with a byte offset."""

    kind: str
    index: int


@dataclasses.dataclass(frozen=True)
class Copy:
    """An output whose bytes are elsewhere (a graph input or a weight passed through): copied at the end."""

    output: int
    source: Slot
    nbytes: int
