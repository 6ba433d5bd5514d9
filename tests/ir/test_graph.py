"""Graph IR: typed construction, verification, the printer, and errors that name the node and the shapes."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad.errors import ShapeError, UnknownAttributeError, UnsupportedOpError
from tilegrad.ir import GraphBuilder


def _small():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    w = b.const(np.ones(3, "float32"), "w")
    y = b.op("relu", b.op("add", x, w))
    return b, b.build(b.op("clip", y, max=6.0))


def test_printer_golden():
    _, g = _small()
    assert str(g) == """\
graph(%x: float32[2, 3]) {
  %add = add(%x, %w: const float32[3]) : float32[2, 3]
  %relu = relu(%add) : float32[2, 3]
  %clip = clip(%relu) {min=-inf, max=6.0} : float32[2, 3]
  return %clip
}"""


def test_structure_queries():
    _, g = _small()
    assert [n.op for n in g.nodes] == ["add", "relu", "clip"]
    assert [c.name for c in g.constants] == ["w"]
    add = g.nodes[0]
    assert g.consumers()[id(add.outputs[0])] == [g.nodes[1]]
    assert g.producers()[id(g.outputs[0])] is g.nodes[2]


def test_mismatch_names_node_and_shapes():
    b = GraphBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (4, 3))
    with pytest.raises(ShapeError, match=r"node 'add' \(add\) with inputs float32\[2, 3\], float32\[4, 3\]"):
        b.op("add", x, y)


def test_dtype_mismatch_and_arity_and_attributes():
    b = GraphBuilder()
    x, i = b.input("x", (2,)), b.input("i", (2,), "int32")
    with pytest.raises(ShapeError, match="different dtypes"):
        b.op("mul", x, i)
    with pytest.raises(ShapeError, match="takes 2 inputs, got 1"):
        b.op("mul", x)
    with pytest.raises(UnknownAttributeError, match="no attribute"):
        b.op("relu", x, slope=2.0)
    with pytest.raises(UnsupportedOpError, match="unknown op 'frobnicate'"):
        b.op("frobnicate", x)


def test_names_are_unique():
    b = GraphBuilder()
    x = b.input("x", (2,))
    y = b.op("relu", b.op("relu", x))
    assert y.name == "relu_1"


def test_a_made_up_name_skips_a_name_taken_as_it_is():
    """`relu_1` given as a name of its own, then `relu` twice: the second is `relu_2`, not a second `relu_1`
    (Funnel's exported graph has node names like `Reshape` and `Reshape_3` side by side)."""
    b = GraphBuilder()
    x = b.input("x", (2,))
    first = b.op("relu", x, name="relu_1")
    names = [first.name, b.op("relu", first).name, b.op("relu", first).name, b.op("relu", first, name="relu_1").name]
    assert names == ["relu_1", "relu", "relu_2", "relu_1_1"]
