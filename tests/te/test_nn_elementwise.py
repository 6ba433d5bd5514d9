import math

import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret

_erf = np.vectorize(math.erf)


@pytest.mark.parametrize("shapes, expected", [
    (((3, 4), (3, 4)), (3, 4)),
    (((2, 1, 4), (3, 1)), (2, 3, 4)),
    (((1,), (5, 1, 1)), (5, 1, 1)),
    (((), (2, 3)), (2, 3)),
    (((4, 1), (1, 6), (4, 6)), (4, 6)),
])
def test_broadcast_shape(shapes, expected):
    assert nn.broadcast_shape(*shapes) == expected
    assert np.broadcast_shapes(*shapes) == expected


def test_broadcast_shape_names_the_bad_dimension():
    message = r"shapes \(2, 3\), \(4, 3\) do not broadcast: dimension -2 has extents \[2, 4\]"
    with pytest.raises(ShapeError, match=message):
        nn.broadcast_shape((2, 3), (4, 3))


BINARY = [
    (nn.add, np.add), (nn.sub, np.subtract), (nn.mul, np.multiply), (nn.div, np.divide),
    (nn.maximum, np.maximum), (nn.minimum, np.minimum),
]
COMPARE = [
    (nn.equal, np.equal), (nn.not_equal, np.not_equal), (nn.less, np.less), (nn.less_equal, np.less_equal),
    (nn.greater, np.greater), (nn.greater_equal, np.greater_equal),
]


@pytest.mark.parametrize("op, ref", BINARY + COMPARE)
def test_binary_ops_broadcast(randn, op, ref):
    a, b = te.placeholder((2, 1, 4), name="a"), te.placeholder((3, 1), name="b")
    av, bv = randn(2, 1, 4), randn(3, 1)
    bv[0, 0] = av[0, 0, 0]  # one equal pair for the comparisons
    out = op(a, b)
    assert out.shape == (2, 3, 4) and out.op.tag == "broadcast" and out.op.name == op.__name__
    result = interpret(out, {"a": av, "b": bv})
    assert result.dtype == ref(av, bv).dtype
    np.testing.assert_allclose(result, ref(av, bv), rtol=1e-6)


@pytest.mark.parametrize("op, ref", BINARY + COMPARE)
def test_binary_ops_with_a_scalar_on_either_side(randn, op, ref):
    a = te.placeholder((3, 4), name="a")
    av = randn(3, 4)
    for out, expected in ((op(a, 0.5), ref(av, np.float32(0.5))), (op(0.5, a), ref(np.float32(0.5), av))):
        assert out.op.tag == "elemwise"
        np.testing.assert_allclose(interpret(out, {"a": av}), expected, rtol=1e-6)


def test_power(randn):
    a, b = te.placeholder((2, 3), name="a"), te.placeholder((3,), name="b")
    av, bv = np.abs(randn(2, 3)) + 0.1, randn(3)
    np.testing.assert_allclose(interpret(nn.power(a, b), {"a": av, "b": bv}), av ** bv, rtol=1e-5)
    np.testing.assert_allclose(interpret(nn.power(a, 2.0), {"a": av}), av ** 2, rtol=1e-6)


def test_integer_arithmetic_keeps_the_dtype():
    a = te.placeholder((4,), "int32", name="a")
    out = nn.mul(nn.add(a, 3), 2)
    result = interpret(out, {"a": np.arange(4, dtype=np.int32)})
    assert out.dtype == "int32" and result.dtype == np.int32
    np.testing.assert_array_equal(result, (np.arange(4) + 3) * 2)


