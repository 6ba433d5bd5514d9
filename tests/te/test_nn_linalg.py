import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul(randn, transpose_a, transpose_b):
    av, bv = randn(5, 3), randn(3, 4)
    av_in, bv_in = (av.T.copy() if transpose_a else av), (bv.T.copy() if transpose_b else bv)
    a, b = te.placeholder(av_in.shape, name="a"), te.placeholder(bv_in.shape, name="b")
    out = nn.matmul(a, b, transpose_a, transpose_b)
    assert out.shape == (5, 4) and out.op.tag == "matmul"
    assert out.op.attrs == {"transpose_a": transpose_a, "transpose_b": transpose_b}
    assert [v.name for v in out.op.axes + out.op.reduce_axes] == ["i", "j", "k"]
    np.testing.assert_allclose(interpret(out, {"a": av_in, "b": bv_in}), av @ bv, rtol=1e-5, atol=1e-5)


def test_integer_matmul():
    a, b = te.placeholder((2, 3), "int32", name="a"), te.placeholder((3, 2), "int32", name="b")
    av, bv = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(3, 2) - 2
    out = interpret(nn.matmul(a, b), {"a": av, "b": bv})
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, av @ bv)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((4, 2, 3), (4, 3, 5)),
    ((2, 1, 2, 3), (4, 3, 5)),
    ((2, 3), (4, 3, 5)),
    ((3, 2, 3), (3, 5)),
])
def test_batch_matmul_broadcasts_batch_dims(randn, a_shape, b_shape):
    a, b = te.placeholder(a_shape, name="a"), te.placeholder(b_shape, name="b")
    av, bv = randn(*a_shape), randn(*b_shape)
    out = nn.batch_matmul(a, b)
    expected = np.matmul(av, bv)
    assert out.shape == expected.shape and out.op.tag == "batch_matmul"
    np.testing.assert_allclose(interpret(out, {"a": av, "b": bv}), expected, rtol=1e-5, atol=1e-5)


def test_batch_matmul_with_transposes(randn):
    a, b = te.placeholder((2, 3, 4), name="a"), te.placeholder((2, 5, 3), name="b")
    av, bv = randn(2, 3, 4), randn(2, 5, 3)
    out = nn.batch_matmul(a, b, transpose_a=True, transpose_b=True)
    expected = np.swapaxes(av, -1, -2) @ np.swapaxes(bv, -1, -2)
    np.testing.assert_allclose(interpret(out, {"a": av, "b": bv}), expected, rtol=1e-5, atol=1e-5)


def test_dense(randn):
    x, w, bias = te.placeholder((4, 6), name="x"), te.placeholder((3, 6), name="w"), te.placeholder((3,), name="b")
    xv, wv, bv = randn(4, 6), randn(3, 6), randn(3)
    plain = nn.dense(x, w)
    assert plain.op.tag == "dense" and plain.name == "dense"
    np.testing.assert_allclose(interpret(plain, {"x": xv, "w": wv}), xv @ wv.T, rtol=1e-5, atol=1e-5)
    biased = nn.dense(x, w, bias, name="fc")
    assert biased.name == "fc" and biased.op.tag == "broadcast" and biased.op.inputs[0].name == "fc_matmul"
    np.testing.assert_allclose(interpret(biased, {"x": xv, "w": wv, "b": bv}), xv @ wv.T + bv, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda: nn.matmul(te.placeholder((2, 3), name="a"), te.placeholder((4, 5), name="b")),
     r"matmul: the reduction extents differ: a \(2, 3\) gives 3, b \(4, 5\) gives 4"),
    (lambda: nn.matmul(te.placeholder((2, 3, 4), name="a"), te.placeholder((4, 5), name="b")),
     r"matmul: a must have rank 2 \(M, K\)"),
    (lambda: nn.matmul(te.placeholder((2, 3), name="a"), te.placeholder((3, 5), "float16", name="b")),
     "operands must share a dtype"),
    (lambda: nn.batch_matmul(te.placeholder((3,), name="a"), te.placeholder((3, 5), name="b")),
     "a needs at least 2 dimensions"),
    (lambda: nn.batch_matmul(te.placeholder((2, 2, 3), name="a"), te.placeholder((3, 3, 5), name="b")),
     "do not broadcast"),
    (lambda: nn.dense(te.placeholder((2, 3), name="x"), te.placeholder((4, 3), name="w"),
                      te.placeholder((3,), name="b")), r"bias b must have shape \(4,\), got \(3,\)"),
])
def test_linalg_errors(call, message):
    with pytest.raises(ShapeError, match=message):
        call()
