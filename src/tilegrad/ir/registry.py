"""The op registry: every operator declared once, with everything the rest of the compiler reads.

An `OpDef` holds the op's attributes and their defaults, its type rule (`infer`), a NumPy reference, its
tensor-expression compute, its fusion kind and sample inputs for tests, and the facts the passes and tools ask
of it: the formula that expands a composite into basic ops, the row shape a row-wise op keeps, whether it keeps
finite values finite (so a blocked layout's padded lanes stay harmless) and, where the compute's arithmetic is
not the op's, its floating-point work. Frontends map foreign ops onto these names; passes, the executor, the CLI
and the tests find everything here. Adding an op touches its family file in `ir/ops/` only (and its compute in
`te/nn/`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from ..errors import ShapeError, UnknownAttributeError, UnsupportedOpError

# Fusion kinds (TVM's): how an op may be grouped with its neighbours.
ELEMWISE = "elemwise"  # one output element from the same element of each input
BROADCAST = "broadcast"  # element-wise with broadcasting
INJECTIVE = "injective"  # each output element from one input element (reshape, transpose, slice, ...)
REDUCTION = "reduction"
OUT_FUSABLE = "out_fusable"  # conv, matmul: element-wise consumers can be fused onto the output
OPAQUE = "opaque"
KINDS = (ELEMWISE, BROADCAST, INJECTIVE, REDUCTION, OUT_FUSABLE, OPAQUE)


@dataclasses.dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclasses.dataclass(frozen=True)
class Sample:
    """Inputs for the registry-driven tests: one (shape, dtype) per input, and attributes."""

    inputs: tuple[tuple[tuple[int, ...], str], ...]
    attrs: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class OpDef:
    name: str
    kind: str
    attrs: dict[str, Any]
    infer: Callable[..., list[TensorType]]  # (input types, **attrs) -> output types
    reference: Callable[..., Any]  # (arrays, **attrs) -> array or tuple of arrays
    compute: Callable[..., Any]  # (te tensors, **attrs) -> te Tensor or list of Tensors
    samples: tuple[Sample, ...]
    num_inputs: tuple[int, int]  # (least, most); most = -1 for variadic
    # The composite's formula over terms of basic ops (passes/expand.py), called like the reference: (terms,
    # **attrs) -> term. None: a basic op.
    expand: Callable[..., Any] | None = None
    # (shape of the first input, **attrs) -> the leading axes the op keeps when it works row by row (a reduction
    # over trailing axes, a softmax over the last; a product whose output rows each come from one row of its
    # first input), or None; fusion stitches ops over the same rows.
    rows: Callable[..., tuple[int, ...] | None] | None = None
    # Whether the op maps finite inputs to finite outputs: such element-wise ops may run in a blocked layout
    # whose last block has padded channels (a 0 * inf there would poison a convolution's sum).
    finite: bool = False
    # (input types, output types, **attrs) -> floating-point operations, for ops whose compute does other
    # arithmetic than the op (padded lanes, zeros of a transposed convolution). None: counted over the compute.
    flops: Callable[..., int] | None = None
    # Whether the output is the input's bytes seen with another shape (reshape): it runs no kernel, and the
    # memory plan gives it its input's memory.
    view: bool = False

    def bind_attrs(self, given: dict, where: str) -> dict:
        """The op's attributes with defaults filled in; unknown names are an error that says where."""
        unknown = set(given) - set(self.attrs)
        if unknown:
            raise UnknownAttributeError(f"{where}: op {self.name!r} has no attribute(s) {sorted(unknown)}; "
                                        f"it takes {sorted(self.attrs)}")
        return {**self.attrs, **given}

    def check_arity(self, n: int, where: str) -> None:
        least, most = self.num_inputs
        if n < least or (most >= 0 and n > most):
            want = f"{least}" if least == most else f"{least} to {most if most >= 0 else 'any number of'}"
            raise ShapeError(f"{where}: op {self.name!r} takes {want} inputs, got {n}")


OPS: dict[str, OpDef] = {}


def declare(name: str, *, kind: str, infer: Callable, reference: Callable, compute: Callable,
            attrs: dict | None = None, samples: Sequence[Sample] = (), num_inputs: int | tuple[int, int] = 1,
            expand: Callable | None = None, rows: Callable | None = None, finite: bool = False,
            flops: Callable | None = None, view: bool = False) -> OpDef:
    """Register op `name`. Called at import time by the family modules in `ir/ops/`."""
    if name in OPS:
        raise ValueError(f"op {name!r} is declared twice")
    if kind not in KINDS:
        raise ValueError(f"op {name!r}: unknown fusion kind {kind!r}; expected one of {KINDS}")
    arity = (num_inputs, num_inputs) if isinstance(num_inputs, int) else tuple(num_inputs)
    op = OpDef(name, kind, dict(attrs or {}), infer, reference, compute, tuple(samples), arity, expand, rows, finite,
               flops, view)
    OPS[name] = op
    return op


def declared_ops() -> dict[str, OpDef]:
    """Every declared op by name."""
    from . import ops as _ops  # noqa: F401  (importing the families fills OPS)

    return OPS


def lookup(name: str) -> OpDef:
    from . import ops as _ops  # noqa: F401  (importing the families fills OPS)

    try:
        return OPS[name]
    except KeyError:
        raise UnsupportedOpError(f"unknown op {name!r}; registered ops: {', '.join(sorted(OPS))}") from None


def same_as_input(*types: TensorType, **_) -> list[TensorType]:
    """The type rule of unary element-wise ops."""
    return [types[0]]
