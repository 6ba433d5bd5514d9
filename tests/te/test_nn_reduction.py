import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret

OPS = [(nn.reduce_sum, np.sum), (nn.reduce_mean, np.mean), (nn.reduce_max, np.max), (nn.reduce_min, np.min)]


@pytest.mark.parametrize("op, ref", OPS)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), [1, 3], (3, 1, 0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(randn, op, ref, axis, keepdims):
    x = te.placeholder((2, 3, 4, 5), name="x")
    xv = randn(2, 3, 4, 5)
    out = op(x, axis, keepdims=keepdims)
    expected = ref(xv.astype(np.float64), axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims)
    assert out.shape == expected.shape
    np.testing.assert_allclose(interpret(out, {"x": xv}), expected, rtol=1e-5, atol=1e-6)


def test_reduce_axes_are_named_after_the_input_axes():
    x = te.placeholder((2, 3, 4), name="x")
    out = nn.reduce_sum(x, (0, 2))
    assert out.op.tag == "reduce" and out.op.attrs == {"axis": (0, 2), "keepdims": False}
    assert [v.name for v in out.op.reduce_axes] == ["r0", "r2"]


def test_mean_is_a_sum_then_a_division():
    x = te.placeholder((2, 3), name="x")
    out = nn.reduce_mean(x, 1, keepdims=True)
    total = out.op.inputs[0]
    assert (total.name, total.op.tag, out.op.tag) == ("reduce_mean_sum", "reduce", "elemwise")


def test_integer_max_and_sum():
    x = te.placeholder((3, 4), "int32", name="x")
    xv = np.arange(12, dtype=np.int32).reshape(3, 4) - 6
    np.testing.assert_array_equal(interpret(nn.reduce_max(x, 1), {"x": xv}), xv.max(axis=1))
    np.testing.assert_array_equal(interpret(nn.reduce_sum(x, 0), {"x": xv}), xv.sum(axis=0))


@pytest.mark.parametrize("call, message", [
    (lambda x: nn.reduce_sum(x, 3), "reduce_sum: axis 3 is out of range for a tensor of rank 3"),
    (lambda x: nn.reduce_max(x, (1, -2)), r"reduce_max: axis \(1, -2\) names an axis twice"),
    (lambda x: nn.reduce_min(x, ()), "an empty axis list reduces nothing"),
    (lambda x: nn.reduce_mean(te.placeholder((2,), "int32", name="i")), "must have a float dtype"),
])
def test_reduction_errors(call, message):
    with pytest.raises(ShapeError, match=message):
        call(te.placeholder((2, 3, 4), name="x"))
