"""Operators as the planner sees them: each input's dimensions named by letters (an einsum-like spec), from which
a strategy's input layouts and the output layout follow (MindSpore §3.1.6, Fig. 3.11).

A strategy is one tuple of slice counts per operator input. A letter shared by inputs must be cut alike; a
letter missing from the output is a reduction, and cutting it leaves partial sums on the output (MatMul's inner
dimension, a convolution's input channels, an embedding's table rows). Letters an operator cannot cut without
changing its math (softmax's axis, a convolution's window) are fixed at one slice.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..errors import ShapeError, TilegradError
from .layout import Layout

Strategy = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Operator:
    """One operator instance: `inputs[i]` names input i's dimensions, `output` the output's; `whole` letters may
    not be cut; `flops` of the whole operator (forward); `out_sizes` sizes output letters no input has (a
    convolution's output window)."""
    name: str
    kind: str
    inputs: tuple[str, ...]
    output: str
    shapes: tuple[tuple[int, ...], ...]
    flops: float
    whole: str = ""
    out_sizes: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.shapes) or any(len(a) != len(s) for a, s in zip(self.inputs, self.shapes)):
            raise ShapeError(f"{self.kind} '{self.name}': dimension letters {self.inputs} do not fit input shapes "
                             f"{self.shapes}")

    @property
    def letters(self) -> str:
        return "".join(dict.fromkeys("".join(self.inputs)))

    def size(self, letter: str) -> int:
        for spec, shape in zip(self.inputs, self.shapes):
            if letter in spec:
                return shape[spec.index(letter)]
        raise TilegradError(f"{self.kind} '{self.name}': no dimension named {letter!r}")

    @property
    def output_shape(self) -> tuple[int, ...]:
        extra = dict(self.out_sizes)
        return tuple(extra[c] if c in extra else self.size(c) for c in self.output)

    def cuts(self, strategy: Strategy, devices: int) -> dict[str, int]:
        """The slice count of each letter; raises naming the operator and the reason if the strategy is invalid."""
        where = f"{self.kind} '{self.name}'"
        if len(strategy) != len(self.inputs):
            raise TilegradError(f"{where}: strategy {strategy} has {len(strategy)} tuples for {len(self.inputs)} "
                                "inputs; give one tuple of slice counts per input")
        cut: dict[str, int] = {}
        for i, (spec, shape, slices) in enumerate(zip(self.inputs, self.shapes, strategy)):
            if len(slices) != len(spec):
                raise TilegradError(f"{where}: input {i} is {len(spec)}-D but its strategy {slices} has "
                                    f"{len(slices)} entries")
            for d, (c, n, k) in enumerate(zip(spec, shape, slices)):
                if k < 1 or n % k:
                    raise TilegradError(f"{where}: input {i} dimension {d} of size {n} cannot be cut into {k} "
                                        "equal slices")
                if cut.setdefault(c, k) != k:
                    raise TilegradError(f"{where}: dimension {c!r} is cut {cut[c]} ways in one input and {k} in "
                                        f"input {i}; inputs sharing a dimension must cut it alike")
                if k > 1 and c in self.whole:
                    raise TilegradError(f"{where}: input {i} dimension {d} cannot be split: {self.kind} needs it "
                                        "whole on each device")
        used = math.prod(cut.values())
        if devices % used:
            raise TilegradError(f"{where}: strategy {strategy} cuts {used} ways, which does not divide "
                                f"{devices} devices")
        return cut

    def layouts(self, strategy: Strategy, devices: int) -> tuple[tuple[Layout, ...], Layout]:
        """The input layouts the strategy asks for and the output layout it leaves."""
        cut = self.cuts(strategy, devices)
        letters = self.letters
        matrix = (devices // math.prod(cut.values()), *(cut[c] for c in letters))
        axis = {c: i + 1 for i, c in enumerate(letters)}
        ins = tuple(Layout(matrix, tuple((axis[c],) for c in spec)) for spec in self.inputs)
        out = Layout(matrix, tuple((axis[c],) if c in axis else () for c in self.output),
                     tuple(axis[c] for c in letters if c not in self.output and cut[c] > 1))
        return ins, out

    def strategy(self, cut: dict[str, int]) -> Strategy:
        return tuple(tuple(cut.get(c, 1) for c in spec) for spec in self.inputs)

    def strategies(self, devices: int, use_all: bool = True) -> list[Strategy]:
        """Every valid strategy whose slice counts multiply to `devices` (or divide it, `use_all=False`)."""
        letters = [c for c in self.letters if c not in self.whole]
        options = [[k for k in _divisors(devices) if self.size(c) % k == 0] for c in letters]
        out = []
        for ks in itertools.product(*options):
            used = math.prod(ks)
            if (used == devices) if use_all else devices % used == 0:
                out.append(self.strategy(dict(zip(letters, ks))))
        if not out:  # nothing cuts evenly into all devices: replicate what cannot be cut
            return self.strategies(devices, use_all=False)
        return out


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _letters(count: int, skip: str = "") -> str:
    return "".join(c for c in "abcdefghijklmnopqrstuvwxyz" if c not in skip)[:count]


def matmul(name: str, a: tuple[int, ...], b: tuple[int, ...]) -> Operator:
    """a @ b; leading dimensions of both are batch dimensions (batch matmul), b may be 2-D (shared weight)."""
    if a[-1] != b[-2]:
        raise ShapeError(f"matmul '{name}': inner dimensions differ, {a} @ {b}")
    batch = _letters(len(a) - 2, "mkn")
    spec_b = (batch[len(a) - len(b):] if len(b) > 2 else "") + "kn"
    return Operator(name, "matmul" if len(a) == 2 else "batch_matmul", (batch + "mk", spec_b), batch + "mn",
                    (a, b), 2.0 * math.prod(a) * b[-1])


def linear(name: str, x: tuple[int, ...], weight: tuple[int, ...]) -> Operator:
    """x @ weight.T with PyTorch's (out, in) weight: a matmul whose second input is stored transposed."""
    if x[-1] != weight[1]:
        raise ShapeError(f"linear '{name}': input has {x[-1]} features, weight {weight} expects {weight[1]}")
    batch = _letters(len(x) - 2, "mkn")
    return Operator(name, "linear", (batch + "mk", "nk"), batch + "mn", (x, weight),
                    2.0 * math.prod(x) * weight[0])


def elementwise(name: str, *shapes: tuple[int, ...], flops_per_element: float = 1.0) -> Operator:
    """Element-wise over broadcast inputs (right-aligned); a broadcast dimension cannot be cut."""
    rank = max(len(s) for s in shapes)
    out_shape = tuple(max(s[len(s) - rank + d] if d >= rank - len(s) else 1 for s in shapes) for d in range(rank))
    letters = _letters(rank)
    specs, whole, fresh = [], "", iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    for s in shapes:
        spec = ""
        for d, n in enumerate(s):
            c = letters[rank - len(s) + d]
            if n != out_shape[rank - len(s) + d]:
                c = next(fresh)
                whole += c
            spec += c
        specs.append(spec)
    return Operator(name, "elementwise", tuple(specs), letters, tuple(shapes),
                    flops_per_element * math.prod(out_shape), whole)


def reduce_sum(name: str, shape: tuple[int, ...], axes: tuple[int, ...]) -> Operator:
    """Sum (or mean) over `axes`, dropped from the output: cutting them leaves partial sums."""
    letters = _letters(len(shape))
    out = "".join(c for d, c in enumerate(letters) if d not in axes)
    return Operator(name, "reduce_sum", (letters,), out, (shape,), float(math.prod(shape)))


def softmax(name: str, shape: tuple[int, ...], axis: int = -1) -> Operator:
    letters = _letters(len(shape))
    return Operator(name, "softmax", (letters,), letters, (shape,), 5.0 * math.prod(shape), letters[axis])


def layer_norm(name: str, shape: tuple[int, ...], weight: tuple[int, ...], bias: tuple[int, ...]) -> Operator:
    """x, weight, bias; the dimensions the weight covers (the last ones) are normalized over and stay whole."""
    if weight != bias or tuple(shape[len(shape) - len(weight):]) != tuple(weight):
        raise ShapeError(f"layer_norm '{name}': weight {weight} and bias {bias} must equal the last dimensions "
                         f"of the input {shape}")
    letters = _letters(len(shape))
    tail = letters[len(shape) - len(weight):]
    return Operator(name, "layer_norm", (letters, tail, tail), letters, (shape, weight, bias),
                    8.0 * math.prod(shape), tail)


def embedding(name: str, indices: tuple[int, ...], table: tuple[int, ...]) -> Operator:
    """table[indices]: cutting the table's rows leaves partial sums (each device looks up the rows it holds)."""
    letters = _letters(len(indices), "vd")
    return Operator(name, "embedding", (letters, "vd"), letters + "d", (indices, table),
                    float(math.prod(indices) * table[1]))


def conv2d(name: str, x: tuple[int, ...], w: tuple[int, ...], out_hw: tuple[int, int]) -> Operator:
    """NCHW convolution (one group): batch and output channels cut freely, input channels leave partial sums,
    the spatial dimensions and the window stay whole (no halo exchange)."""
    if x[1] != w[1]:
        raise ShapeError(f"conv2d '{name}': input has {x[1]} channels, weight expects {w[1]}")
    flops = 2.0 * x[0] * w[0] * out_hw[0] * out_hw[1] * w[1] * w[2] * w[3]
    return Operator(name, "conv2d", ("nchw", "ocij"), "nopq", (x, w), flops, "hwij",
                    (("p", out_hw[0]), ("q", out_hw[1])))


def transpose(name: str, shape: tuple[int, ...], perm: tuple[int, ...]) -> Operator:
    letters = _letters(len(shape))
    return Operator(name, "transpose", (letters,), "".join(letters[p] for p in perm), (shape,), 0.0)


