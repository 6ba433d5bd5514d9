"""Any valid schedule computes the same numbers: random traces on four workloads against NumPy."""

from __future__ import annotations

import numpy as np
from hypothesis import given

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.schedule import Trace, apply_trace

from .strategies import valid_schedules

RNG = np.random.default_rng(0)


def matmul():
    A = te.placeholder((13, 11), name="A")
    B = te.placeholder((11, 9), name="B")
    k = te.reduce_axis(11, "k")
    return [te.compute((13, 9), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]


def conv2d():
    X = te.placeholder((1, 3, 7, 6), name="X")
    W = te.placeholder((4, 3, 3, 3), name="W")
    P = te.compute((1, 3, 9, 8), lambda n, c, h, w: te.select(
        (h >= 1) & (h < 8) & (w >= 1) & (w < 7), X[n, c, h - 1, w - 1], 0.0), name="P")
    rc, rh, rw = te.reduce_axis(3, "rc"), te.reduce_axis(3, "rh"), te.reduce_axis(3, "rw")
    return [te.compute((1, 4, 7, 6), lambda n, f, y, x: te.sum(
        P[n, rc, y + rh, x + rw] * W[f, rc, rh, rw], axis=[rc, rh, rw]), name="Y")]


def row_max():
    A = te.placeholder((10, 23), name="A")
    k = te.reduce_axis(23, "k")
    return [te.compute((10,), lambda i: te.max(A[i, k], axis=k), name="M")]


def elementwise_chain():
    A = te.placeholder((5, 17), name="A")
    B = te.placeholder((17,), name="B")
    S = te.compute((5, 17), lambda i, j: A[i, j] + B[j], name="S")
    R = te.compute((5, 17), lambda i, j: te.maximum(S[i, j], 0.0), name="R")
    return [te.compute((5, 17), lambda i, j: R[i, j] * 2.0 + S[i, j], name="O")]




def _check(sch, make, reference):
    inputs = [RNG.standard_normal(t.shape).astype("float32") for t in sch.state.placeholders]
    kern = build(sch)
    got = kern.run(*inputs)
    want = reference(*inputs)
    try:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    except AssertionError:
        raise AssertionError(f"trace:\n{sch.trace}\nJSON: {sch.trace.to_json()}\nC:\n{kern.source}") from None
    # The trace replays to the same program.
    again = apply_trace(make(), Trace.from_json(sch.trace.to_json()))
    from tilegrad.loop import format_kernel, lower

    assert format_kernel(lower(again, "k")) == format_kernel(lower(sch.state, "k"))


def _conv_ref(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 4, 7, 6), dtype=np.float64)
    for rh in range(3):
        for rw in range(3):
            out += np.einsum("nchw,fc->nfhw", xp[:, :, rh:rh + 7, rw:rw + 6], w[:, :, rh, rw])
    return out


@given(valid_schedules(matmul))
def test_matmul(sch):
    _check(sch, matmul, lambda a, b: a @ b)


@given(valid_schedules(conv2d))
def test_conv2d(sch):
    _check(sch, conv2d, _conv_ref)


@given(valid_schedules(row_max))
def test_reduction(sch):
    _check(sch, row_max, lambda a: a.max(axis=1))


@given(valid_schedules(elementwise_chain))
def test_elementwise_chain(sch):
    def ref(a, b):
        s = a + b
        return np.maximum(s, 0) * 2 + s

    _check(sch, elementwise_chain, ref)
