"""Algebraic simplification: rewrite rules over single nodes and their producers, applied until none fires.

The rules are a table keyed by op. A rule sees the node and its inputs in the graph being built, and returns the
value that replaces the node's output, or None when it does not apply:

- a binary op with a constant unit operand (x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1, x ** 1) is its other
  operand, when broadcasting the constant does not change that operand's shape;
- a float power by a constant 2, 3 or 4 (GELU's tanh form cubes, norms square) is a product of the base with
  itself, which the fused kernel computes in vectors, not a scalar `powf` call per element;
- a data-movement op whose output has its input's type (identity, a cast to the same dtype, a reshape to the
  same shape, an expand, tile, pad or slice that keeps the shape, a concat of one tensor) is its input;
- a transpose of a transpose is one transpose of the composed permutation, or nothing when that is the identity;
- a chain of reshape, flatten, squeeze and unsqueeze is one reshape;
- a 2-D transpose feeding a matrix product is absorbed into `gemm`'s trans_a / trans_b;
- a convolution of a zero `pad` of the spatial axes (TensorFlow's "same" padding, as Hugging Face's MobileNets
  and EfficientNets export it) is a convolution of the unpadded input with the pads added to its own, so that
  it stays one kernel in the blocked layout instead of a pad between two layout copies;
- a convolution with a constant kernel loses the taps that only ever read its zero padding (DeepLabV3's
  atrous pyramid dilates a 3 x 3 kernel by 36 over a 28 x 28 map: only the centre tap reads the image).
"""

from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..te import dims
from ..ir.registry import lookup
from .editor import GraphEditor
from .context import PassContext


def simplify(g: Graph, ctx: PassContext) -> Graph:
    """Remove computations that do nothing and merge data movement, so later passes and kernels see less."""
    while True:
        walk = _Walk(g)
        out = walk.run(ctx)
        if not walk.changed:
            return g
        g = out


class _Walk:
    """One forward walk over the graph, remembering which node produces each value of the new graph so that rules
    can look through chains already rewritten earlier in the same walk."""

    def __init__(self, g: Graph):
        self.graph = g
        self.ed = GraphEditor(g)
        self.made: dict[int, Node] = {}  # id(value in the new graph) -> the node producing it there
        self.outputs = {id(v) for v in g.outputs}
        self.changed = False

    def run(self, ctx: PassContext) -> Graph:
        for node in self.graph.nodes:
            new = self._rewrite(node, ctx) if len(node.outputs) == 1 else None
            if new is None:
                kept = self.ed.keep(node)
                self.made.update((id(v), kept) for v in kept.outputs)
            else:
                self.ed.replace(node.outputs[0], new)
                self.changed = True
        return self.ed.finish()

    def _rewrite(self, node: Node, ctx: PassContext) -> Value | None:
        inputs = self.ed.inputs_of(node)
        for rule in RULES.get(node.op, ()):
            new = rule(self, node, inputs)
            if new is not None and self._may_replace(node.outputs[0], new):
                ctx.note(f"{node.name} ({node.op}): {rule.__name__.lstrip('_').replace('_', ' ')}")
                return new
        return None

    def _may_replace(self, old: Value, new: Value) -> bool:
        """A graph output can be forwarded only to a value that a node computes and that is no other output, so
        that it keeps its name (a graph input or another output cannot take it)."""
        if id(old) not in self.outputs:
            return True
        return id(new) in self.made and all(self.ed.get(v) is not new for v in self.graph.outputs)

    def producer(self, v: Value) -> Node | None:
        return self.made.get(id(v))

    def emit(self, replacing: Node, op: str, *inputs: Value, **attrs) -> Value:
        v = self.ed.op(op, *inputs, name=replacing.name, **attrs)
        self.made[id(v)] = Node(v.name, op, inputs, (v,), lookup(op).bind_attrs(attrs, f"node {v.name!r}"))
        return v


def _is_filled(v: Value, fill: int) -> bool:
    return v.is_constant and bool(np.all(v.data == fill))


