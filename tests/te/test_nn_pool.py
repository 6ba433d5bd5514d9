import itertools

import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret


def pool_ref(x, kind, kernel, stride, pads, dilation, ceil_mode, count_include_pad=True):
    """Pooling by explicit loops over output positions, with PyTorch's window and divisor rules."""
    sizes = x.shape[2:]
    out_sizes = []
    for n, k, s, (lo, hi), d in zip(sizes, kernel, stride, pads, dilation):
        room = n + lo + hi - d * (k - 1) - 1
        steps = -(-room // s) if ceil_mode else room // s
        if ceil_mode and steps * s >= n + lo:
            steps -= 1
        out_sizes.append(steps + 1)
    out = np.zeros((*x.shape[:2], *out_sizes))
    for pos in itertools.product(*(range(n) for n in out_sizes)):
        starts = [o * s - lo for o, s, (lo, _) in zip(pos, stride, pads)]
        taps = [[st + j * d for j in range(k)] for st, k, d in zip(starts, kernel, dilation)]
        inside = [[t for t in ts if 0 <= t < n] for ts, n in zip(taps, sizes)]
        window = x[(slice(None), slice(None), *np.ix_(*inside))].astype(np.float64)
        if kind == "max":
            out[(slice(None), slice(None), *pos)] = window.max(axis=tuple(range(2, x.ndim)))
            continue
        if count_include_pad:
            divisor = np.prod([sum(t < n + hi for t in ts) for ts, n, (_, hi) in zip(taps, sizes, pads)])
        else:
            divisor = np.prod([len(ts) for ts in inside])
        out[(slice(None), slice(None), *pos)] = window.sum(axis=tuple(range(2, x.ndim))) / divisor
    return out


MAX_POOL2D_CASES = [  # kernel, stride, pads, dilation, ceil_mode
    ((2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), False),
    ((3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), False),
    ((3, 3), (2, 2), ((0, 0), (0, 0)), (1, 1), True),
    ((2, 3), (2, 1), ((1, 0), (1, 1)), (2, 1), True),
    ((2, 2), (2, 2), ((1, 1), (1, 1)), (1, 1), True),  # ceil mode drops a window that would start in the padding
]


@pytest.mark.parametrize("kernel, stride, pads, dilation, ceil_mode", MAX_POOL2D_CASES)
def test_max_pool2d(randn, kernel, stride, pads, dilation, ceil_mode):
    x = te.placeholder((2, 3, 6, 5), name="x")
    out = nn.max_pool2d(x, kernel, stride, pads, dilation, ceil_mode)
    xv = randn(*x.shape)
    expected = pool_ref(xv, "max", kernel, stride, pads, dilation, ceil_mode)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(interpret(out, {"x": xv}), expected.astype(np.float32))
    assert out.op.tag == "pool"
    assert out.op.attrs == {"kernel": kernel, "stride": stride, "padding": pads, "dilation": dilation,
                            "ceil_mode": ceil_mode, "pool_type": "max", "layout": "NCHW"}
    assert [v.name for v in out.op.axes] == ["n", "c", "h", "w"]


def test_max_pool_stride_defaults_to_the_kernel(randn):
    x = te.placeholder((1, 2, 6, 6), name="x")
    out = nn.max_pool2d(x, 3)
    assert out.shape == (1, 2, 2, 2) and out.op.attrs["stride"] == (3, 3)


def test_max_pool_of_integers_pads_with_the_lowest_value():
    x = te.placeholder((1, 1, 3, 3), dtype="int32", name="x")
    out = nn.max_pool2d(x, 2, stride=1, padding=1)
    xv = -np.arange(9, dtype=np.int32).reshape(1, 1, 3, 3) - 5
    np.testing.assert_array_equal(interpret(out, {"x": xv}), pool_ref(xv, "max", (2, 2), (1, 1), ((1, 1),) * 2,
                                                                        (1, 1), False))


AVG_POOL2D_CASES = [  # kernel, stride, pads, ceil_mode, count_include_pad
    ((2, 2), (2, 2), ((0, 0), (0, 0)), False, True),
    ((3, 3), (2, 2), ((1, 1), (1, 1)), False, True),
    ((3, 3), (2, 2), ((1, 1), (1, 1)), False, False),
    ((3, 2), (2, 2), ((1, 1), (0, 1)), True, True),
    ((3, 2), (2, 2), ((1, 1), (0, 1)), True, False),
]


@pytest.mark.parametrize("kernel, stride, pads, ceil_mode, count_include_pad", AVG_POOL2D_CASES)
def test_avg_pool2d(randn, kernel, stride, pads, ceil_mode, count_include_pad):
    x = te.placeholder((2, 3, 6, 5), name="x")
    out = nn.avg_pool2d(x, kernel, stride, pads, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    xv = randn(*x.shape)
    expected = pool_ref(xv, "avg", kernel, stride, pads, (1, 1), ceil_mode, count_include_pad)
    assert out.shape == expected.shape
    np.testing.assert_allclose(interpret(out, {"x": xv}), expected, rtol=1e-5, atol=1e-6)
    sums = out.op.inputs[0]
    assert (sums.name, sums.op.tag, out.op.tag) == ("avg_pool2d_sum", "pool", "elemwise")
    assert out.op.attrs["count_include_pad"] == count_include_pad and out.op.attrs["pool_type"] == "avg"


def test_avg_pool_without_overhang_divides_by_a_constant():
    x = te.placeholder((1, 1, 6, 6), name="x")
    out = nn.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=True)
    assert type(out.op.body.b).__name__ == "Const" and out.op.body.b.value == 9.0


def test_avg_pool2d_with_dilation(randn):
    x = te.placeholder((1, 2, 7, 7), name="x")
    out = nn.avg_pool2d(x, 3, stride=2, padding=2, dilation=2, ceil_mode=True, count_include_pad=False)
    xv = randn(*x.shape)
    expected = pool_ref(xv, "avg", (3, 3), (2, 2), ((2, 2),) * 2, (2, 2), True, False)
    np.testing.assert_allclose(interpret(out, {"x": xv}), expected, rtol=1e-5, atol=1e-6)


def test_pool1d(randn):
    x = te.placeholder((2, 3, 9), name="x")
    xv = randn(*x.shape)
    mx = nn.max_pool1d(x, 3, stride=2, padding=1, ceil_mode=True)
    np.testing.assert_array_equal(interpret(mx, {"x": xv}),
                                  pool_ref(xv, "max", (3,), (2,), ((1, 1),), (1,), True).astype(np.float32))
    avg = nn.avg_pool1d(x, 4, stride=3, padding=2, count_include_pad=False)
    np.testing.assert_allclose(interpret(avg, {"x": xv}),
                               pool_ref(xv, "avg", (4,), (3,), ((2, 2),), (1,), False, False), rtol=1e-5, atol=1e-6)
    assert [v.name for v in avg.op.axes] == ["n", "c", "w"]


def test_pool3d(randn):
    x = te.placeholder((1, 2, 5, 4, 6), name="x")
    xv = randn(*x.shape)
    mx = nn.max_pool3d(x, (2, 2, 3), stride=(1, 2, 2), padding=(1, 0, 1))
    expected = pool_ref(xv, "max", (2, 2, 3), (1, 2, 2), ((1, 1), (0, 0), (1, 1)), (1, 1, 1), False)
    np.testing.assert_array_equal(interpret(mx, {"x": xv}), expected.astype(np.float32))
    avg = nn.avg_pool3d(x, 2, padding=1, ceil_mode=True)
    expected = pool_ref(xv, "avg", (2, 2, 2), (2, 2, 2), ((1, 1),) * 3, (1, 1, 1), True, True)
    np.testing.assert_allclose(interpret(avg, {"x": xv}), expected, rtol=1e-5, atol=1e-6)


def test_global_pools(randn):
    x = te.placeholder((2, 3, 4, 5), name="x")
    xv = randn(*x.shape)
    avg, mx = nn.global_avg_pool(x), nn.global_max_pool(x)
    assert avg.shape == mx.shape == (2, 3, 1, 1)
    np.testing.assert_allclose(interpret(avg, {"x": xv}), xv.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(interpret(mx, {"x": xv}), xv.max(axis=(2, 3), keepdims=True))


@pytest.mark.parametrize("call, message", [
    (lambda x: nn.max_pool2d(x, 2, padding=2), "window 0 of spatial dimension 0 lies wholly in the padding"),
    (lambda x: nn.max_pool2d(x, 7), "spatial dimension 0 has size 6"),
    (lambda x: nn.max_pool2d(x, (2, 2, 2)), "kernel must be an integer or 2 integers"),
    (lambda x: nn.max_pool1d(x, 2), r"x must have rank 3 \(NCW\)"),
    (lambda x: nn.avg_pool2d(x, 2, stride=0), "every stride must be at least 1"),
    (lambda x: nn.global_avg_pool(te.placeholder((2, 3), name="v")), "at least one spatial dimension"),
])
def test_pool_errors(call, message):
    with pytest.raises(ShapeError, match=message):
        call(te.placeholder((1, 2, 6, 6), name="x"))


def test_avg_pool_needs_floats():
    with pytest.raises(ShapeError, match="must have a float dtype to be averaged"):
        nn.avg_pool2d(te.placeholder((1, 2, 6, 6), "int32", name="x"), 2)
