import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret


@pytest.mark.parametrize("perm", [None, (0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_transpose(randn, perm):
    x = te.placeholder((2, 3, 4), name="x")
    xv = randn(2, 3, 4)
    out = nn.transpose(x, perm)
    assert out.op.tag == "injective"
    np.testing.assert_array_equal(interpret(out, {"x": xv}), np.transpose(xv, perm))


@pytest.mark.parametrize("shape", [(6, 4), (4, -1), (2, 2, 3, 2), (-1,), (24, 1), (1, 24)])
def test_reshape(randn, shape):
    x = te.placeholder((2, 3, 4), name="x")
    xv = randn(2, 3, 4)
    out = nn.reshape(x, shape)
    assert out.shape == np.reshape(xv, shape).shape and out.op.attrs == {"shape": out.shape}
    np.testing.assert_array_equal(interpret(out, {"x": xv}), np.reshape(xv, shape))


@pytest.mark.parametrize("axis, shape", [(0, (1, 24)), (1, (2, 12)), (-1, (6, 4)), (3, (24, 1))])
def test_flatten(randn, axis, shape):
    x = te.placeholder((2, 3, 4), name="x")
    xv = randn(2, 3, 4)
    out = nn.flatten(x, axis)
    assert out.shape == shape
    np.testing.assert_array_equal(interpret(out, {"x": xv}), xv.reshape(shape))


@pytest.mark.parametrize("pads, np_pads", [
    (((1, 0), (2, 3)), ((1, 0), (2, 3))),
    ((1, 0, 0, 2), ((1, 0), (0, 2))),  # ONNX order: befores then afters
    (1, ((1, 1), (1, 1))),
    (((0, 0), (0, 0)), ((0, 0), (0, 0))),
])
def test_pad(randn, pads, np_pads):
    x = te.placeholder((3, 4), name="x")
    xv = randn(3, 4)
    out = nn.pad(x, pads, value=-2.5)
    assert out.op.tag == "injective" and out.op.attrs["pads"] == np_pads
    np.testing.assert_array_equal(interpret(out, {"x": xv}), np.pad(xv, np_pads, constant_values=-2.5))


def test_pad_integers():
    x = te.placeholder((2, 2), "int32", name="x")
    xv = np.array([[1, 2], [3, 4]], dtype=np.int32)
    out = interpret(nn.pad(x, ((1, 1), (0, 1)), value=7), {"x": xv})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.pad(xv, ((1, 1), (0, 1)), constant_values=7))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(randn, axis):
    shapes = {0: [(2, 3), (1, 3), (4, 3)], 1: [(2, 1), (2, 3), (2, 2)], -1: [(2, 1), (2, 3), (2, 2)]}[axis]
    xs = [te.placeholder(s, name=f"x{k}") for k, s in enumerate(shapes)]
    values = {f"x{k}": randn(*s) for k, s in enumerate(shapes)}
    out = nn.concat(xs, axis)
    assert out.op.attrs == {"axis": axis % 2}
    np.testing.assert_array_equal(interpret(out, values), np.concatenate(list(values.values()), axis=axis))


def test_concat_of_one_tensor_copies_it(randn):
    x = te.placeholder((2, 3), name="x")
    xv = randn(2, 3)
    np.testing.assert_array_equal(interpret(nn.concat([x], 1), {"x": xv}), xv)


@pytest.mark.parametrize("starts, stops, axes, steps, index", [
    ((1,), (4,), None, None, np.s_[1:4]),
    ((0, 1), (5, 6), (0, 1), (2, 3), np.s_[0:5:2, 1:6:3]),
    ((-3,), (100,), (1,), None, np.s_[:, -3:]),
    ((-100, 2), (-1, -1), (-1, 0), (2, 1), np.s_[2:-1, :-1:2]),
    ((1,), (3,), (-2,), (5,), np.s_[1:3:5]),
])
def test_slice(randn, starts, stops, axes, steps, index):
    x = te.placeholder((5, 7), name="x")
    xv = randn(5, 7)
    out = nn.slice(x, starts, stops, axes, steps)
    np.testing.assert_array_equal(interpret(out, {"x": xv}), xv[index])


@pytest.mark.parametrize("axis, indices", [
    (0, np.array([2, 0, -1], dtype=np.int64)),
    (1, np.array([[0, 3], [-2, 1]], dtype=np.int32)),
    (-1, np.array(1, dtype=np.int64)),
])
def test_gather(randn, axis, indices):
    x = te.placeholder((3, 4, 2), name="x")
    idx = te.placeholder(indices.shape, str(indices.dtype), name="idx")
    xv = randn(3, 4, 2)
    out = nn.gather(x, idx, axis)
    expected = np.take(xv, indices, axis=axis)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(interpret(out, {"x": xv, "idx": indices}), expected)


def test_gather_clamps_indices_out_of_range(randn):
    x = te.placeholder((4, 2), name="x")
    idx = te.placeholder((3,), "int64", name="idx")
    xv = randn(4, 2)
    out = interpret(nn.gather(x, idx), {"x": xv, "idx": np.array([7, -9, 3])})
    np.testing.assert_array_equal(out, xv[[3, 0, 3]])


def test_broadcast_to_and_expand(randn):
    x = te.placeholder((3, 1), name="x")
    xv = randn(3, 1)
    out = nn.broadcast_to(x, (2, 3, 4))
    assert out.op.tag == "broadcast"
    np.testing.assert_array_equal(interpret(out, {"x": xv}), np.broadcast_to(xv, (2, 3, 4)))
    expanded = nn.expand(x, (1, 5))  # ONNX Expand: the 1 keeps x's extent 3
    assert expanded.shape == (3, 5)
    np.testing.assert_array_equal(interpret(expanded, {"x": xv}), xv * np.ones((1, 5), np.float32))


@pytest.mark.parametrize("call, message", [
    (lambda x: nn.transpose(x, (0, 0, 1)), r"perm \(0, 0, 1\) is not a permutation of the 3 axes"),
    (lambda x: nn.reshape(x, (5, -1)), r"has 24 elements, which do not fit \(5, -1\)"),
    (lambda x: nn.reshape(x, (-1, -1)), "at most one -1"),
    (lambda x: nn.reshape(x, (4, 7)), "which do not fit"),
    (lambda x: nn.flatten(x, 4), "flatten: axis 4 is out of range"),
    (lambda x: nn.pad(x, ((1, 1),)), "padding must be an integer, 3 integers"),
    (lambda x: nn.pad(te.placeholder((2,), "int32", name="i"), 1, value=0.5), "the value 0.5 does not fit i"),
    (lambda x: nn.concat([x, te.placeholder((2, 4, 4), name="y")], 2), r"y \(2, 4, 4\) and x \(2, 3, 4\) differ"),
    (lambda x: nn.concat([x, te.placeholder((2, 3, 4), "int32", name="y")]), "operands must share a dtype"),
    (lambda x: nn.concat([]), "needs at least one tensor"),
    (lambda x: nn.slice(x, (3,), (1,)), r"sliced to nothing by \[3:1\]"),
    (lambda x: nn.slice(x, (0,), (2,), steps=(-1,)), "steps must be positive"),
    (lambda x: nn.slice(x, (0, 0), (2,)), "must have one entry per sliced axis"),
    (lambda x: nn.gather(x, te.placeholder((2,), name="f")), "indices f must have an integer dtype"),
    (lambda x: nn.broadcast_to(x, (3, 4)), r"x of shape \(2, 3, 4\) does not broadcast to \(3, 4\)"),
])
def test_transform_errors(call, message):
    with pytest.raises(ShapeError, match=message):
        call(te.placeholder((2, 3, 4), name="x"))
