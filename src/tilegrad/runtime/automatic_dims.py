"""Automatic dynamic dimensions: which of a model's symbolic dimensions a caller varies, and the bounds the one
dynamic module serving them is compiled for.

An ONNX model whose inputs leave dimensions open (dim_params) and that is compiled without `dynamic=` compiles
its first call's shapes as fixed ones. A later call that changes a dimension makes that dimension dynamic: one
module is compiled with every dimension seen to change as a variable from `lower` of its least value up to
`upper` of its largest, and the dimensions that never changed fixed, and it serves every later call within
those bounds (torch dynamo's automatic dynamic shapes make the same bet: a shape that changed once will change
again). A call outside them (a value beyond either bound, or a fixed dimension that now changes) compiles the
dynamic module again with the bounds widened, so the compiles a stream of calls pays grow with the logarithm of
its range, not with the number of its shapes. The bounds are spread evenly in log scale about the values seen,
a factor HEADROOM below and above, because the schedules are chosen at their geometric middle (`te/dims.
representative`): from 1 instead, an image size seen at 200 and 224 was scheduled for a far smaller one
(the measurement: docs/dynamic.md). The first call's signature keeps its fixed module, as a fast path for the
common shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

MIN_UPPER = 64  # the least upper bound a dynamic dimension is compiled for
HEADROOM = 4  # the bound is the power of two at or above this many times the largest value seen

Bounds = dict[str, int | tuple[int, int]]  # per dimension: fixed to a size, or (lo, hi)


def lower(value: int) -> int:
    """The lower bound a dimension whose least value so far is `value` is compiled for."""
    return max(1, value // HEADROOM)


def upper(value: int) -> int:
    """The upper bound a dimension whose largest value so far is `value` is compiled for: memory is planned for
    it, so it stays in proportion to the values a model is called with."""
    return max(MIN_UPPER, 1 << (HEADROOM * value - 1).bit_length())


class DimensionWatch:
    """The values each symbolic dimension took in the calls seen, and the bounds of the dynamic module to compile.

    `axes` names each input's axes: the dimension's name where the model leaves it symbolic, None where it is
    static (the module checks those)."""

    def __init__(self, axes: Mapping[str, Sequence[str | None]]):
        self.axes = {name: tuple(dims) for name, dims in axes.items()}
        self.seen: dict[str, tuple[int, int]] = {}  # dimension -> (least, largest) value seen

    def values(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int] | None:
        """Each dimension's value in a call of these input shapes; None where the call gives one dimension two
        values or a shape of another rank (the fixed module's own checks then say what is wrong)."""
        values: dict[str, int] = {}
        for name, dims in self.axes.items():
            shape = shapes.get(name)
            if shape is None or len(shape) != len(dims):
                return None
            for dim, size in zip(dims, shape):
                if dim is not None and values.setdefault(dim, size) != size:
                    return None
        return values

    def observe(self, values: Mapping[str, int]) -> None:
        for dim, v in values.items():
            lo, hi = self.seen.get(dim, (v, v))
            self.seen[dim] = (min(lo, v), max(hi, v))

    @property
    def varied(self) -> bool:
        """Whether some dimension has taken two values."""
        return any(lo != hi for lo, hi in self.seen.values())

    def bounds(self) -> Bounds:
        """The dynamic module's dimensions: those seen to change from `lower` of their least value to `upper` of
        their largest, the others fixed at the one value seen."""
        return {dim: (lower(lo), upper(hi)) if lo != hi else lo for dim, (lo, hi) in self.seen.items()}


def admits(bounds: Bounds, values: Mapping[str, int]) -> bool:
    """Whether a module compiled for `bounds` runs a call with these dimension values."""
    for dim, v in values.items():
        b = bounds.get(dim)
        if b is None or (v != b if isinstance(b, int) else not b[0] <= v <= b[1]):
            return False
    return True
