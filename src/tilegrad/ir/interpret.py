"""Run a graph with the ops' NumPy references: the oracle that compiled models are checked against."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ShapeError
from .graph import Graph
from .registry import lookup


def run_reference(g: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs for `inputs` (in graph-input order), every node evaluated by its reference."""
    if len(inputs) != len(g.inputs):
        raise ShapeError(f"the graph takes {len(g.inputs)} inputs, got {len(inputs)}")
    env: dict[int, np.ndarray] = {}
    for v, a in zip(g.inputs, inputs):
        a = np.asarray(a)
        if a.shape != v.shape or str(a.dtype) != v.dtype:
            raise ShapeError(f"input {v.name!r}: expected {v.type}, got {a.dtype}{list(a.shape)}")
        env[id(v)] = a
    for c in g.constants + [v for v in g.outputs if v.is_constant]:
        env.setdefault(id(c), c.data)  # a fused body's constant input is an input: the caller's array wins
    for n in g.nodes:
        with np.errstate(all="ignore"):
            out = lookup(n.op).reference(*(env[id(v)] for v in n.inputs), **n.attrs)
        outs = out if isinstance(out, tuple) else (out,)
        for v, a in zip(n.outputs, outs):
            env[id(v)] = np.asarray(a).astype(v.dtype, copy=False)
    return [env[id(v)] for v in g.outputs]
