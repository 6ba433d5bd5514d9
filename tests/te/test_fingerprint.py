"""The exact identity of a computation: equal for the same computation built twice, different for any change
that could change its code, and never equal where a value has no exact spelling."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilegrad import te
from tilegrad.te import expr as E
from tilegrad.te.fingerprint import fingerprint
from tilegrad.te.nn import nchwc


def _matmul(k=16, scale=2.0, dtype="float32", tag="matmul", attrs=None, names=("A", "B")):
    a = te.placeholder((8, k), dtype, name=names[0])
    b = te.placeholder((k, 4), dtype, name=names[1])
    r = te.reduce_axis(k, "r")
    out = te.compute((8, 4), lambda i, j: te.sum(a[i, r] * b[r, j] * E.const(scale, dtype), axis=r), name="C",
                     tag=tag, attrs=attrs or {})
    return [a, b], [out]


def test_the_same_computation_built_twice_has_one_fingerprint():
    assert fingerprint(*_matmul()) == fingerprint(*_matmul())
    x, w = te.placeholder((1, 2, 7, 7, 8), name="X"), te.placeholder((2, 16, 3, 3, 8), name="W")
    x2, w2 = te.placeholder((1, 2, 7, 7, 8), name="X"), te.placeholder((2, 16, 3, 3, 8), name="W")
    assert fingerprint([x, w], [nchwc.conv2d_nchwc(x, w, 1, 1)]) == fingerprint([x2, w2],
                                                                               [nchwc.conv2d_nchwc(x2, w2, 1, 1)])


@pytest.mark.parametrize("change", [dict(scale=3.0), dict(scale=-0.0), dict(dtype="float64"), dict(tag="other"),
                                    dict(attrs={"block": 8}), dict(names=("A", "D"))])
def test_any_change_that_could_change_the_code_changes_it(change):
    assert fingerprint(*_matmul(**change)) != fingerprint(*_matmul())


def test_the_arguments_order_and_a_reduction_extent_count():
    inputs, outputs = _matmul()
    assert fingerprint(inputs[::-1], outputs) != fingerprint(inputs, outputs)
    x = te.placeholder((4, 8), name="X")

    def row_sum(n):  # over the first n columns: the extent is the reduction variable's bound, nowhere else
        r = te.reduce_axis(n, "r")
        return te.compute((4,), lambda i: te.sum(x[i, r], axis=r), name="S")

    assert fingerprint([x], [row_sum(8)]) != fingerprint([x], [row_sum(4)])


def test_inputs_of_one_name_are_told_apart_by_their_place():
    """Two operands both named "x": adding the first to twice the second is not adding the second to twice the
    first."""
    a, b = te.placeholder((4,), name="x"), te.placeholder((4,), name="x")
    one = te.compute((4,), lambda i: a[i] + b[i] * 2.0, name="y")
    other = te.compute((4,), lambda i: b[i] + a[i] * 2.0, name="y")
    assert fingerprint([a, b], [one]) != fingerprint([a, b], [other])


def test_an_attribute_without_an_exact_spelling_makes_it_unique():
    class Opaque:
        pass

    weights = np.arange(6.0)
    assert fingerprint(*_matmul(attrs={"w": weights})) == fingerprint(*_matmul(attrs={"w": weights.copy()}))
    assert fingerprint(*_matmul(attrs={"w": weights})) != fingerprint(*_matmul(attrs={"w": weights + 1}))
    assert fingerprint(*_matmul(attrs={"o": Opaque()})) != fingerprint(*_matmul(attrs={"o": Opaque()}))


@settings(max_examples=60, deadline=None)
@given(st.tuples(st.floats(allow_nan=False, width=32), st.integers(1, 6)),
       st.tuples(st.floats(allow_nan=False, width=32), st.integers(1, 6)))
def test_fingerprints_are_equal_exactly_when_the_computations_are(one, two):
    def build(scale, k):
        return fingerprint(*_matmul(k=k, scale=scale))

    same = np.float32(one[0]).tobytes() == np.float32(two[0]).tobytes() and one[1] == two[1]
    assert (build(*one) == build(*two)) == same
