import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret


def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax_ref(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def layer_norm_ref(x, gamma, beta, axis, eps):
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    return out * (1 if gamma is None else gamma) + (0 if beta is None else beta)


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("op, ref", [(nn.softmax, softmax_ref), (nn.log_softmax, log_softmax_ref)])
def test_softmax_family(randn, op, ref, axis):
    x = te.placeholder((3, 4, 5), name="x")
    xv = randn(3, 4, 5) * 4
    out = op(x, axis)
    assert out.op.tag == op.__name__ and out.op.attrs == {"axis": axis % 3, "row_axes": axis % 3}
    np.testing.assert_allclose(interpret(out, {"x": xv}), ref(xv.astype(np.float64), axis), rtol=1e-5, atol=1e-6)


def test_softmax_is_four_stages():
    x = te.placeholder((2, 6), name="x")
    out = nn.softmax(x, name="probs")
    exps, expsum = out.op.inputs
    assert [t.name for t in out.op.inputs] == ["probs_exp", "probs_expsum"]
    assert [t.name for t in exps.op.inputs] == ["x", "probs_max"]
    assert (expsum.op.tag, expsum.shape) == ("reduce", (2,))


def test_softmax_is_stable_for_large_inputs():
    x = te.placeholder((2, 3), name="x")
    xv = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]], dtype=np.float32)
    out = interpret([nn.softmax(x), nn.log_softmax(x)], {"x": xv})
    assert all(np.isfinite(o).all() for o in out)
    np.testing.assert_allclose(out[0], softmax_ref(xv.astype(np.float64), -1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], log_softmax_ref(xv.astype(np.float64), -1), rtol=1e-5, atol=1e-6)


def test_softmax_of_a_vector(randn):
    x = te.placeholder((7,), name="x")
    xv = randn(7)
    np.testing.assert_allclose(interpret(nn.softmax(x), {"x": xv}), softmax_ref(xv, 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis, gamma_shape, beta_shape", [
    (-1, (6,), (6,)),
    (-2, (4, 6), (4, 6)),
    (-2, (6,), None),
    (1, None, None),
    (0, (3, 1, 6), (1,)),
])
def test_layer_norm(randn, axis, gamma_shape, beta_shape):
    x = te.placeholder((3, 4, 6), name="x")
    gamma = te.placeholder(gamma_shape, name="gamma") if gamma_shape else None
    beta = te.placeholder(beta_shape, name="beta") if beta_shape else None
    values = {"x": randn(3, 4, 6) * 3 + 1}
    if gamma is not None:
        values["gamma"] = randn(*gamma_shape)
    if beta is not None:
        values["beta"] = randn(*beta_shape)
    out = nn.layer_norm(x, gamma, beta, axis=axis, epsilon=1e-3)
    expected = layer_norm_ref(values["x"].astype(np.float64), values.get("gamma"), values.get("beta"), axis % 3, 1e-3)
    np.testing.assert_allclose(interpret(out, values), expected, rtol=1e-5, atol=1e-5)
    assert out.op.tag == "layer_norm" and out.op.attrs == {"axis": axis % 3, "epsilon": 1e-3, "row_axes": axis % 3}


def test_layer_norm_statistics_are_reductions():
    x, g = te.placeholder((2, 8), name="x"), te.placeholder((8,), name="g")
    out = nn.layer_norm(x, g, name="ln")
    mean, var = (t for t in out.op.inputs if t.name in ("ln_mean", "ln_var"))
    assert mean.op.tag == var.op.tag == "reduce"
    assert mean.op.body.combiner == var.op.body.combiner == "sum"


@pytest.mark.parametrize("call, message", [
    (lambda x: nn.softmax(te.placeholder((2, 3), "int32", name="i")), "softmax: i must have a float dtype"),
    (lambda x: nn.log_softmax(x, 2), "log_softmax: axis 2 is out of range"),
    (lambda x: nn.layer_norm(x, te.placeholder((4,), name="g")), r"g of shape \(4,\) does not broadcast to .* \(3,\)"),
    (lambda x: nn.layer_norm(x, te.placeholder((1, 2, 3), name="g")), "does not broadcast"),
    (lambda x: nn.layer_norm(x, None, te.placeholder((3,), "float16", name="b")), "b has dtype float16"),
])
def test_normalization_errors(call, message):
    with pytest.raises(ShapeError, match=message):
        call(te.placeholder((2, 3), name="x"))
