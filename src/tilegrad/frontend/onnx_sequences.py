"""ONNX sequences and optionals inside a graph, resolved while importing: a sequence is a tuple of tensor Values
whose length is known then, an optional a value whose presence is known then. SplitToSequence -> SequenceAt ->
ConcatFromSequence becomes slices and a concat; SequenceLength and OptionalHasElement become constants. The
runtime takes and returns tensors only, so a sequence or optional graph input or output is refused (by
`onnx.py`). The reader (`onnx.py`) imports this module, which registers these mappings."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError, UnsupportedFeatureError
from ..ir.graph import Value
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import constant_input, onnx_op
from .onnx_schema import tensor_type
from .onnx_tensors import onnx_dtype


@dataclasses.dataclass(frozen=True)
class TensorSequence:
    """An ONNX sequence: its tensors, and their element type (known even when it is empty)."""

    items: tuple[Value, ...]
    dtype: str

    @property
    def onnx_type(self) -> str:
        return f"seq({tensor_type(self.dtype)})"


@dataclasses.dataclass(frozen=True)
class OptionalValue:
    """An ONNX optional: the value it holds (a tensor or a sequence), or None, with its ONNX type."""

    value: Value | TensorSequence | None
    onnx_type: str


def stack(b: B, name: str, values, axis: int = 0) -> Value:
    """The tensors `values` (all of one shape) joined along a new axis `axis` (negative counts from the end of
    the result's axes)."""
    if not values:
        raise UnsupportedFeatureError(f"node {name!r} stacks no tensors, which makes an empty tensor; empty tensors "
                                      f"are not supported")
    rank = len(values[0].shape) + 1
    if not -rank <= axis < rank:
        raise ShapeError(f"node {name!r}: axis {axis} is outside [-{rank}, {rank - 1}]")
    parts = [b.op("unsqueeze", v, name=f"{name}_part", axes=(axis % rank,)) for v in values]
    return parts[0] if len(parts) == 1 else b.op("concat", *parts, name=name, axis=axis % rank)


def _sequence(v, name: str) -> TensorSequence:
    if not isinstance(v, TensorSequence):
        raise ShapeError(f"node {name!r} takes a sequence, but its input is a {getattr(v, 'onnx_type', 'tensor')}")
    return v


def _position(position, n: int, name: str, *, default: int, inserting: bool = False) -> int:
    """A constant position in a sequence of length `n`, negative ones counted from the end."""
    if position is None:
        return default
    p = int(np.ravel(constant_input(position, "the position", name))[0])
    top = n if inserting else n - 1
    if not -n <= p <= top:
        raise ShapeError(f"node {name!r}: position {p} is outside [-{n}, {top}] for a sequence of {n} tensor(s)")
    return p % (n + 1 if inserting else n) if p < 0 else p


@onnx_op("SequenceEmpty")
def _sequence_empty(b: B, name, *, dtype=1):
    return TensorSequence((), onnx_dtype(dtype, f"node {name!r}"))


@onnx_op("SequenceConstruct")
def _sequence_construct(b: B, name, *xs):
    return TensorSequence(tuple(xs), xs[0].dtype)


@onnx_op("SequenceAt")
def _sequence_at(b: B, name, seq, position):
    s = _sequence(seq, name)
    return s.items[_position(position, len(s.items), name, default=0)]


@onnx_op("SequenceInsert")
def _sequence_insert(b: B, name, seq, tensor, position=None):
    s = _sequence(seq, name)
    at = _position(position, len(s.items), name, default=len(s.items), inserting=True)
    return TensorSequence(s.items[:at] + (tensor,) + s.items[at:], s.dtype)


@onnx_op("SequenceErase")
def _sequence_erase(b: B, name, seq, position=None):
    s = _sequence(seq, name)
    if not s.items:
        raise ShapeError(f"node {name!r} erases from an empty sequence")
    at = _position(position, len(s.items), name, default=len(s.items) - 1)
    return TensorSequence(s.items[:at] + s.items[at + 1:], s.dtype)


@onnx_op("SequenceLength")
def _sequence_length(b: B, name, seq):
    return b.const(np.array(len(_sequence(seq, name).items), np.int64), name)


@onnx_op("SplitToSequence")
def _split_to_sequence(b: B, name, x, split=None, *, axis=0, keepdims=1):
    """Slices of `x` along `axis`: of length 1 (squeezed unless keepdims) with no `split`, of the given lengths
    for a 1-D `split`, or of a scalar `split`'s length (the last one shorter when it does not divide)."""
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise ShapeError(f"node {name!r}: axis {axis} is outside [-{rank}, {rank - 1}]")
    a, n = axis % rank, x.shape[axis % rank]
    sizes = constant_input(split, "split", name)
    if sizes is None:
        lengths = [1] * n
    elif sizes.ndim == 0:
        step = int(sizes)
        if step <= 0:
            raise ShapeError(f"node {name!r}: split {step} must be positive")
        lengths = [min(step, n - s) for s in range(0, n, step)]
    else:
        lengths = [int(s) for s in sizes]
        if sum(lengths) != n or min(lengths, default=0) <= 0:
            raise ShapeError(f"node {name!r}: split {lengths} must be positive lengths summing to {n}, the extent "
                             f"of axis {axis}")
    items, start = [], 0
    for k, length in enumerate(lengths):
        part = b.op("slice", x, name=f"{name}_{k}", starts=(start,), ends=(start + length,), axes=(a,))
        if sizes is None and not keepdims:
            part = b.op("squeeze", part, name=f"{name}_{k}_squeezed", axes=(a,))
        items.append(part)
        start += length
    return TensorSequence(tuple(items), x.dtype)


@onnx_op("ConcatFromSequence")
def _concat_from_sequence(b: B, name, seq, *, axis, new_axis=0):
    items = _sequence(seq, name).items
    if new_axis:
        return stack(b, name, items, axis)
    if not items:
        raise UnsupportedFeatureError(f"node {name!r} concatenates an empty sequence, which makes an empty tensor; "
                                      f"empty tensors are not supported")
    return items[0] if len(items) == 1 else b.op("concat", *items, name=name, axis=axis)


def _type_string(tp, where: str) -> str:
    """The ONNX spelling of a TypeProto (`seq(tensor(float))`), as schemas' type constraints write it."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return tensor_type(onnx_dtype(tp.tensor_type.elem_type, where))
    if which == "sequence_type":
        return f"seq({_type_string(tp.sequence_type.elem_type, where)})"
    raise UnsupportedFeatureError(f"{where}: an optional of a {which or 'value of no type'} is not supported")


@onnx_op("Optional")
def _optional(b: B, name, x=None, *, type=None):
    if x is not None:
        return OptionalValue(x, f"optional({getattr(x, 'onnx_type', None) or tensor_type(x.dtype)})")
    if type is None:
        raise ShapeError(f"node {name!r}: an Optional with no input needs its type attribute")
    return OptionalValue(None, f"optional({_type_string(type, f'node {name!r}')})")


@onnx_op("OptionalHasElement")
def _optional_has_element(b: B, name, x=None):
    present = x is not None and not (isinstance(x, OptionalValue) and x.value is None)
    return b.const(np.array(present), name)


@onnx_op("OptionalGetElement")
def _optional_get_element(b: B, name, x):
    if not isinstance(x, OptionalValue):
        return x
    if x.value is None:
        raise ShapeError(f"node {name!r} gets the element of an empty optional")
    return x.value
