"""The tape: one row per distinct node of the numbered formulas, and evaluation against NumPy."""

import math

import numpy as np
import pytest

from tilegrad.te import expr as E
from tilegrad.te.program import number
from tilegrad.tune.felix.tape import tape_of

X, Y = E.Var("x", "float64"), E.Var("y", "float64")


def test_repeats_share_a_row_and_constants_are_rows_of_their_own():
    f = (X * Y + 2.0) / (E.Var("x", "float64") * Y + 2.0)  # the denominator rebuilt: the same rows
    tape = tape_of(number([f, X * Y, E.const(3.0, "float64") * 4.0]), ("x", "y"))
    assert tape.n_rows == 2 + 2 + 3  # constants 2 and 12 (3 * 4 folded by te.expr), x, y; *, +, /
    assert tape.outputs[2] == 1 and tape.consts[1] == 12.0


def test_forward_and_backward_agree_with_numpy():
    s = E.Sin(X * Y)
    f = (s - E.Atan(Y)) / (X + 2.0)
    tape = tape_of(number([f, s, f]), ("x", "y"))
    values = np.random.default_rng(0).uniform(0.5, 3.0, (5, 2))
    a, b = values[:, 0], values[:, 1]
    rows = tape.forward(values)
    want_f = (np.sin(a * b) - np.arctan(b)) / (a + 2.0)
    np.testing.assert_allclose(rows[tape.outputs].T, np.stack([want_f, np.sin(a * b), want_f], axis=1))
    grad = tape.backward(rows, np.tile([1.0, 0.0, 1.0], (5, 1)))  # d(2 f)/d(x, y)
    df_da = (np.cos(a * b) * b) / (a + 2.0) - (np.sin(a * b) - np.arctan(b)) / (a + 2.0) ** 2
    df_db = (np.cos(a * b) * a - 1.0 / (1.0 + b * b)) / (a + 2.0)
    np.testing.assert_allclose(grad, 2 * np.stack([df_da, df_db], axis=1), rtol=1e-12)
    once = tape_of(number([f, E.const(7.0, "float64"), s]), ("x", "y"))  # a constant output has no gradient
    grad = once.backward(once.forward(values), np.tile([1.0, 1.0, 0.0], (5, 1)))
    np.testing.assert_allclose(grad, np.stack([df_da, df_db], axis=1), rtol=1e-12)
    assert math.isfinite(grad.sum())


def test_an_unknown_variable_or_operation_is_an_error():
    with pytest.raises(ValueError, match="which is not among"):
        tape_of(number([X + E.Var("z", "float64")]), ("x",))
    with pytest.raises(ValueError, match="no operation Exp"):
        tape_of(number([E.exp(X)]), ("x",))
