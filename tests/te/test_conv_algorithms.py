"""Winograd F(2x2, 3x3) and F(4x4, 3x3) and im2col + GEMM equal the direct convolution: the transform matrices
exactly, the computes (interpreted) on random shapes with padding and odd sizes, and the compiled kernels under
their default schedules, fused epilogue included."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import ShapeError
from tilegrad.ir.ops.layout import block_array, unblock_array
from tilegrad.schedule.defaults import default_schedule
from tilegrad.te.interpret import interpret
from tilegrad.te.nn import im2col, winograd

POINTS = {2: (0, 1, -1), 4: (0, 1, -1, 2, -2)}  # the finite interpolation points; the last one is infinity


def _direct(x, w, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1)):
    """Cross-correlation in float64, straight from the definition."""
    (sh, sw), (dh, dw) = stride, dilation
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i, j in itertools.product(range(kh), range(kw)):
        view = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
        out += np.einsum("nchw,oc->nohw", view, w[:, :, i, j].astype(np.float64))
    return out


def _matmul(a, b):
    return [[sum((Fraction(a[i][k]) * Fraction(b[k][j]) for k in range(len(b))), Fraction(0))
             for j in range(len(b[0]))] for i in range(len(a))]


def _transpose(a):
    return [list(r) for r in zip(*a)]


@pytest.mark.parametrize("m", [2, 4])
def test_the_matrices_compute_a_correlation_exactly(m):
    mats = winograd.matrices(m)
    at, g, bt = mats["AT"], mats["G"], mats["BT"]
    rng = np.random.default_rng(m)
    for _ in range(3):
        k = rng.integers(-9, 10, (3, 3)).tolist()
        d = rng.integers(-9, 10, (m + 2, m + 2)).tolist()
        u = _matmul(_matmul(g, k), _transpose(g))
        v = _matmul(_matmul(bt, d), _transpose(bt))
        y = _matmul(_matmul(at, [[u[i][j] * v[i][j] for j in range(m + 2)] for i in range(m + 2)]), _transpose(at))
        want = [[sum(d[r + i][c + j] * k[i][j] for i in range(3) for j in range(3)) for c in range(m)]
                for r in range(m)]
        assert y == want


def _sign(got, want) -> int:
    """+1 or -1 where `got` is `want` up to its sign (an assertion error otherwise)."""
    got, want = [Fraction(v) for v in got], [Fraction(v) for v in want]
    for sign in (1, -1):
        if got == [sign * v for v in want]:
            return sign
    raise AssertionError(f"{got} is not +-{want}")


@pytest.mark.parametrize("m", [2, 4])
def test_the_matrices_are_lavin_and_grays_from_their_points(m):
    """Cook-Toom from the points p_j: column j of A^T is p_j^i, row j of B^T the coefficients of the product of
    (x - p_l) over l != j, row j of G is p_j^k over the product of (p_j - p_l); the point at infinity adds the
    last column and rows. Lavin and Gray flip the signs of some of these; a point's three signs multiply to 1,
    which leaves the product unchanged."""
    p = POINTS[m]
    mats = winograd.matrices(m)
    for j in range(m + 2):
        infinite = j == len(p)
        others = p if infinite else p[:j] + p[j + 1:]
        column = [int(i == m - 1) for i in range(m)] if infinite else [Fraction(p[j]) ** i for i in range(m)]
        poly = np.polynomial.polynomial.polyfromroots(others)
        row = [round(float(v)) for v in poly] + [0] * (m + 2 - len(poly))
        scale = 1 if infinite else int(np.prod([p[j] - q for q in others]))
        g = [0, 0, 1] if infinite else [Fraction(p[j]) ** k / scale for k in range(3)]
        signs = (_sign([r[j] for r in mats["AT"]], column), _sign(mats["BT"][j], row), _sign(mats["G"][j], g))
        assert np.prod(signs) == 1, (j, signs)


@pytest.mark.parametrize("m", [2, 4])
def test_the_weight_transform_is_g_w_gt_and_the_compute_agrees(m):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    g = np.array(winograd.matrices(m)["G"], dtype=np.float64)
    u = winograd.transform_weight_numpy(w, m, block=4)
    assert u.shape == ((m + 2) ** 2, 2, 3, 4)
    for o, c in itertools.product(range(5), range(3)):
        want = g @ w[o, c].astype(np.float64) @ g.T
        np.testing.assert_allclose(u[:, o // 4, c, o % 4].reshape(m + 2, m + 2), want, rtol=1e-6, atol=1e-6)
    assert not u[:, 1, :, 1:].any()  # output channels past the last are zero
    wt = te.placeholder(w.shape, name="w")
    np.testing.assert_allclose(interpret(winograd.transform_weight(wt, m, block=4), {"w": w}), u, rtol=1e-6,
                               atol=1e-6)


conv_shapes = st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 5), st.integers(1, 9),
                        st.integers(1, 9), st.tuples(*[st.integers(0, 2)] * 4))


@given(shape=conv_shapes, m=st.sampled_from([2, 4]), bias=st.booleans())
def test_winograd_equals_the_direct_convolution(shape, m, bias):
    n, c, o, h, w, pads = shape
    if h + pads[0] + pads[2] < 3 or w + pads[1] + pads[3] < 3:
        return
    rng = np.random.default_rng(h * 10 + w)
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in ((n, c, h, w), (o, c, 3, 3), (o,)))
    x, wt, b = te.placeholder(xs.shape, name="x"), te.placeholder(ws.shape, name="w"), te.placeholder((o,), name="b")
    y = winograd.winograd_conv2d(x, wt, m, padding=pads, bias=b if bias else None, block=4)
    want = _direct(xs, ws, pads=pads) + (bs[:, None, None] if bias else 0)
    got = interpret(y, {"x": xs, "w": ws, "b": bs} if bias else {"x": xs, "w": ws})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@given(shape=conv_shapes, kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       stride=st.tuples(st.integers(1, 2), st.integers(1, 2)), dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)))
def test_im2col_equals_the_direct_convolution(shape, kernel, stride, dilation):
    n, c, o, h, w, pads = shape
    if h + pads[0] + pads[2] < dilation[0] * (kernel[0] - 1) + 1 or w + pads[1] + pads[3] < dilation[1] * (
            kernel[1] - 1) + 1:
        return
    rng = np.random.default_rng(h * 10 + w)
    xs, ws = rng.standard_normal((n, c, h, w)).astype(np.float32), rng.standard_normal((o, c, *kernel)).astype(
        np.float32)
    x, wt = te.placeholder(xs.shape, name="x"), te.placeholder(ws.shape, name="w")
    y = im2col.im2col_conv2d(x, wt, stride, pads, dilation)
    want = _direct(xs, ws, stride, pads, dilation)
    np.testing.assert_allclose(interpret(y, {"x": xs, "w": ws}), want, rtol=1e-4, atol=1e-5)


def _compiled(y, placeholders, arrays):
    return build(default_schedule(y), args=[*placeholders, y]).run(*arrays)


@pytest.mark.parametrize("m,shape,pads,block", [
    (2, (1, 5, 7, 9, 6), (1, 0, 2, 1), 16), (4, (2, 3, 17, 11, 13), (1, 1, 1, 1), 16),
    (4, (1, 16, 24, 8, 8), (0, 2, 1, 0), 16), (4, (1, 3, 12, 64, 64), (1, 1, 1, 1), 16),
    (2, (1, 6, 40, 13, 9), (1, 1, 1, 1), 32),  # two-vector blocks (AVX-512), the last one partly padding
    (4, (2, 5, 64, 10, 15), (1, 1, 1, 1), 32),
])
def test_compiled_winograd_matches(m, shape, pads, block):
    n, c, o, h, w = shape
    rng = np.random.default_rng(1)
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in ((n, c, h, w), (o, c, 3, 3), (o,)))
    us = winograd.transform_weight_numpy(ws, m, block)
    x, u, b = te.placeholder(xs.shape, name="x"), te.placeholder(us.shape, name="u"), te.placeholder((o,), name="b")
    y = winograd.winograd_conv2d_transformed(x, u, o, m, pads, bias=b)
    want = _direct(xs, ws, pads=pads) + bs[:, None, None]
    np.testing.assert_allclose(_compiled(y, [x, u, b], [xs, us, bs]), want, rtol=1e-4, atol=1e-4)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 11), o=st.integers(1, 19), h=st.integers(1, 9), w=st.integers(1, 10),
       m=st.sampled_from([2, 4]), pads=st.tuples(*[st.integers(0, 2)] * 4),
       in_block=st.sampled_from([None, 4, 8]), out_block=st.sampled_from([4, 8, 16]),
       u_block=st.sampled_from([4, 8, 16]), bias=st.booleans())
def test_compiled_blocked_winograd_matches_the_direct_convolution(n, c, o, h, w, m, pads, in_block, out_block,
                                                                  u_block, bias):
    """winograd_conv_nchwc's compute on odd shapes: NCHW or blocked input of any block, output blocks narrower or
    wider than the weights' (lanes past the GEMM's columns repeat its last), every tile tail."""
    pt, pl, pb, pr = pads
    assume(h + pt + pb >= 3 and w + pl + pr >= 3)
    rng = np.random.default_rng(n * 100 + c * 10 + o)
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in ((n, c, h, w), (o, c, 3, 3), (o,)))
    xin = xs if in_block is None else block_array(xs, in_block)
    us = winograd.transform_weight_numpy(ws, m, u_block)
    lanes = -(-o // out_block) * out_block
    packed = np.zeros(lanes, np.float32)
    packed[:o] = bs
    x, u = te.placeholder(xin.shape, name="x"), te.placeholder(us.shape, name="u")
    b = te.placeholder((lanes // out_block, out_block), name="b")
    y = winograd.winograd_conv2d_transformed(x, u, o, m, ((pt, pb), (pl, pr)), bias=b if bias else None,
                                             out_block=out_block)
    got = _compiled(y, [x, u, *([b] if bias else [])], [xin, us, *([packed.reshape(b.shape)] if bias else [])])
    want = _direct(xs, ws, pads=(pt, pl, pb, pr)) + (bs[:, None, None] if bias else 0)
    np.testing.assert_allclose(unblock_array(got)[:, :o], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,kernel,stride,pads,dilation", [
    ((1, 3, 10, 9, 13), (3, 3), (2, 1), (1, 0, 1, 2), (1, 1)),
    ((2, 4, 7, 11, 8), (2, 3), (1, 1), (2, 1, 0, 1), (2, 2)),
])
def test_compiled_im2col_matches(shape, kernel, stride, pads, dilation):
    n, c, o, h, w = shape
    rng = np.random.default_rng(2)
    xs, ws = rng.standard_normal((n, c, h, w)).astype(np.float32), rng.standard_normal((o, c, *kernel)).astype(
        np.float32)
    ow = (w + pads[1] + pads[3] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    wm = im2col.weight_matrix_numpy(ws, im2col.channel_tile(o, ow))
    x, wt = te.placeholder(xs.shape, name="x"), te.placeholder(wm.shape, name="wm")
    y = im2col.im2col_conv2d_packed(x, wt, o, kernel, stride, pads, dilation)
    np.testing.assert_allclose(_compiled(y, [x, wt], [xs, wm]), _direct(xs, ws, stride, pads, dilation),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("algorithm", ["winograd", "im2col"])
def test_compiled_with_a_fused_epilogue(algorithm):
    """relu(conv + residual): the copy-out is inlined into the epilogue, which the algorithm's rule schedules."""
    rng = np.random.default_rng(3)
    xs, ws, rs = (rng.standard_normal(s).astype(np.float32) for s in ((1, 8, 10, 10), (16, 8, 3, 3), (1, 16, 10, 10)))
    x, r = te.placeholder(xs.shape, name="x"), te.placeholder(rs.shape, name="r")
    if algorithm == "winograd":
        wd = winograd.transform_weight_numpy(ws, 4)
        wt = te.placeholder(wd.shape, name="u")
        y = winograd.winograd_conv2d_transformed(x, wt, 16, 4, 1)
    else:
        wd = im2col.weight_matrix_numpy(ws, im2col.channel_tile(16, 10))
        wt = te.placeholder(wd.shape, name="wm")
        y = im2col.im2col_conv2d_packed(x, wt, 16, (3, 3), 1, 1, 1)
    out = te.compute(y.shape, lambda n, c, h, w: te.expr.maximum(y[n, c, h, w] + r[n, c, h, w], 0.0), name="out",
                     tag="elemwise")
    sch = default_schedule(out)
    assert sch.state.stage(y.name).attach == "inline"
    got = build(sch, args=[x, wt, r, out]).run(xs, wd, rs)
    np.testing.assert_allclose(got, np.maximum(_direct(xs, ws, pads=(1, 1, 1, 1)) + rs, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("weight,stride,dilation,reason", [
    ((4, 3, 3, 3), 2, 1, "stride (2, 2)"),
    ((4, 3, 3, 3), 1, 2, "dilation (2, 2)"),
    ((4, 3, 5, 5), 1, 1, "a 5 x 5 kernel"),
])
def test_winograd_refuses_what_it_cannot_compute(weight, stride, dilation, reason):
    x, w = te.placeholder((1, 3, 12, 12), name="x"), te.placeholder(weight, name="w")
    with pytest.raises(ShapeError, match="winograd convolution does not apply to") as info:
        winograd.winograd_conv2d(x, w, 4, stride=stride, dilation=dilation)
    assert reason in str(info.value)
    with pytest.raises(ShapeError, match="no transform for output tiles of 3 x 3"):
        winograd.matrices(3)