def _unit_operand(fill: int, *, commutative: bool):
    """The rule for an op with a unit `fill` (0 for add and sub, 1 for mul, div and pow): on the right, or on
    either side when the op commutes."""
    def _drop_unit_operand(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
        out = node.outputs[0].type
        x, c = inputs
        if _is_filled(c, fill) and x.type == out:
            return x
        if commutative and _is_filled(x, fill) and c.type == out:
            return c
        return None
    return _drop_unit_operand


def _drop_padding_taps(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    x, w, *rest = inputs
    rank = len(x.shape) - 2
    if not w.is_constant or rank < 1 or not dims.is_static(x.shape[2:]):  # a tap reads only padding in tiny inputs
        return None
    a = node.attrs
    strides, dilations = a["strides"] or (1,) * rank, a["dilations"] or (1,) * rank
    pads = list(a["pads"] or (0,) * (2 * rank))
    out = node.outputs[0].shape[2:]
    kept, begin, end = [], [], []
    for axis in range(rank):
        size, d, pb = x.shape[2 + axis], dilations[axis], pads[axis]
        reach = (out[axis] - 1) * strides[axis]  # tap t reads [t d - pb, t d - pb + reach]
        taps = [t for t in range(w.shape[2 + axis]) if t * d - pb + reach >= 0 and t * d - pb < size]
        if not taps:
            return None
        kept.append(slice(taps[0], taps[-1] + 1))
        begin.append(pb - taps[0] * d)
        end.append(reach + d * (len(taps) - 1) + 1 - size - begin[-1])
    if all(k.stop - k.start == n for k, n in zip(kept, w.shape[2:])) or min(begin + end) < 0:
        return None
    kernel = walk.ed.const(np.ascontiguousarray(w.data[(..., *kept)]), f"{node.name}_taps")
    return walk.emit(node, "conv", x, kernel, *rest, **{**a, "pads": begin + end})


SMALL_POWERS = (2, 3, 4)


def _small_power(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    x, c = inputs
    if not (c.is_constant and x.type == node.outputs[0].type and x.dtype.startswith("float") and c.data.size):
        return None
    n = c.data.flat[0]
    if n not in SMALL_POWERS or not np.all(c.data == n):
        return None
    square = walk.emit(node, "mul", x, x)
    return square if n == 2 else walk.emit(node, "mul", square, square if n == 4 else x)


def _drop_shape_noop(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    return inputs[0] if len(inputs) == 1 and inputs[0].type == node.outputs[0].type else None


def _permutation(node: Node) -> tuple[int, ...]:
    perm = node.attrs["perm"]
    return tuple(reversed(range(len(node.inputs[0].shape)))) if perm is None else tuple(perm)


def _compose_transposes(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    (x,), perm = inputs, _permutation(node)
    inner = walk.producer(x)
    merged = inner is not None and inner.op == "transpose"
    if merged:
        first = _permutation(inner)
        x, perm = inner.inputs[0], tuple(first[p] for p in perm)  # output axis i reads x's axis first[perm[i]]
    if perm == tuple(range(len(perm))):
        return x
    return walk.emit(node, "transpose", x, perm=perm) if merged else None


RESHAPES = ("reshape", "flatten", "squeeze", "unsqueeze")


def _merge_reshapes(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    inner = walk.producer(inputs[0])
    if inner is None or inner.op not in RESHAPES:
        return None
    source, out = inner.inputs[0], node.outputs[0]
    return source if source.type == out.type else walk.emit(node, "reshape", source, shape=out.shape)


def _absorb_transposes(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    """A 2-D product reading a 2-D transpose reads the transpose's input instead, with gemm's flag for that
    operand flipped. Float products only: gemm accumulates in float64, which would round large integers."""
    if not node.outputs[0].dtype.startswith("float"):
        return None
    attrs = dict(node.attrs if node.op == "gemm" else lookup("gemm").attrs)
    operands, absorbed = list(inputs), False
    for slot, flag in ((0, "trans_a"), (1, "trans_b")):
        inner = walk.producer(operands[slot])
        if inner is not None and inner.op == "transpose" and _permutation(inner) == (1, 0):
            operands[slot], attrs[flag], absorbed = inner.inputs[0], 1 - attrs[flag], True
    if not absorbed or any(len(v.shape) != 2 for v in operands[:2]):
        return None
    return walk.emit(node, "gemm", *operands, **attrs)


def _absorb_zero_pad(walk: _Walk, node: Node, inputs: tuple[Value, ...]) -> Value | None:
    x, *rest = inputs
    pad = walk.producer(x)
    if pad is None or pad.op != "pad" or pad.attrs["mode"] != "constant" or pad.attrs["value"] != 0:
        return None
    rank = len(x.shape)
    begin, end = list(pad.attrs["pads"][:rank]), list(pad.attrs["pads"][rank:])
    if any(begin[:2]) or any(end[:2]):
        return None
    spatial = rank - 2
    own = list(node.attrs["pads"] or (0,) * (2 * spatial))
    pads = [p + q for p, q in zip(own, begin[2:] + end[2:])]
    return walk.emit(node, "conv", pad.inputs[0], *rest, **{**node.attrs, "pads": pads})


_NOOP_WHEN_SHAPE_KEPT = ("identity", "cast", "expand", "tile", "pad", "slice", "concat", "dilate")
RULES = {
    "add": (_unit_operand(0, commutative=True),),
    "sub": (_unit_operand(0, commutative=False),),
    "mul": (_unit_operand(1, commutative=True),),
    "div": (_unit_operand(1, commutative=False),),
    "pow": (_unit_operand(1, commutative=False), _small_power),
    "transpose": (_compose_transposes,),
    "matmul": (_absorb_transposes,),
    "gemm": (_absorb_transposes,),
    "conv": (_absorb_zero_pad, _drop_padding_taps),
    **{op: (_drop_shape_noop, _merge_reshapes) for op in RESHAPES},
    **{op: (_drop_shape_noop,) for op in _NOOP_WHEN_SHAPE_KEPT},
}