UNARY = [
    (nn.relu, lambda x: np.maximum(x, 0)),
    (nn.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    (nn.tanh, np.tanh),
    (nn.exp, np.exp),
    (nn.log, lambda x: np.log(np.abs(x))),
    (nn.sqrt, lambda x: np.sqrt(np.abs(x))),
    (nn.erf, _erf),
    (nn.gelu, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
]


@pytest.mark.parametrize("op, ref", UNARY)
def test_unary_ops(randn, op, ref):
    a = te.placeholder((3, 5), name="a")
    av = randn(3, 5)
    if op in (nn.log, nn.sqrt):
        av = np.abs(av)
    out = op(a)
    assert out.shape == (3, 5) and out.op.tag == "elemwise" and out.dtype == "float32"
    np.testing.assert_allclose(interpret(out, {"a": av}), ref(av), rtol=1e-5, atol=1e-6)


def test_leaky_relu(randn):
    a = te.placeholder((4, 4), name="a")
    av = randn(4, 4)
    out = nn.leaky_relu(a, alpha=0.2)
    assert out.op.attrs == {"alpha": 0.2}
    np.testing.assert_allclose(interpret(out, {"a": av}), np.where(av > 0, av, 0.2 * av), rtol=1e-6)


@pytest.mark.parametrize("lo, hi", [(-0.5, 0.5), (None, 0.0), (0.25, None)])
def test_clip(randn, lo, hi):
    a = te.placeholder((4, 4), name="a")
    av = randn(4, 4)
    out = nn.clip(a, lo, hi)
    np.testing.assert_array_equal(interpret(out, {"a": av}), np.clip(av, lo, hi))
    assert out.op.attrs == {"min_value": lo, "max_value": hi}


def test_cast_truncates_like_c():
    a = te.placeholder((5,), name="a")
    av = np.array([-2.7, -0.5, 0.0, 1.9, 3.5], dtype=np.float32)
    out = nn.cast(a, "int32")
    assert out.dtype == "int32" and out.op.attrs == {"dtype": "int32"}
    np.testing.assert_array_equal(interpret(out, {"a": av}), av.astype(np.int32))


def test_where_broadcasts_all_three(randn):
    cond = te.placeholder((3, 1), "bool", name="cond")
    a, b = te.placeholder((4,), name="a"), te.placeholder((3, 4), name="b")
    cv, av, bv = np.array([[True], [False], [True]]), randn(4), randn(3, 4)
    out = nn.where(cond, a, b)
    assert out.shape == (3, 4) and out.op.tag == "broadcast"
    np.testing.assert_array_equal(interpret(out, {"cond": cv, "a": av, "b": bv}), np.where(cv, av, bv))
    np.testing.assert_array_equal(interpret(nn.where(cond, a, 0.0), {"cond": cv, "a": av}), np.where(cv, av, 0))


def test_comparison_feeds_where(randn):
    a = te.placeholder((6,), name="a")
    av = randn(6)
    out = nn.where(nn.greater(a, 0.0), a, nn.mul(a, 0.1))
    np.testing.assert_allclose(interpret(out, {"a": av}), np.where(av > 0, av, av * np.float32(0.1)), rtol=1e-6)


@pytest.mark.parametrize("call, message", [
    (lambda a, i: nn.add(a, i), "operands must share a dtype, got a: float32, i: int32"),
    (lambda a, i: nn.div(i, i), "div: i must have a float dtype"),
    (lambda a, i: nn.exp(i), "exp: i must have a float dtype"),
    (lambda a, i: nn.add(i, 0.5), "the scalar 0.5 does not fit the int32 tensor"),
    (lambda a, i: nn.add(a, "x"), "operands must be tensors or numbers"),
    (lambda a, i: nn.add(1.0, 2.0), "needs at least one tensor operand"),
    (lambda a, i: nn.add(a, te.placeholder((4,), name="b")), "do not broadcast"),
    (lambda a, i: nn.cast(a, "float8"), "unknown dtype 'float8'"),
    (lambda a, i: nn.where(a, a, a), "the condition must be a bool tensor"),
    (lambda a, i: nn.clip(a, 1.0, -1.0), "min_value 1.0 is greater than max_value -1.0"),
])
def test_elementwise_errors(call, message):
    a, i = te.placeholder((2, 3), name="a"), te.placeholder((2, 3), "int32", name="i")
    with pytest.raises(ShapeError, match=message):
        call(a, i)
