import numpy as np
import pytest

from tilegrad import te
from tilegrad.errors import ShapeError
from tilegrad.te import nn
from tilegrad.te.interpret import interpret


def conv_ref(x, w, stride, pads, dilation, groups):
    """Forward convolution: for each kernel tap, a strided window of the padded input times the tap's weights."""
    nd = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *pads])
    out_channels, group_in, *kernel = w.shape
    out_sizes = [(xp.shape[2 + d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1 for d in range(nd)]
    out = np.zeros((x.shape[0], out_channels, *out_sizes))
    group_out = out_channels // groups
    for g in range(groups):
        xs = xp[:, g * group_in:(g + 1) * group_in]
        ws = w[g * group_out:(g + 1) * group_out]
        for taps in np.ndindex(*kernel):
            window = tuple(slice(t * dl, t * dl + s * (o - 1) + 1, s)
                           for t, dl, s, o in zip(taps, dilation, stride, out_sizes))
            out[:, g * group_out:(g + 1) * group_out] += np.einsum(
                "nc...,oc->no...", xs[(slice(None), slice(None), *window)], ws[(slice(None), slice(None), *taps)])
    return out


def conv_transpose_ref(x, w, stride, pads, output_padding, dilation, groups):
    """Transposed convolution: each input element scatters its tap-weighted values, then the padding is cut."""
    _, channels, *sizes = x.shape
    _, group_out, *kernel = w.shape
    full = [(n - 1) * s + d * (k - 1) + 1 + e for n, s, d, k, e in zip(sizes, stride, dilation, kernel, output_padding)]
    buf = np.zeros((x.shape[0], group_out * groups, *full))
    group_in = channels // groups
    for g in range(groups):
        xs = x[:, g * group_in:(g + 1) * group_in].astype(np.float64)
        for taps in np.ndindex(*kernel):
            target = tuple(slice(t * d, t * d + s * (n - 1) + 1, s)
                           for t, d, s, n in zip(taps, dilation, stride, sizes))
            buf[(slice(None), slice(g * group_out, (g + 1) * group_out), *target)] += np.einsum(
                "nc...,co->no...", xs, w[(slice(g * group_in, (g + 1) * group_in), slice(None), *taps)])
    crop = tuple(slice(lo, n - hi) for (lo, hi), n in zip(pads, full))
    return buf[(slice(None), slice(None), *crop)]


def _run(out, x, w):
    return interpret(out, {"x": x, "w": w})


CONV2D_CASES = [  # stride, padding as (before, after) pairs, dilation, groups
    ((1, 1), ((0, 0), (0, 0)), (1, 1), 1),
    ((2, 2), ((1, 1), (1, 1)), (1, 1), 1),
    ((2, 1), ((1, 2), (0, 1)), (1, 2), 2),
    ((1, 3), ((2, 2), (3, 1)), (2, 1), 4),
]


@pytest.mark.parametrize("stride, pads, dilation, groups", CONV2D_CASES)
def test_conv2d(randn, stride, pads, dilation, groups):
    x, w = te.placeholder((2, 4, 7, 6), name="x"), te.placeholder((8, 4 // groups, 3, 2), name="w")
    out = nn.conv2d(x, w, stride=stride, padding=pads, dilation=dilation, groups=groups)
    xv, wv = randn(*x.shape), randn(*w.shape)
    expected = conv_ref(xv, wv, stride, pads, dilation, groups)
    assert out.shape == expected.shape
    np.testing.assert_allclose(_run(out, xv, wv), expected, rtol=1e-5, atol=1e-5)
    assert out.op.tag == ("depthwise_conv2d" if groups == 4 else "conv2d")  # 4 groups of 4 channels: depthwise
    assert out.op.attrs == {"stride": stride, "padding": pads, "dilation": dilation, "groups": groups,
                            "kernel": (3, 2), "layout": "NCHW"}


def test_conv1d_with_stride_padding_dilation_and_groups(randn):
    x, w = te.placeholder((2, 6, 11), name="x"), te.placeholder((4, 3, 3), name="w")
    out = nn.conv1d(x, w, stride=2, padding=(2, 1), dilation=2, groups=2)
    xv, wv = randn(*x.shape), randn(*w.shape)
    expected = conv_ref(xv, wv, (2,), ((2, 1),), (2,), 2)
    np.testing.assert_allclose(_run(out, xv, wv), expected, rtol=1e-5, atol=1e-5)
    assert out.op.tag == "conv1d" and out.op.attrs["layout"] == "NCW"
    assert [v.name for v in out.op.axes] == ["n", "c", "w"]


def test_conv3d_with_stride_padding_dilation_and_groups(randn):
    x, w = te.placeholder((1, 4, 5, 6, 5), name="x"), te.placeholder((6, 2, 2, 3, 2), name="w")
    out = nn.conv3d(x, w, stride=(1, 2, 2), padding=1, dilation=(2, 1, 1), groups=2)
    xv, wv = randn(*x.shape), randn(*w.shape)
    expected = conv_ref(xv, wv, (1, 2, 2), ((1, 1),) * 3, (2, 1, 1), 2)
    np.testing.assert_allclose(_run(out, xv, wv), expected, rtol=1e-5, atol=1e-5)
    assert out.op.tag == "conv3d"
    assert [v.name for v in out.op.axes] == ["n", "c", "d", "h", "w"]
    assert [v.name for v in out.op.reduce_axes] == ["rc", "kd", "kh", "kw"]


def test_padding_accepts_onnx_order(randn):
    x, w = te.placeholder((1, 2, 5, 5), name="x"), te.placeholder((3, 2, 3, 3), name="w")
    out = nn.conv2d(x, w, padding=(1, 0, 2, 1))  # h_begin, w_begin, h_end, w_end
    assert out.op.attrs["padding"] == ((1, 2), (0, 1))
    xv, wv = randn(*x.shape), randn(*w.shape)
    np.testing.assert_allclose(_run(out, xv, wv), conv_ref(xv, wv, (1, 1), ((1, 2), (0, 1)), (1, 1), 1),
                               rtol=1e-5, atol=1e-5)


def test_unpadded_conv_reads_without_a_guard():
    x, w = te.placeholder((1, 2, 5, 5), name="x"), te.placeholder((3, 2, 3, 3), name="w")
    product = nn.conv2d(x, w).op.body.source
    assert type(product.a).__name__ == "Load" and type(product.b).__name__ == "Load"


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_conv2d(randn, multiplier):
    x, w = te.placeholder((2, 3, 6, 7), name="x"), te.placeholder((3 * multiplier, 1, 3, 3), name="w")
    out = nn.depthwise_conv2d(x, w, stride=2, padding=1)
    xv, wv = randn(*x.shape), randn(*w.shape)
    np.testing.assert_allclose(_run(out, xv, wv), conv_ref(xv, wv, (2, 2), ((1, 1), (1, 1)), (1, 1), 3),
                               rtol=1e-5, atol=1e-5)
    assert out.op.tag == "depthwise_conv2d"
    assert [v.name for v in out.op.reduce_axes] == ["kh", "kw"]  # one channel per group: nothing to sum over


def test_conv2d_with_one_channel_per_group_is_tagged_depthwise():
    x, w = te.placeholder((1, 4, 5, 5), name="x"), te.placeholder((4, 1, 3, 3), name="w")
    assert nn.conv2d(x, w, groups=4).op.tag == "depthwise_conv2d"


CONV2D_TRANSPOSE_CASES = [  # stride, padding, output_padding, dilation, groups
    ((1, 1), ((0, 0), (0, 0)), (0, 0), (1, 1), 1),
    ((2, 2), ((1, 1), (1, 1)), (1, 1), (1, 1), 1),
    ((2, 3), ((1, 1), (0, 0)), (1, 2), (1, 2), 2),
    ((3, 2), ((2, 0), (1, 2)), (2, 0), (2, 1), 1),
]


@pytest.mark.parametrize("stride, pads, output_padding, dilation, groups", CONV2D_TRANSPOSE_CASES)
def test_conv2d_transpose(randn, stride, pads, output_padding, dilation, groups):
    x, w = te.placeholder((2, 4, 5, 4), name="x"), te.placeholder((4, 3, 3, 2), name="w")
    out = nn.conv2d_transpose(x, w, stride=stride, padding=pads, output_padding=output_padding,
                              dilation=dilation, groups=groups)
    xv, wv = randn(*x.shape), randn(*w.shape)
    expected = conv_transpose_ref(xv, wv, stride, pads, output_padding, dilation, groups)
    assert out.shape == expected.shape
    np.testing.assert_allclose(_run(out, xv, wv), expected, rtol=1e-5, atol=1e-5)
    assert out.op.tag == "conv2d_transpose"
    assert out.op.attrs["output_padding"] == output_padding and out.op.attrs["groups"] == groups


def test_conv1d_transpose(randn):
    x, w = te.placeholder((2, 3, 6), name="x"), te.placeholder((3, 2, 4), name="w")
    out = nn.conv1d_transpose(x, w, stride=3, padding=2, output_padding=1)
    xv, wv = randn(*x.shape), randn(*w.shape)
    expected = conv_transpose_ref(xv, wv, (3,), ((2, 2),), (1,), (1,), 1)
    np.testing.assert_allclose(_run(out, xv, wv), expected, rtol=1e-5, atol=1e-5)


def test_conv3d_transpose(randn):
    x, w = te.placeholder((1, 4, 3, 4, 3), name="x"), te.placeholder((4, 1, 2, 3, 2), name="w")
    out = nn.conv3d_transpose(x, w, stride=2, padding=(0, 1, 1), output_padding=(1, 0, 1), groups=2)
    xv, wv = randn(*x.shape), randn(*w.shape)
    expected = conv_transpose_ref(xv, wv, (2, 2, 2), ((0, 0), (1, 1), (1, 1)), (1, 0, 1), (1, 1, 1), 2)
    assert out.shape == expected.shape == (1, 2, 7, 7, 5)
    np.testing.assert_allclose(_run(out, xv, wv), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape, w_shape, kwargs, message", [
    ((1, 4, 5, 5), (4, 2, 3, 3), {"groups": 3}, "4 input channels are not divisible by groups=3"),
    ((1, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}, "3 output channels are not divisible by groups=2"),
    ((1, 4, 5, 5), (4, 3, 3, 3), {}, "has 3 input channels per group, but x has 4 channels in 1 group"),
    ((1, 4, 5), (4, 4, 3, 3), {}, r"x must have rank 4 \(NCHW\)"),
    ((1, 4, 5, 5), (4, 4, 3), {}, "w must have rank 4"),
    ((1, 4, 2, 5), (4, 4, 3, 3), {}, "spatial dimension 0 has size 2"),
    ((1, 4, 5, 5), (4, 4, 3, 3), {"stride": 0}, "every stride must be at least 1"),
    ((1, 4, 5, 5), (4, 4, 3, 3), {"padding": (1, 2, 3)}, "padding must be an integer, 2 integers"),
    ((1, 4, 5, 5), (4, 4, 3, 3), {"padding": -1}, "padding must be non-negative"),
])
def test_conv2d_errors(x_shape, w_shape, kwargs, message):
    x, w = te.placeholder(x_shape, name="x"), te.placeholder(w_shape, name="w")
    with pytest.raises(ShapeError, match=message):
        nn.conv2d(x, w, **kwargs)


def test_conv_dtypes_must_agree():
    x, w = te.placeholder((1, 2, 5, 5), name="x"), te.placeholder((2, 2, 3, 3), "float16", name="w")
    with pytest.raises(ShapeError, match="operands must share a dtype, got x: float32, w: float16"):
        nn.conv2d(x, w)


def test_depthwise_weight_shape_is_checked():
    x, w = te.placeholder((1, 4, 5, 5), name="x"), te.placeholder((6, 1, 3, 3), name="w")
    with pytest.raises(ShapeError, match=r"shape \(C \* multiplier, 1, KH, KW\) with C = 4, got \(6, 1, 3, 3\)"):
        nn.depthwise_conv2d(x, w)


@pytest.mark.parametrize("w_shape, kwargs, message", [
    ((3, 2, 3, 3), {}, "w has 3 input channels .dimension 0. but x has 4"),
    ((4, 2, 3, 3), {"stride": 2, "output_padding": 2}, "output_padding .2, 2. must be smaller than the stride"),
    ((4, 2, 3, 3), {"padding": 4}, "leaves no output"),
])
def test_conv2d_transpose_errors(w_shape, kwargs, message):
    x, w = te.placeholder((1, 4, 3, 3), name="x"), te.placeholder(w_shape, name="w")
    with pytest.raises(ShapeError, match=message):
        nn.conv2d_transpose(x, w, **kwargs)
