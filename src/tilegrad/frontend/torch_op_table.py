"""The PyTorch op table: the mapping of each ATen op onto registry ops, the ops export keeps whole, and the stand-in
a mapping returns for an output it does not compute.

The op families (`torch_ops.py`, `torch_nn_ops.py`) register their mappings with `@torch_op` when they are
imported; the reader (`torch.py`) imports them both and looks each node up here. This module imports neither, so a
family depends only on it and `torch_builder.py`, never on the reader.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

TORCH_OPS: dict[str, Callable] = {}
# ATen ops that core ATen would decompose but the registry has whole (or that map onto fewer nodes whole): those
# registered with `torch_op(..., keep=True)`.
KEPT: set[str] = set()


def torch_op(*names: str, keep: bool = False):
    """Register the mapping of ATen ops (`"add"` for every overload, `"add.Tensor"` for one) onto registry ops;
    with `keep`, export leaves these ops whole instead of decomposing them."""
    def register(fn):
        for n in names:
            TORCH_OPS[n] = fn
            if keep:
                KEPT.add(n)
        return fn
    return register


@dataclasses.dataclass(frozen=True)
class Missing:
    """An output of an ATen op that its mapping does not compute (the saved statistics of a norm, the indices of
    a max pool); reading one is an unsupported use of that op."""

    what: str
