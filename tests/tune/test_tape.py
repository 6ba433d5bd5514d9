"""The tape writer: folding, one row per distinct operation, and evaluation against NumPy."""

import math

import numpy as np
import pytest

from tilegrad.tune.felix.tape import TapeBuilder


def test_identities_and_constants_fold_and_repeats_share_a_row():
    t = TapeBuilder(("x", "y"))
    x, y = t.var("x"), t.var("y")
    assert t.add(x, 0.0) == x and t.sub(x, 0.0) == x and t.mul(1.0, x) == x and t.div(x, 1.0) == x
    assert t.value(t.mul(t.add(2.0, 1.0), 4.0)) == 12.0
    assert t.value(t.call(math.atan, t.const(1.0))) == math.atan(1.0)
    assert t.add(x, y) == t.add(x, y) != t.add(y, x)
    assert t.var("x") == x


def test_forward_and_backward_agree_with_numpy():
    t = TapeBuilder(("x", "y"))
    x, y = t.var("x"), t.var("y")
    s = t.call(math.sin, t.mul(x, y))
    f = t.div(t.sub(s, t.call(math.atan, y)), t.add(x, 2.0))
    tape = t.finish([f, s, f])
    values = np.random.default_rng(0).uniform(0.5, 3.0, (5, 2))
    a, b = values[:, 0], values[:, 1]
    rows = tape.forward(values)
    want_f = (np.sin(a * b) - np.arctan(b)) / (a + 2.0)
    np.testing.assert_allclose(rows[tape.outputs].T, np.stack([want_f, np.sin(a * b), want_f], axis=1))
    grad = tape.backward(rows, np.tile([1.0, 0.0, 1.0], (5, 1)))  # d(2 f)/d(x, y)
    df_da = (np.cos(a * b) * b) / (a + 2.0) - (np.sin(a * b) - np.arctan(b)) / (a + 2.0) ** 2
    df_db = (np.cos(a * b) * a - 1.0 / (1.0 + b * b)) / (a + 2.0)
    np.testing.assert_allclose(grad, 2 * np.stack([df_da, df_db], axis=1), rtol=1e-12)
    once = t.finish([f, t.const(7.0), s])  # each row one output, and a constant one that has no gradient
    grad = once.backward(once.forward(values), np.tile([1.0, 1.0, 0.0], (5, 1)))
    np.testing.assert_allclose(grad, np.stack([df_da, df_db], axis=1), rtol=1e-12)


def test_an_unknown_variable_is_an_error():
    with pytest.raises(ValueError, match="which is not among"):
        TapeBuilder(("x",)).var("z")
