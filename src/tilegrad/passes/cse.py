"""Common-subexpression elimination: nodes that apply the same op with the same attributes to the same values
compute the same thing, so all but the first are dropped and their readers read the first.

Constants are merged first, by dtype, shape and bytes, so two copies of a weight, or the same small constant made
twice, become one, and the nodes reading them can then merge too. One forward walk suffices: a node's inputs are
already merged when it is visited. Every op in the registry is a pure function of its inputs and attributes, so
merging never changes a result. The pipeline runs it twice: early, and again after the passes that pack weights
(`cse_late`), since each product or convolution packs its own copy of a weight it shares with others (an unrolled
recurrence's steps, tied layers), and a copy per reader is memory every call streams again."""

from __future__ import annotations

import hashlib

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..mapped import release_pages
from .editor import GraphEditor
from .context import PassContext

_COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "equal", "logical_and", "logical_or", "logical_xor"})


def eliminate_common_subexpressions(g: Graph, ctx: PassContext) -> Graph:
    """Compute each distinct expression once; duplicated subgraphs (often made by exporters) cost nothing."""
    ed = GraphEditor(g)
    constants: dict[tuple, list[Value]] = {}
    seen: dict[tuple, Node] = {}
    outputs = {id(v) for v in g.outputs}
    changed = False
    for c in g.constants:
        same = _merge_constant(constants, c)
        if same is not c:
            ed.replace(c, same)
            ctx.note(f"constant {c.name} is {same.name}")
            changed = True
    for node in g.nodes:
        key = _key(node, ed.inputs_of(node))
        first = seen.get(key)
        if first is not None and not any(id(v) in outputs for v in node.outputs):  # an output keeps its name
            for old, new in zip(node.outputs, first.outputs):
                ed.replace(old, new)
            ctx.note(f"{node.name} ({node.op}) is {first.name}")
            changed = True
            continue
        kept = ed.keep(node)
        seen.setdefault(key, kept)
    return ed.finish() if changed else g


def _merge_constant(constants: dict[tuple, list[Value]], c: Value) -> Value:
    """The first constant seen with `c`'s bytes (`c` itself if it is the first). Bytes, not values: 0.0 and -0.0
    differ, and a NaN equals its own copy. Constants are bucketed by a digest of a sample of their bytes, and only
    those whose samples agree are compared whole, so the pass reads a model's weights once more only where they
    are copies (it runs twice: the later passes make packed copies of shared weights)."""
    data = _bytes_of(c.data)
    key = (c.dtype, c.shape, hashlib.sha256(_sample(data)).digest())
    bucket = constants.setdefault(key, [])
    same = next((other for other in bucket if np.array_equal(_bytes_of(other.data), data)), None)
    release_pages(c.data)  # a weight mapped from its file: its pages need not stay
    if same is not None:
        return same
    bucket.append(c)
    return c


def _bytes_of(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


_SAMPLE_BYTES = 4096


def _sample(data: np.ndarray) -> bytes:
    """The first and last `_SAMPLE_BYTES` and as many spread evenly between: two different weights almost never
    agree on all of them."""
    if data.size <= 3 * _SAMPLE_BYTES:
        return data.tobytes()
    step = data.size // _SAMPLE_BYTES
    return b"".join((data[:_SAMPLE_BYTES].tobytes(), data[::step].tobytes(), data[-_SAMPLE_BYTES:].tobytes()))


def _key(node: Node, inputs: tuple[Value, ...]) -> tuple:
    ids = [id(v) for v in inputs]
    if node.op in _COMMUTATIVE:
        ids.sort()
    return node.op, tuple(ids), _frozen(node.attrs)


def _frozen(value):
    """A hashable stand-in for an attribute value that compares equal exactly when the values are equal."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return type(value).__name__, tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return "ndarray", str(value.dtype), value.shape, value.tobytes()
    return type(value).__name__, value
