"""The packed forms of matmul and conv2d compute exactly what the plain ones do, padding included."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret
from tilegrad.te.tensor import topo_order


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_packed_matmul_equals_matmul(ta, tb):
    rng = np.random.default_rng(0)
    a = te.placeholder((9, 13) if ta else (13, 9), name="A")
    b = te.placeholder((11, 9) if tb else (9, 11), name="B")
    av = rng.standard_normal(a.shape).astype("float32")
    bv = rng.standard_normal(b.shape).astype("float32")
    out = nn.packed_matmul(a, b, ta, tb, mr=6, nr=4, name="C")
    assert out.shape == (13, 11) and out.op.tag == "packed_matmul"
    want = (av.T if ta else av) @ (bv.T if tb else bv)
    np.testing.assert_allclose(interpret(out, {"A": av, "B": bv}), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 0, 1), ((1, 2), (2, 1), (2, 1))])
def test_packed_conv2d_equals_conv2d(stride, padding, dilation):
    rng = np.random.default_rng(1)
    x = te.placeholder((2, 3, 9, 8), name="X")
    w = te.placeholder((7, 3, 3, 2), name="W")
    xv = rng.standard_normal(x.shape).astype("float32")
    wv = rng.standard_normal(w.shape).astype("float32")
    packed = nn.packed_conv2d(x, w, stride, padding, dilation, block=4, name="P")
    plain = nn.conv2d(x, w, stride, padding, dilation, name="D")
    got, want = interpret([packed, plain], {"X": xv, "W": wv})
    assert packed.shape == plain.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_packed_ops_reject_bad_arguments():
    with pytest.raises(ShapeError, match="2 input channels per block but X gives each block 4"):
        nn.packed_conv2d(te.placeholder((1, 4, 5, 5), name="X"), te.placeholder((8, 2, 3, 3), name="W"))
    with pytest.raises(ShapeError, match="panel sizes must be positive"):
        nn.packed_matmul(te.placeholder((4, 3), name="A"), te.placeholder((3, 2), name="B"), mr=0)


@pytest.mark.parametrize("size, kernel, stride, pad, padded", [
    (56, 3, 2, 1, (57, 57)),     # ResNet-50's strided 3 x 3: no window reads the right pad, which is dropped
    (224, 7, 2, 3, (230, 230)),  # its stem: the last window reads part of the right pad, kept whole
    (28, 3, 1, 1, (30, 30)),
])
def test_the_padded_copy_drops_a_trailing_pad_no_window_reads(size, kernel, stride, pad, padded):
    x, w = te.placeholder((1, 3, size, size), name="x"), te.placeholder((8, 3, kernel, kernel), name="w")
    out = nn.packed_conv2d(x, w, stride=stride, padding=pad, block=8, name="y")
    copy = next(t for t in topo_order([out]) if t.name == "y_pad")
    assert tuple(copy.shape[2:]) == padded
    xv = np.random.default_rng(0).standard_normal(x.shape).astype("float32")
    wv = np.random.default_rng(1).standard_normal(w.shape).astype("float32")
    want = interpret(nn.conv2d(x, w, stride=stride, padding=pad), {"x": xv, "w": wv})
    np.testing.assert_allclose(interpret(out, {"x": xv, "w": wv}), want, rtol=1e-4, atol=1e-4)
