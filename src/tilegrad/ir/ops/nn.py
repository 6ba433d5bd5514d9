"""Neural-network ops: convolutions, matrix products, pooling, softmax and normalisations.

Attributes follow ONNX, spelled in snake case: `pads` lists all the begins then all the ends, strides and
dilations default to 1, and an average excludes the padding unless `count_include_pad` is set. Window ops take
channels-first layouts with 1 to 3 spatial axes and pick te.nn's 1-, 2- or 3-d compute by the rank of the input.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers

import numpy as np

from ...errors import ShapeError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ..registry import BROADCAST, OUT_FUSABLE, REDUCTION, Sample, TensorType, declare

_CONV = {1: nn.conv1d, 2: nn.conv2d, 3: nn.conv3d}
_CONV_TRANSPOSE = {1: nn.conv1d_transpose, 2: nn.conv2d_transpose, 3: nn.conv3d_transpose}
_MAX_POOL = {1: nn.max_pool1d, 2: nn.max_pool2d, 3: nn.max_pool3d}
_AVG_POOL = {1: nn.avg_pool1d, 2: nn.avg_pool2d, 3: nn.avg_pool3d}
_WINDOW_ATTRS = {"strides": None, "pads": None, "dilations": None}


def _type(t: te.Tensor | None) -> TensorType | None:
    """The type of a te tensor, or None for an absent optional input."""
    return None if t is None else TensorType(t.shape, t.dtype)


def _same_dtype(*types: TensorType | None) -> str:
    """The one dtype of the given operands (None marks an absent optional input)."""
    dtypes = {t.dtype for t in types if t is not None}
    if len(dtypes) != 1:
        raise ShapeError(f"operands have different dtypes {sorted(dtypes)}; insert a Cast")
    return dtypes.pop()


def _float_dtype(*types: TensorType | None) -> str:
    dtype = _same_dtype(*types)
    if not E.is_float(dtype):
        raise ShapeError(f"operands must have a float dtype, got {dtype}; insert a Cast")
    return dtype


def _normalize_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, numbers.Integral) or not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis!r} is out of range for rank {ndim}")
    return int(axis) % ndim


# ---- window arithmetic, shared by the type rules, the references and the computes ----

@dataclasses.dataclass(frozen=True)
class _Window:
    strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]  # (begin, end) per spatial axis
    dilations: tuple[int, ...]


def _int_list(value, nd: int, what: str, default: int, minimum: int) -> tuple[int, ...]:
    if value is None:
        return (default,) * nd
    values = tuple(value)
    if len(values) != nd or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise ShapeError(f"{what} must be {nd} integers (one per spatial axis), got {value!r}")
    if any(v < minimum for v in values):
        raise ShapeError(f"every entry of {what} must be at least {minimum}, got {value!r}")
    return tuple(int(v) for v in values)


def _window(nd: int, strides, pads, dilations) -> _Window:
    flat = _int_list(pads, 2 * nd, "pads (all begins, then all ends)", 0, 0)
    return _Window(_int_list(strides, nd, "strides", 1, 1), tuple(zip(flat[:nd], flat[nd:])),
                   _int_list(dilations, nd, "dilations", 1, 1))


def _spatial_rank(x: TensorType) -> int:
    nd = len(x.shape) - 2
    if not 1 <= nd <= 3:
        raise ShapeError(f"x must be (N, C, W), (N, C, H, W) or (N, C, D, H, W), got shape {x.shape}")
    return nd


def _extents(sizes, kernel, win: _Window, ceil_mode: bool = False) -> tuple[int, ...]:
    """Window positions per spatial axis; with `ceil_mode` a last partial window counts if it starts inside the
    input or its leading padding (PyTorch's and ONNX's rule)."""
    out = []
    for d, (size, k, s, p, dl) in enumerate(zip(sizes, kernel, win.strides, win.pads, win.dilations)):
        room = size + p[0] + p[1] - (dl * (k - 1) + 1)
        if room < 0:
            raise ShapeError(f"spatial axis {d} has size {size} and pads {p}, smaller than the dilated kernel "
                             f"extent {dl * (k - 1) + 1}")
        steps = -(-room // s) if ceil_mode else room // s
        if ceil_mode and steps * s >= size + p[0]:
            steps -= 1
        out.append(steps + 1)
    return tuple(out)


def _padded(a: np.ndarray, kernel, win: _Window, out_sizes, fill, overhang) -> np.ndarray:
    """`a` with its spatial (last) axes padded by `fill` per `win.pads`, then by `overhang` up to the reach of the
    last window (which ceil_mode can take past the padding)."""
    lead = [(0, 0)] * (a.ndim - len(kernel))
    a = np.pad(a, lead + list(win.pads), constant_values=fill)
    reach = [(o - 1) * s + d * (k - 1) + 1 for o, s, d, k in zip(out_sizes, win.strides, win.dilations, kernel)]
    extra = [(0, max(0, r - n)) for r, n in zip(reach, a.shape[len(lead):])]
    return np.pad(a, lead + extra, constant_values=overhang)


def _tap_views(a: np.ndarray, kernel, win: _Window, out_sizes):
    """For each kernel tap, the strided view of padded `a` that the tap reads at every output position."""
    for taps in np.ndindex(*kernel):
        yield taps, a[(..., *(slice(k * d, k * d + s * (o - 1) + 1, s)
                              for k, d, s, o in zip(taps, win.dilations, win.strides, out_sizes)))]


def _add_channel_bias(out: te.Tensor, bias: te.Tensor | None, name: str) -> te.Tensor:
    if bias is None:
        return out
    return te.compute(out.shape, lambda *i: out[i] + bias[i[1]], name=name, tag="broadcast")


# ---- conv and conv_transpose ----

def _check_weight(x: TensorType, w: TensorType, group, layout: str) -> None:
    if len(w.shape) != len(x.shape):
        raise ShapeError(f"the weight must have layout ({layout}) of rank {len(x.shape)} like x, got shape {w.shape}")
    if not isinstance(group, numbers.Integral) or group < 1:
        raise ShapeError(f"group must be a positive integer, got {group!r}")


def _check_channels(group: int, in_channels: int, out_channels: int, bias: TensorType | None) -> None:
    if in_channels % group or out_channels % group:
        raise ShapeError(f"group={group} must divide both the {in_channels} input and the {out_channels} output "
                         f"channels")
    if bias is not None and bias.shape != (out_channels,):
        raise ShapeError(f"the bias must have shape ({out_channels},), one per output channel, got {bias.shape}")


def _conv_type(x, w, bias=None, *, strides, pads, dilations, group):
    nd = _spatial_rank(x)
    dtype = _float_dtype(x, w, bias)
    _check_weight(x, w, group, "M, C / group, *kernel")
    channels, (out_channels, per_group) = x.shape[1], w.shape[:2]
    _check_channels(group, channels, out_channels, bias)
    if per_group * group != channels:
        raise ShapeError(f"the weight has {per_group} input channels per group, but x has {channels} channels in "
                         f"{group} group(s), which needs {channels // group}")
    out = _extents(x.shape[2:], w.shape[2:], _window(nd, strides, pads, dilations))
    return [TensorType((x.shape[0], out_channels, *out), dtype)]


def _conv_ref(x, w, bias=None, *, strides, pads, dilations, group):
    nd = x.ndim - 2
    win = _window(nd, strides, pads, dilations)
    out_sizes = _extents(x.shape[2:], w.shape[2:], win)
    (n, c), m = x.shape[:2], w.shape[0]
    xp = _padded(x.astype(np.float64), w.shape[2:], win, out_sizes, 0, 0)
    xg = xp.reshape(n, group, c // group, *xp.shape[2:])
    wg = w.astype(np.float64).reshape(group, m // group, c // group, *w.shape[2:])
    y = np.zeros((n, group, m // group, *out_sizes))
    for taps, view in _tap_views(xg, w.shape[2:], win, out_sizes):
        y += np.einsum("ngc...,goc->ngo...", view, wg[(..., *taps)])
    y = y.reshape(n, m, *out_sizes)
    if bias is not None:
        y += bias.reshape(m, *[1] * nd)
    return y.astype(x.dtype)


def _conv_te(x, w, bias=None, *, strides, pads, dilations, group):
    _conv_type(_type(x), _type(w), _type(bias), strides=strides, pads=pads, dilations=dilations,
               group=group)
    win = _window(x.ndim - 2, strides, pads, dilations)
    out = _CONV[x.ndim - 2](x, w, win.strides, win.pads, win.dilations, int(group))
    return _add_channel_bias(out, bias, "conv_bias")


def _conv_transpose_sizes(x, w, win: _Window, output_padding):
    """The output padding and the output's spatial extents, from the shapes of x and w (types or arrays)."""
    extra = _int_list(output_padding, len(win.strides), "output_padding", 0, 0)
    if any(e >= max(s, d) for e, s, d in zip(extra, win.strides, win.dilations)):
        raise ShapeError(f"output_padding {list(extra)} must be smaller than the stride {list(win.strides)} or the "
                         f"dilation {list(win.dilations)} along each axis")
    out = tuple((n - 1) * s - p[0] - p[1] + d * (k - 1) + e + 1
                for n, s, p, d, k, e in zip(x.shape[2:], win.strides, win.pads, win.dilations, w.shape[2:], extra))
    if min(out) <= 0:
        raise ShapeError(f"pads {list(win.pads)} leave no output (output extents {out})")
    return extra, out


