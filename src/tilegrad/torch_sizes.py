"""The dynamic sizes of a graph dynamo captured with symbolic shapes (`torch.compile(dynamic=True)`, or dynamo's
automatic dynamic shapes after a second shape): which input tensor's axis each symbol is, and the bounds it is
compiled for.

Dynamo passes a symbolic size as an input of its own (a `SymInt` beside the tensors) and marks the tensors' axes
with the same symbols. The backend compiles the graph once with those axes dynamic (`tilegrad.compile` with
torch.export Dims named after the symbols) within bounds a factor four about the values seen
(`runtime/automatic_dims.lower` and `upper`, as for an ONNX model's dimensions; never below the least value
dynamo allows). A call beyond them compiles again with bounds from the new value, so memory planned for the
largest value stays in proportion to what the model is called with, and the schedules, chosen at the bounds'
geometric middle, suit the values the model is called with.
"""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Size:
    """A symbolic size: its symbol's name, the least value dynamo allows it, and where it is: (input tensor, its
    place among the graph's tensor inputs; axis) of each axis of that size."""

    name: str
    lo: int
    places: tuple[tuple[int, int], ...]


class NotDimensions(Exception):
    """The graph's symbolic sizes are not plain dimensions of its input tensors (why, in the message)."""


def sizes_of(gm: torch.fx.GraphModule, example_inputs: list, tensors: list[int]) -> tuple[dict[int, str],
                                                                                         dict[str, Size]]:
    """({the slot of each size input: its symbol}, {each symbol: its Size}), `tensors` being the slots of the
    input tensors; every symbolic axis of an input tensor is a Size, found by the symbols the placeholders'
    example values carry. NotDimensions where a size input is an expression or found in no tensor, or a
    tensor's axis is an expression."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sizes: dict[str, Size] = {}
    for position, slot in enumerate(tensors):
        # A graph traced otherwise has no example values: its tensors' shapes are fixed.
        example = _example(placeholders[slot]) if slot < len(placeholders) else None
        for axis, d in enumerate(example_inputs[slot].shape if example is None else example.shape):
            if isinstance(d, torch.SymInt) and not d.node.expr.is_number:  # a number: a fixed size
                name = _symbol(d)
                if name is None:
                    raise NotDimensions(f"input tensor {position} has the size {d} along axis {axis}, an "
                                        f"expression of sizes rather than a size of its own")
                known = sizes.get(name)
                places = (known.places if known else ()) + ((position, axis),)
                sizes[name] = Size(name, _least(d), places)
    slots = {}
    for slot, value in enumerate(example_inputs):
        if isinstance(value, torch.SymInt):
            slots[slot] = _symbol(value)
            if slots[slot] not in sizes:
                raise NotDimensions(f"the graph takes the size {value}, which is no dimension of its input tensors")
        elif not isinstance(value, torch.Tensor):
            raise NotDimensions(f"the graph takes a {type(value).__name__} input, which tilegrad does not compile")
    return slots, sizes


def dynamic_shapes(sizes: dict[str, Size], bounds: dict[str, tuple[int, int]], count: int) -> tuple:
    """torch.export's dynamic_shapes for the `count` input tensors: each size's axis a Dim of its name, within
    its (least, largest) bounds."""
    from torch.export import Dim

    specs: list[dict | None] = [None] * count
    for s in sizes.values():
        dim = Dim(s.name, min=bounds[s.name][0], max=bounds[s.name][1])
        for tensor, axis in s.places:
            specs[tensor] = {**(specs[tensor] or {}), axis: dim}
    return tuple(specs)


def _example(node: torch.fx.Node):
    return node.meta.get("example_value", node.meta.get("val"))


def _symbol(size: torch.SymInt) -> str | None:
    expr = size.node.expr
    return str(expr) if getattr(expr, "is_Symbol", False) else None


def _least(size: torch.SymInt) -> int:
    """The least value dynamo's shape environment allows the size (2 where it says nothing: dynamo specialises 0
    and 1)."""
    ranges = getattr(size.node.shape_env, "var_to_range", {}).get(size.node.expr)
    try:
        return max(1, int(ranges.lower))
    except (AttributeError, TypeError, ValueError):
        return 2
