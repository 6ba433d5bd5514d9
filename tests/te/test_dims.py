"""Dimensions that may be symbolic (te/dims.py): names that survive the trip to C and back, polynomials that the
runtime evaluates to the expression's value, bounds and representative values, and specialising a computation."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilegrad.errors import ShapeError
from tilegrad.runtime.dims import Extent
from tilegrad.te import expr as E
from tilegrad.te import tensor as te
from tilegrad.te.dims import (dim, dimension, divides, equal, formula, name_of, polynomial, product, quotient,
                              representative, upper, variables)
from tilegrad.te.evaluate import evaluate
from tilegrad.te.interpret import interpret
from tilegrad.te.specialize import specialize


@given(st.text(min_size=1, max_size=12))
def test_a_dimension_name_is_a_c_identifier_and_comes_back(name):
    v = dimension(name, 1, 4)
    assert v.name.isidentifier() and v.name.isascii()
    assert name_of(v) == name


SEQ, PAST = dimension("seq", 1, 512), dimension("past", 1, 64)


@given(st.integers(-3, 3), st.integers(-3, 3), st.integers(0, 4), st.integers(1, 512), st.integers(1, 64))
def test_the_runtime_formula_evaluates_as_its_expression_and_survives_json(a, b, c, seq, past):
    e = E.minimum((SEQ * a + PAST * b + c) * (SEQ + 1) + SEQ * PAST * 12 // 4, E.ceildiv(SEQ, 6) * 6 + PAST % 5)
    values = {SEQ.name: seq, PAST.name: past}
    extent = Extent(formula(e))
    assert extent.at(values) == evaluate(e, values)
    assert Extent.from_json(json.loads(json.dumps(extent.to_json()))) == extent


def test_a_polynomial_divides_by_a_monomial_exactly():
    terms, const = polynomial(SEQ * 12 + PAST * SEQ * 4 + 8)
    assert const == 8 and dict((k, c) for c, k in terms) == {(SEQ.name,): 12, tuple(sorted((PAST.name, SEQ.name))): 4}
    assert quotient(SEQ * 12 + 24, 12) == SEQ + 2 and quotient(SEQ * 5, 3) is None
    with pytest.raises(ShapeError, match="not a sum of products"):
        polynomial(SEQ // 3)


def test_equality_divisibility_and_bounds_hold_for_every_value():
    assert equal(SEQ * 32, product((SEQ, 2, 16))) and not equal(SEQ, 1) and equal(4, 4)
    assert divides(16, SEQ * 32) and not divides(3, SEQ * 32) and divides(4, 12)
    assert dim(SEQ * 32 // 32) == SEQ and dim(E.Const(5, E.INDEX)) == 5
    assert upper(SEQ * 12 + PAST) == 512 * 12 + 64
    assert variables([(1, SEQ), (PAST + SEQ, 3)]) == [SEQ, PAST]


def test_the_representative_value_is_a_power_of_two_near_the_middle_of_the_bounds():
    assert representative(SEQ) == 16 and representative(dimension("n", 100, 100)) == 100
    assert representative(dimension("n", 1, 2)) in (1, 2) and representative(SEQ * 2) == 32


def test_a_specialised_computation_computes_what_the_symbolic_one_does_at_those_values():
    x = te.placeholder((SEQ, 4), name="x")
    k = te.reduce_axis(SEQ, "k")
    y = te.compute((4,), lambda j: te.sum(x[k, j] * x[k, j], k), name="y")
    made = specialize([y], {SEQ.name: 7})
    assert made[x].shape == (7, 4) and made[y].shape == (4,)
    a = np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)
    np.testing.assert_allclose(interpret(made[y], {"x": a}), (a * a).sum(0), rtol=1e-5)


@given(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=3), st.integers(0, 3), st.integers(1, 7),
       st.booleans())
def test_a_reshape_around_a_dynamic_axis_reads_what_numpy_reshape_does(static, where, seq, merge):
    """Runs of axes with equal counts map onto each other (the dynamic axis alone, or merged with its neighbour);
    the grouped index, made concrete at `seq`, reads what NumPy's row-major reshape does."""
    from tilegrad.te import nn

    where = min(where, len(static))
    n = dimension("n", 1, 8)
    ins = (*static[:where], n, *static[where:])
    outs = (*static[:where], n * static[where], *static[where + 1:]) if merge and where < len(static) else \
        (*static[:where], n, int(np.prod(static[where:])))
    x = te.placeholder(ins, name="x")
    y = nn.reshape(x, outs)
    made = specialize([y], {n.name: seq})
    a = np.arange(int(np.prod([seq if d is n else d for d in ins]))).astype(np.float32)
    a = a.reshape([seq if d is n else d for d in ins])
    want = a.reshape(made[y].shape)
    np.testing.assert_array_equal(interpret(made[y], {"x": a}), want)