def _conv_transpose_type(x, w, bias=None, *, strides, pads, dilations, group, output_padding):
    nd = _spatial_rank(x)
    dtype = _float_dtype(x, w, bias)
    _check_weight(x, w, group, "C, M / group, *kernel")
    if w.shape[0] != x.shape[1]:
        raise ShapeError(f"the weight has {w.shape[0]} input channels (axis 0), but x has {x.shape[1]}")
    out_channels = w.shape[1] * group
    _check_channels(group, x.shape[1], out_channels, bias)
    _, out = _conv_transpose_sizes(x, w, _window(nd, strides, pads, dilations), output_padding)
    return [TensorType((x.shape[0], out_channels, *out), dtype)]


def _conv_transpose_ref(x, w, bias=None, *, strides, pads, dilations, group, output_padding):
    nd = x.ndim - 2
    win = _window(nd, strides, pads, dilations)
    _, out_sizes = _conv_transpose_sizes(x, w, win, output_padding)
    (n, c, *sizes), (_, per_group, *kernel) = x.shape, w.shape
    full = [(i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip(sizes, win.strides, win.dilations, kernel)]
    room = [max(f, p[0] + o) for f, p, o in zip(full, win.pads, out_sizes)]
    y = np.zeros((n, group, per_group, *room))
    xg = x.astype(np.float64).reshape(n, group, c // group, *sizes)
    wg = w.astype(np.float64).reshape(group, c // group, per_group, *kernel)
    for taps in np.ndindex(*kernel):
        scatter = tuple(slice(k * d, k * d + s * (i - 1) + 1, s)
                        for k, d, s, i in zip(taps, win.dilations, win.strides, sizes))
        y[(..., *scatter)] += np.einsum("ngc...,gco->ngo...", xg, wg[(..., *taps)])
    y = y[(..., *(slice(p[0], p[0] + o) for p, o in zip(win.pads, out_sizes)))].reshape(n, -1, *out_sizes)
    if bias is not None:
        y += bias.reshape(-1, *[1] * nd)
    return y.astype(x.dtype)


def _conv_transpose_te(x, w, bias=None, *, strides, pads, dilations, group, output_padding):
    _conv_transpose_type(_type(x), _type(w), _type(bias), strides=strides, pads=pads,
                         dilations=dilations, group=group, output_padding=output_padding)
    win = _window(x.ndim - 2, strides, pads, dilations)
    extra, _ = _conv_transpose_sizes(_type(x), _type(w), win, output_padding)
    out = _CONV_TRANSPOSE[x.ndim - 2](x, w, win.strides, win.pads, extra, win.dilations, int(group))
    return _add_channel_bias(out, bias, "conv_transpose_bias")


_CONV_ATTRS = {**_WINDOW_ATTRS, "group": 1}
declare("conv", kind=OUT_FUSABLE, attrs=_CONV_ATTRS, infer=_conv_type, reference=_conv_ref, compute=_conv_te,
        num_inputs=(2, 3), samples=(
            Sample((((1, 4, 9, 8), "float32"), ((6, 4, 3, 3), "float32"), ((6,), "float32")),
                   {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
            Sample((((1, 4, 8, 7), "float32"), ((8, 1, 3, 3), "float32")),
                   {"pads": [2, 1, 2, 1], "dilations": [2, 1], "group": 4}),
            Sample((((2, 4, 11), "float32"), ((6, 2, 3), "float32"), ((6,), "float32")),
                   {"strides": [2], "pads": [1, 0], "group": 2}),
        ))
declare("conv_transpose", kind=OUT_FUSABLE, attrs={**_CONV_ATTRS, "output_padding": None}, infer=_conv_transpose_type,
        reference=_conv_transpose_ref, compute=_conv_transpose_te, num_inputs=(2, 3), samples=(
            Sample((((1, 4, 5, 4), "float32"), ((4, 3, 3, 3), "float32"), ((3,), "float32")),
                   {"strides": [2, 2], "pads": [1, 0, 1, 1], "output_padding": [1, 0]}),
            Sample((((2, 4, 6), "float32"), ((4, 2, 3), "float32")), {"dilations": [2], "group": 2}),
            Sample((((1, 2, 3, 3, 2), "float32"), ((2, 2, 2, 2, 2), "float32")), {"strides": [2, 1, 2]}),
        ))


# ---- matmul and gemm ----

def _matmul_type(a, b):
    """NumPy's matmul rule: a 1-d operand is a row (left) or a column (right) that the output drops."""
    dtype = _same_dtype(a, b)
    if not a.shape or not b.shape:
        raise ShapeError("matmul needs operands of rank 1 or more; a scalar product is a mul")
    a2 = (1, *a.shape) if len(a.shape) == 1 else a.shape
    b2 = (*b.shape, 1) if len(b.shape) == 1 else b.shape
    if a2[-1] != b2[-2]:
        raise ShapeError(f"the inner extents differ: a has {a2[-1]} columns, b has {b2[-2]} rows")
    batch = nn.broadcast_shape(a2[:-2], b2[:-2])
    rows = (a2[-2],) if len(a.shape) > 1 else ()
    cols = (b2[-1],) if len(b.shape) > 1 else ()
    return [TensorType((*batch, *rows, *cols), dtype)]


def _matmul_ref(a, b):
    wide = np.float64 if np.issubdtype(a.dtype, np.floating) else np.int64
    return np.matmul(a.astype(wide), b.astype(wide)).astype(a.dtype)


def _matmul_te(a, b):
    (out,) = _matmul_type(_type(a), _type(b))
    lhs = nn.reshape(a, (1, *a.shape), name="matmul_row") if a.ndim == 1 else a
    rhs = nn.reshape(b, (*b.shape, 1), name="matmul_column") if b.ndim == 1 else b
    product = nn.matmul(lhs, rhs) if lhs.ndim == rhs.ndim == 2 else nn.batch_matmul(lhs, rhs)
    return product if product.shape == out.shape else nn.reshape(product, out.shape, name="matmul_squeeze")


def _gemm_type(a, b, c=None, *, alpha, beta, trans_a, trans_b):
    dtype = _same_dtype(a, b, c)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"A and B must be matrices, got shapes {a.shape} and {b.shape}")
    m, k = a.shape[::-1] if trans_a else a.shape
    kb, n = b.shape[::-1] if trans_b else b.shape
    if k != kb:
        raise ShapeError(f"the inner extents differ: op(A) is {m} x {k}, op(B) is {kb} x {n} "
                         f"(trans_a={trans_a}, trans_b={trans_b})")
    if c is not None and not _broadcasts_to(c.shape, (m, n)):
        raise ShapeError(f"C of shape {c.shape} does not broadcast to the output shape {(m, n)}")
    return [TensorType((m, n), dtype)]


def _broadcasts_to(shape, target) -> bool:
    try:
        return len(shape) <= len(target) and nn.broadcast_shape(shape, target) == tuple(target)
    except ShapeError:
        return False


def _gemm_ref(a, b, c=None, *, alpha, beta, trans_a, trans_b):
    product = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    return (alpha * product + (0 if c is None else beta * c.astype(np.float64))).astype(a.dtype)


def _gemm_te(a, b, c=None, *, alpha, beta, trans_a, trans_b):
    _gemm_type(_type(a), _type(b), _type(c), alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    plain = alpha == 1 and c is None
    product = nn.matmul(a, b, transpose_a=bool(trans_a), transpose_b=bool(trans_b),
                        name="gemm" if plain else "gemm_matmul")
    if plain:
        return product

    def body(i, j):
        out = product[i, j] if alpha == 1 else product[i, j] * alpha
        if c is None:
            return out
        shift = c[nn.broadcast_index(c.shape, (i, j))]
        return out + (shift if beta == 1 else shift * beta)

    return te.compute(product.shape, body, name="gemm", tag="broadcast" if c is not None else "elemwise")


declare("matmul", kind=OUT_FUSABLE, infer=_matmul_type, reference=_matmul_ref, compute=_matmul_te, num_inputs=2,
        samples=(Sample((((5,), "float32"), ((5,), "float32"))),
                 Sample((((5, 7), "float32"), ((7, 3), "float32"))),
                 Sample((((2, 1, 4, 6), "float32"), ((3, 6, 5), "float32"))),
                 Sample((((2, 4, 6), "float32"), ((6,), "float32")))))
declare("gemm", kind=OUT_FUSABLE, attrs={"alpha": 1.0, "beta": 1.0, "trans_a": 0, "trans_b": 0},
        infer=_gemm_type, reference=_gemm_ref, compute=_gemm_te, num_inputs=(2, 3),
        samples=(Sample((((4, 6), "float32"), ((6, 5), "float32"), ((5,), "float32")), {"alpha": 0.5, "beta": 2.0}),
                 Sample((((6, 4), "float32"), ((5, 6), "float32"), ((4, 1), "float32")),
                        {"trans_a": 1, "trans_b": 1}),
                 Sample((((3, 7), "float32"), ((7, 2), "float32")))))


# ---- batch norm (inference) ----

def _batch_norm_type(x, scale, bias, mean, var, *, epsilon):
    if len(x.shape) < 2:
        raise ShapeError(f"x must be (N, C, ...) with at least 2 axes, got shape {x.shape}")
    dtype = _float_dtype(x, scale, bias, mean, var)
    channels = x.shape[1]
    for what, t in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var)):
        if t.shape != (channels,):
            raise ShapeError(f"{what} must have shape ({channels},), one per channel of x, got {t.shape}")
    return [TensorType(x.shape, dtype)]


def _batch_norm_ref(x, scale, bias, mean, var, *, epsilon):
    def per_channel(p):
        return p.astype(np.float64).reshape(-1, *[1] * (x.ndim - 2))

    y = (x - per_channel(mean)) / np.sqrt(per_channel(var) + epsilon) * per_channel(scale) + per_channel(bias)
    return y.astype(x.dtype)


def _batch_norm_te(x, scale, bias, mean, var, *, epsilon):
    _batch_norm_type(*map(_type, (x, scale, bias, mean, var)), epsilon=epsilon)

    def body(*i):
        c = i[1]
        return (x[i] - mean[c]) * E.rsqrt(var[c] + epsilon) * scale[c] + bias[c]

    return te.compute(x.shape, body, name="batch_norm", tag="broadcast", attrs={"epsilon": epsilon})


declare("batch_norm", kind=BROADCAST, attrs={"epsilon": 1e-5}, infer=_batch_norm_type, reference=_batch_norm_ref,
        compute=_batch_norm_te, num_inputs=5,
        samples=(Sample((((2, 3, 4, 5), "float32"),) + (((3,), "float32"),) * 4),
                 Sample((((4, 6), "float32"),) + (((6,), "float32"),) * 4, {"epsilon": 1e-3})))


# ---- pooling ----

def _pool_window(x: TensorType, kernel_shape, strides, pads, dilations, ceil_mode):
    """The kernel, the window and the output's spatial extents of a pool over `x`."""
    nd = _spatial_rank(x)
    if kernel_shape is None:
        raise ShapeError(f"kernel_shape is required: the window's extent along each of the {nd} spatial axes")
    kernel = _int_list(kernel_shape, nd, "kernel_shape", 1, 1)
    win = _window(nd, strides, pads, dilations)
    out = _extents(x.shape[2:], kernel, win, bool(ceil_mode))
    for d, (size, k, s, p, dl, n) in enumerate(zip(x.shape[2:], kernel, win.strides, win.pads, win.dilations, out)):
        for o in range(n):
            if not any(0 <= o * s - p[0] + j * dl < size for j in range(k)):
                raise ShapeError(f"window {o} of spatial axis {d} lies wholly in the padding {p}; use less padding "
                                 f"than the kernel {list(kernel)}")
    return kernel, win, out


def _max_pool_type(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    _, _, out = _pool_window(x, kernel_shape, strides, pads, dilations, ceil_mode)
    return [TensorType((*x.shape[:2], *out), x.dtype)]


def _avg_pool_type(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    _float_dtype(x)
    return _max_pool_type(x, kernel_shape=kernel_shape, strides=strides, pads=pads, dilations=dilations,
                          ceil_mode=ceil_mode)


def _max_pool_ref(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    kernel, win, out = _pool_window(TensorType(x.shape, str(x.dtype)), kernel_shape, strides, pads, dilations,
                                    ceil_mode)
    lowest = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    views = (v for _, v in _tap_views(_padded(x, kernel, win, out, lowest, lowest), kernel, win, out))
    return functools.reduce(np.maximum, views).astype(x.dtype)


def _avg_pool_ref(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    kernel, win, out = _pool_window(TensorType(x.shape, str(x.dtype)), kernel_shape, strides, pads, dilations,
                                    ceil_mode)
    total = sum(v for _, v in _tap_views(_padded(x.astype(np.float64), kernel, win, out, 0, 0), kernel, win, out))
    # The divisor counts the taps inside the input, or with count_include_pad inside the padded input (never
    # those past it, which only ceil_mode reaches).
    inside = _padded(np.ones(x.shape[2:]), kernel, win, out, 1 if count_include_pad else 0, 0)
    count = sum(v for _, v in _tap_views(inside, kernel, win, out))
    return (total / count).astype(x.dtype)


def _max_pool_te(x, *, kernel_shape, strides, pads, dilations, ceil_mode):
    kernel, win, _ = _pool_window(_type(x), kernel_shape, strides, pads, dilations, ceil_mode)
    return _MAX_POOL[len(kernel)](x, kernel, win.strides, win.pads, win.dilations, bool(ceil_mode), name="max_pool")


def _avg_pool_te(x, *, kernel_shape, strides, pads, dilations, ceil_mode, count_include_pad):
    _float_dtype(_type(x))
    kernel, win, _ = _pool_window(_type(x), kernel_shape, strides, pads, dilations, ceil_mode)
    return _AVG_POOL[len(kernel)](x, kernel, win.strides, win.pads, win.dilations, bool(ceil_mode),
                                  bool(count_include_pad), name="avg_pool")


_POOL_ATTRS = {"kernel_shape": None, **_WINDOW_ATTRS, "ceil_mode": 0}
declare("max_pool", kind=REDUCTION, attrs=_POOL_ATTRS, infer=_max_pool_type, reference=_max_pool_ref,
        compute=_max_pool_te, samples=(
            Sample((((1, 2, 7, 6), "float32"),), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
            Sample((((2, 3, 7, 9), "float32"),),
                   {"kernel_shape": [2, 3], "strides": [2, 2], "dilations": [1, 2], "ceil_mode": 1}),
            Sample((((2, 3, 10), "float32"),), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1}),
        ))
declare("avg_pool", kind=REDUCTION, attrs={**_POOL_ATTRS, "count_include_pad": 0}, infer=_avg_pool_type,
        reference=_avg_pool_ref, compute=_avg_pool_te, samples=(
            Sample((((1, 2, 7, 6), "float32"),), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
            Sample((((1, 2, 8, 7), "float32"),), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                  "ceil_mode": 1, "count_include_pad": 1}),
            Sample((((1, 2, 5, 4, 6), "float32"),), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2],
                                                     "pads": [0, 1, 1, 0, 1, 1], "dilations": [1, 2, 1]}),
        ))


def _global_pool_type(x, *, average: bool):
    if len(x.shape) < 3:
        raise ShapeError(f"x must be (N, C, ...) with at least one spatial axis, got shape {x.shape}")
    if average:
        _float_dtype(x)
    return [TensorType((*x.shape[:2], *[1] * (len(x.shape) - 2)), x.dtype)]


def _global_pool_ref(x, *, average: bool):
    axes = tuple(range(2, x.ndim))
    y = x.astype(np.float64).mean(axis=axes, keepdims=True) if average else x.max(axis=axes, keepdims=True)
    return y.astype(x.dtype)


_GLOBAL_SAMPLES = (Sample((((2, 3, 5, 4), "float32"),)), Sample((((1, 4, 6), "float32"),)))
declare("global_avg_pool", kind=REDUCTION, infer=functools.partial(_global_pool_type, average=True),
        reference=functools.partial(_global_pool_ref, average=True),
        compute=lambda x: nn.global_avg_pool(x), samples=_GLOBAL_SAMPLES)
declare("global_max_pool", kind=REDUCTION, infer=functools.partial(_global_pool_type, average=False),
        reference=functools.partial(_global_pool_ref, average=False),
        compute=lambda x: nn.global_max_pool(x), samples=_GLOBAL_SAMPLES)


# ---- softmax and normalisations ----

def _softmax_type(x, *, axis):
    _normalize_axis(axis, len(x.shape))
    return [TensorType(x.shape, _float_dtype(x))]


def _log_softmax_ref(x, *, axis):
    wide = x.astype(np.float64)
    shifted = wide - wide.max(axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(x.dtype)


_SOFTMAX_SAMPLES = (Sample((((4, 33), "float32"),)), Sample((((2, 5, 7), "float32"),), {"axis": 1}))
declare("softmax", kind=REDUCTION, attrs={"axis": -1}, infer=_softmax_type,
        reference=lambda x, *, axis: np.exp(_log_softmax_ref(x.astype(np.float64), axis=axis)).astype(x.dtype),
        compute=lambda x, *, axis: nn.softmax(x, axis), samples=_SOFTMAX_SAMPLES)
declare("log_softmax", kind=REDUCTION, attrs={"axis": -1}, infer=_softmax_type, reference=_log_softmax_ref,
        compute=lambda x, *, axis: nn.log_softmax(x, axis), samples=_SOFTMAX_SAMPLES)


def _normalised(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    return (wide - mean) / np.sqrt(((wide - mean) ** 2).mean(axis=axes, keepdims=True) + epsilon)


def _layer_norm_type(x, scale=None, bias=None, *, axis, epsilon):
    """ONNX LayerNormalization: statistics over the axes from `axis` on; scale and bias broadcast to them."""
    dtype = _float_dtype(x, scale, bias)
    inner = x.shape[_normalize_axis(axis, len(x.shape)):]
    for what, t in (("scale", scale), ("bias", bias)):
        if t is not None and not _broadcasts_to(t.shape, inner):
            raise ShapeError(f"{what} of shape {t.shape} does not broadcast to the normalised shape {inner}")
    return [TensorType(x.shape, dtype)]


def _layer_norm_ref(x, scale=None, bias=None, *, axis, epsilon):
    y = _normalised(x, tuple(range(axis % x.ndim, x.ndim)), epsilon)
    y = y if scale is None else y * scale
    return (y if bias is None else y + bias).astype(x.dtype)


def _layer_norm_te(x, scale=None, bias=None, *, axis, epsilon):
    _layer_norm_type(_type(x), _type(scale), _type(bias), axis=axis, epsilon=epsilon)
    return nn.layer_norm(x, scale, bias, axis, epsilon)


declare("layer_norm", kind=REDUCTION, attrs={"axis": -1, "epsilon": 1e-5}, infer=_layer_norm_type,
        reference=_layer_norm_ref, compute=_layer_norm_te, num_inputs=(1, 3), samples=(
            Sample((((4, 33), "float32"), ((33,), "float32"), ((33,), "float32"))),
            Sample((((2, 3, 8), "float32"), ((3, 8), "float32")), {"axis": 1, "epsilon": 1e-3}),
            Sample((((3, 10), "float32"),)),
        ))


def _instance_norm_type(x, scale, bias, *, epsilon):
    if len(x.shape) < 3:
        raise ShapeError(f"x must be (N, C, ...) with at least one spatial axis, got shape {x.shape}")
    dtype = _float_dtype(x, scale, bias)
    for what, t in (("scale", scale), ("bias", bias)):
        if t.shape != (x.shape[1],):
            raise ShapeError(f"{what} must have shape ({x.shape[1]},), one per channel of x, got {t.shape}")
    return [TensorType(x.shape, dtype)]


def _instance_norm_ref(x, scale, bias, *, epsilon):
    def per_channel(p):
        return p.astype(np.float64).reshape(-1, *[1] * (x.ndim - 2))

    y = _normalised(x, tuple(range(2, x.ndim)), epsilon) * per_channel(scale) + per_channel(bias)
    return y.astype(x.dtype)


def _instance_norm_te(x, scale, bias, *, epsilon):
    """Layer norm's chain with the statistics per (n, c): `instance_norm_mean` and `instance_norm_var` over the
    spatial axes, then the output (tag "instance_norm", axis 2), which the row schedule treats like layer norm:
    a channel's statistics and its normalisation in one loop."""
    _instance_norm_type(_type(x), _type(scale), _type(bias), epsilon=epsilon)
    spatial = tuple(range(2, x.ndim))
    count = E.const(float(math.prod(x.shape[2:])), x.dtype)
    ks = [te.reduce_axis(x.shape[d], f"r{d}") for d in spatial]
    mean = te.compute(x.shape[:2], lambda n, c: te.sum(x[(n, c, *ks)] / count, axis=ks), name="instance_norm_mean",
                      tag="reduce", attrs={"axis": spatial})

    def squared_deviation(n, c):
        centred = x[(n, c, *ks)] - mean[n, c]
        return te.sum(centred * centred / count, axis=ks)

    var = te.compute(x.shape[:2], squared_deviation, name="instance_norm_var", tag="reduce", attrs={"axis": spatial})

    def normalised(*i):
        n, c = i[:2]
        return (x[i] - mean[n, c]) * E.rsqrt(var[n, c] + epsilon) * scale[c] + bias[c]

    return te.compute(x.shape, normalised, name="instance_norm", tag="instance_norm",
                      attrs={"axis": 2, "epsilon": epsilon})


declare("instance_norm", kind=REDUCTION, attrs={"epsilon": 1e-5}, infer=_instance_norm_type,
        reference=_instance_norm_ref, compute=_instance_norm_te, num_inputs=3, samples=(
            Sample((((2, 3, 5, 4), "float32"), ((3,), "float32"), ((3,), "float32"))),
            Sample((((1, 4, 10), "float32"), ((4,), "float32"), ((4,), "float32")), {"epsilon": 1e-3}),
        ))
