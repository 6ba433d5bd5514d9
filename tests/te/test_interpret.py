import importlib

import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ExprError, ShapeError
from tilegrad.te.interpret import interpret


def test_elementwise_compute(randn):
    a, b = te.placeholder((3, 4), name="a"), te.placeholder((3, 4), name="b")
    c = te.compute((3, 4), lambda i, j: a[i, j] * b[i, j] + 1.0, name="c")
    x, y = randn(3, 4), randn(3, 4)
    np.testing.assert_allclose(interpret(c, {"a": x, "b": y}), x * y + 1, rtol=1e-6)


def test_sum_reduction_is_matmul(randn):
    a, b = te.placeholder((5, 6), name="a"), te.placeholder((6, 7), name="b")
    k = te.reduce_axis(6, "k")
    c = te.compute((5, 7), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    x, y = randn(5, 6), randn(6, 7)
    out = interpret(c, {"a": x, "b": y})
    assert out.shape == (5, 7) and out.dtype == np.float32
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("combiner, ref", [(te.max, np.max), (te.min, np.min)])
def test_max_min_over_two_axes(randn, combiner, ref):
    a = te.placeholder((2, 3, 4), name="a")
    r, s = te.reduce_axis(3, "r"), te.reduce_axis(4, "s")
    c = te.compute((2,), lambda i: combiner(a[i, r, s], axis=[r, s]), name="c")
    x = randn(2, 3, 4)
    np.testing.assert_array_equal(interpret(c, {"a": x}), ref(x, axis=(1, 2)))


def test_loads_in_an_untaken_branch_are_clipped(randn):
    a = te.placeholder((5,), name="a")
    shifted = te.compute((7,), lambda i: te.select((i >= 1) & (i < 6), a[i - 1], 0.0), name="shifted")
    x = randn(5)
    np.testing.assert_array_equal(interpret(shifted, {"a": x}), np.concatenate([[0], x, [0]]))


def test_chain_and_list_of_outputs(randn):
    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="b")
    c = te.compute((4,), lambda i: b[i] + a[i], name="c")
    x = randn(4)
    out_b, out_c = interpret([b, c], {"a": x})
    np.testing.assert_allclose(out_b, 2 * x)
    np.testing.assert_allclose(out_c, 3 * x)


def test_tensors_are_told_apart_by_identity_not_name(randn):
    a = te.placeholder((4,), name="a")
    first = te.compute((4,), lambda i: a[i] + 1.0, name="same")
    second = te.compute((4,), lambda i: first[i] * 3.0, name="same")
    x = randn(4)
    np.testing.assert_allclose(interpret(second, {"a": x}), (x + 1) * 3, rtol=1e-6)


def test_scalar_output(randn):
    a = te.placeholder((3, 2), name="a")
    i, j = te.reduce_axis(3, "i"), te.reduce_axis(2, "j")
    total = te.compute((), lambda: te.sum(a[i, j], axis=[i, j]), name="total")
    x = randn(3, 2)
    out = interpret(total, {"a": x})
    assert out.shape == ()
    np.testing.assert_allclose(out, x.sum(), rtol=1e-6)


def test_result_takes_the_tensor_dtype():
    a = te.placeholder((4,), dtype="int32", name="a")
    halves = te.compute((4,), lambda i: te.cast("float32", a[i]) / 2.0, name="halves")
    back = te.compute((4,), lambda i: te.cast("int32", halves[i]), name="back")
    out = interpret(back, {"a": np.array([-3, -1, 1, 5], dtype=np.int32)})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [-1, 0, 0, 2])  # C-like truncation


def test_constant_body_fills_the_shape():
    c = te.compute((2, 3), lambda i, j: te.const(1.5, "float32"), name="c")
    np.testing.assert_array_equal(interpret(c, {}), np.full((2, 3), 1.5, np.float32))


@pytest.mark.parametrize("inputs, message", [
    ({}, "no array given for placeholder 'a'"),
    ({"a": np.zeros((3,), np.float32)}, r"expected shape \(4,\), got \(3,\)"),
    ({"a": np.zeros((4,), np.float64)}, "expected dtype float32, got float64"),
    ({"a": np.zeros((4,), np.float32), "b": np.zeros(1)}, r"inputs \['b'\] match no placeholder"),
])
def test_input_errors(inputs, message):
    a = te.placeholder((4,), name="a")
    c = te.compute((4,), lambda i: a[i] + 1.0, name="c")
    with pytest.raises(ShapeError, match=message):
        interpret(c, inputs)


def test_placeholders_sharing_a_name_are_rejected():
    a, b = te.placeholder((2,), name="x"), te.placeholder((2,), name="x")
    c = te.compute((2,), lambda i: a[i] + b[i], name="c")
    with pytest.raises(ShapeError, match="share a name"):
        interpret(c, {"x": np.zeros(2, np.float32)})


def test_a_reduction_below_the_root_is_rejected():
    a = te.placeholder((3, 4), name="a")
    k = te.reduce_axis(4, "k")
    c = te.compute((3,), lambda i: te.sum(a[i, k], axis=k) * 2.0, name="c")
    with pytest.raises(ExprError, match="must be the root"):
        interpret(c, {"a": np.zeros((3, 4), np.float32)})


def test_large_grids_are_evaluated_in_blocks(randn, monkeypatch):
    module = importlib.import_module("tilegrad.te.interpret")  # te.interpret is the function, not the module
    monkeypatch.setattr(module, "_BLOCK_ELEMENTS", 10)  # a block of 1 row: 9 * 8 grid points per row
    a, b = te.placeholder((7, 8), name="a"), te.placeholder((8, 9), name="b")
    k = te.reduce_axis(8, "k")
    c = te.compute((7, 9), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    x, y = randn(7, 8), randn(8, 9)
    np.testing.assert_allclose(interpret(c, {"a": x, "b": y}), x @ y, rtol=1e-5, atol=1e-5)
