"""The ONNX op table: the mapping of each ONNX op type onto registry ops, and what every mapping reads its node with.

The op families (`onnx_ops.py`, `onnx_*_ops.py`, `onnx_resize.py`, ...) register their mappings with `@onnx_op`
when they are imported; the reader (`onnx.py`) imports them all and looks each node up by `op_key`. This module
imports neither, so a family depends only on it, `onnx_builder.py` and other helpers, never on the reader.
"""

from __future__ import annotations

from typing import Callable

from ..errors import ShapeError, UnsupportedFeatureError
from ..ir.graph import Value

ONNX_OPS: dict[str, Callable] = {}


def onnx_op(*op_types: str):
    """Register the mapping of ONNX op types onto registry ops (`op_key`: outside the default domain, qualified
    by the domain)."""
    def register(fn):
        for t in op_types:
            ONNX_OPS[t] = fn
        return fn
    return register


def op_key(node) -> str:
    """The key of a node's mapping in ONNX_OPS: its op type, or `domain.OpType` outside the default domain."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def constant_input(v: Value | None, what: str, node: str):
    """The data of an input that must be constant (a shape, axes, pads...), with an error that says why."""
    if v is None:
        return None
    if not v.is_constant:
        raise UnsupportedFeatureError(f"node {node!r}: {what} must be a constant (it is computed at run time); "
                                      f"tilegrad compiles static shapes; tilegrad.compile specialises them per "
                                      f"value of each graph input that reaches a shape-like operand "
                                      f"(SHAPE_OPERANDS in frontend/onnx_inputs.py)")
    if v.data.ndim > 1:
        raise ShapeError(f"node {node!r}: {what} must be a scalar or a 1-D tensor, got shape {list(v.data.shape)}")
    return v.data
