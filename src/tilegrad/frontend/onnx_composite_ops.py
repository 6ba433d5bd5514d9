"""ONNX ops written as compositions of registry ops, as ONNX's own function bodies are: variadic Sum and Mean,
Swish, Gelu's tanh approximation, RMSNormalization, LpNormalization, MeanVarianceNormalization, Hardmax,
DepthToSpace, SpaceToDepth, EyeLike and Det of small matrices. The reader (`onnx.py`) imports this module, which
registers them."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import UnsupportedFeatureError
from .onnx_builder import OnnxBuilder as B
from .onnx_op_table import onnx_op


def _scalar(b: B, name, value, like):
    """A constant scalar of `like`'s dtype, which broadcasts against it."""
    return b.const(np.asarray(value, like.dtype), name)


@onnx_op("Sum")
def _sum(b: B, name, *xs):
    """A chain of broadcasting adds; a single input is its own sum."""
    out = xs[0]
    for i, x in enumerate(xs[1:]):
        out = b.op("add", out, x, name=name if i == len(xs) - 2 else f"{name}_{i}")
    return out


@onnx_op("Mean")
def _mean(b: B, name, *xs):
    total = _sum(b, f"{name}_sum", *xs)
    return b.op("div", total, _scalar(b, f"{name}_count", len(xs), total), name=name) if len(xs) > 1 else total


@onnx_op("Swish")
def _swish(b: B, name, x, *, alpha=1.0):
    """x * sigmoid(alpha * x), ONNX's function body in basic ops."""
    scaled = x if alpha == 1.0 else b.op("mul", x, _scalar(b, f"{name}_alpha", alpha, x), name=f"{name}_scaled")
    return b.op("mul", x, b.op("sigmoid", scaled, name=f"{name}_sigmoid"), name=name)


def gelu_tanh(b: B, name, x):
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), Gelu's tanh approximation in basic ops."""
    def c(what, value):
        return _scalar(b, f"{name}_{what}", value, x)

    cube = b.op("mul", b.op("mul", x, x, name=f"{name}_square"), x, name=f"{name}_cube")
    inner = b.op("add", x, b.op("mul", cube, c("k", 0.044715), name=f"{name}_scaled_cube"), name=f"{name}_inner")
    t = b.op("tanh", b.op("mul", inner, c("s", math.sqrt(2 / math.pi)), name=f"{name}_arg"), name=f"{name}_tanh")
    half = b.op("mul", x, c("half", 0.5), name=f"{name}_half")
    return b.op("mul", half, b.op("add", t, c("one", 1.0), name=f"{name}_one_plus"), name=name)


@onnx_op("RMSNormalization")
def _rms_normalization(b: B, name, x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    """x / sqrt(mean(x^2) + epsilon) * scale, the mean over the axes from `axis` on."""
    axes = tuple(range(axis % len(x.shape), len(x.shape)))
    square = b.op("mul", x, x, name=f"{name}_square")
    mean = b.op("reduce_mean", square, name=f"{name}_mean", axes=axes, keepdims=1)
    rms = b.op("sqrt", b.op("add", mean, _scalar(b, f"{name}_epsilon", epsilon, x), name=f"{name}_eps"),
               name=f"{name}_rms")
    return b.op("mul", b.op("div", x, rms, name=f"{name}_normalized"), scale, name=name)


@onnx_op("LpNormalization")
def _lp_normalization(b: B, name, x, *, axis=-1, p=2):
    """x divided by its L1 or L2 norm along `axis`; 0 where the norm is 0, as ONNX's reference has it."""
    if p not in (1, 2):
        raise UnsupportedFeatureError(f"node {name!r}: LpNormalization with p={p} is not supported (only 1 and 2)")
    a = (axis % len(x.shape),)
    norm = (b.op("reduce_l2", x, name=f"{name}_norm", axes=a, keepdims=1) if p == 2 else
            b.op("reduce_sum", b.op("abs", x, name=f"{name}_abs"), name=f"{name}_norm", axes=a, keepdims=1))
    zero = _scalar(b, f"{name}_zero", 0, x)
    return b.op("where", b.op("equal", norm, zero, name=f"{name}_is_zero"), zero,
                b.op("div", x, norm, name=f"{name}_divided"), name=name)


@onnx_op("MeanVarianceNormalization")
def _mean_variance_normalization(b: B, name, x, *, axes=(0, 2, 3)):
    """(x - mean) / (sqrt(mean((x - mean)^2)) + 1e-9) over `axes`, as ONNX's function body computes it."""
    axes = tuple(int(a) for a in axes)
    centred = b.op("sub", x, b.op("reduce_mean", x, name=f"{name}_mean", axes=axes, keepdims=1), name=f"{name}_centred")
    variance = b.op("reduce_mean", b.op("mul", centred, centred, name=f"{name}_square"), name=f"{name}_variance",
                    axes=axes, keepdims=1)
    deviation = b.op("add", b.op("sqrt", variance, name=f"{name}_std"), _scalar(b, f"{name}_epsilon", 1e-9, x),
                     name=f"{name}_deviation")
    return b.op("div", centred, deviation, name=name)


@onnx_op("Hardmax")
def _hardmax(b: B, name, x, *, axis=-1):
    """1 at the first maximum along `axis`, 0 elsewhere: one_hot of argmax."""
    rank = len(x.shape)
    a = axis % rank
    if b.opset < 13 and a != rank - 1:
        raise UnsupportedFeatureError(f"node {name!r}: Hardmax before opset 13 with axis {axis} (the input coerced "
                                      f"to 2-D) is not supported")
    top = b.op("argmax", x, name=f"{name}_argmax", axis=a, keepdims=0)
    values = b.const(np.array([0, 1], x.dtype), f"{name}_values")
    return b.op("one_hot", top, values, name=name, depth=x.shape[a], axis=a)


def _blocks(b: B, name, x, split, perm, joined):
    """x reshaped to `split`, transposed by `perm` and reshaped to `joined`."""
    parts = b.op("reshape", x, name=f"{name}_split", shape=split)
    return b.op("reshape", b.op("transpose", parts, name=f"{name}_transpose", perm=perm), name=name, shape=joined)


@onnx_op("DepthToSpace")
def _depth_to_space(b: B, name, x, *, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    s = int(blocksize)
    if mode == "DCR":
        return _blocks(b, name, x, (n, s, s, c // (s * s), h, w), (0, 3, 4, 1, 5, 2), (n, c // (s * s), h * s, w * s))
    return _blocks(b, name, x, (n, c // (s * s), s, s, h, w), (0, 1, 4, 2, 5, 3), (n, c // (s * s), h * s, w * s))


@onnx_op("SpaceToDepth")
def _space_to_depth(b: B, name, x, *, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    s = int(blocksize)
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return _blocks(b, name, x, (n, c, h // s, s, w // s, s), perm, (n, c * s * s, h // s, w // s))


@onnx_op("EyeLike")
def _eye_like(b: B, name, x, *, dtype=None, k=0):
    """A constant: ones on the k-th diagonal of x's shape, in `dtype` (x's by default)."""
    from onnx import helper

    out = x.dtype if dtype is None else str(helper.tensor_dtype_to_np_dtype(dtype))
    return b.const(np.eye(*x.shape, k=int(k), dtype=out), name)


DET_MAX_ORDER = 4


def _permutation_sign(p) -> int:
    inversions = sum(1 for i, j in itertools.combinations(range(len(p)), 2) if p[i] > p[j])
    return -1 if inversions % 2 else 1


@onnx_op("Det")
def _det(b: B, name, x):
    """The Leibniz sum over permutations of signed products of entries, for matrices up to 4 x 4 (24 products);
    a larger order would need a pivoted factorisation, which is refused."""
    n, rank = x.shape[-1], len(x.shape)
    if x.shape[-2] != n or n > DET_MAX_ORDER:
        raise UnsupportedFeatureError(f"node {name!r}: Det of {x.shape[-2]} x {n} matrices is not supported (square "
                                      f"matrices up to {DET_MAX_ORDER} x {DET_MAX_ORDER})")
    entries = {}
    for i, j in itertools.product(range(n), repeat=2):
        one = b.op("slice", x, name=f"{name}_at{i}{j}", starts=(i, j), ends=(i + 1, j + 1), axes=(rank - 2, rank - 1))
        entries[i, j] = b.op("reshape", one, name=f"{name}_entry{i}{j}", shape=x.shape[:-2])
    total = None
    for k, p in enumerate(itertools.permutations(range(n))):
        term = entries[0, p[0]]
        for i in range(1, n):
            term = b.op("mul", term, entries[i, p[i]], name=f"{name}_term{k}_{i}")
        if total is None:
            total = term if _permutation_sign(p) > 0 else b.op("neg", term, name=f"{name}_neg{k}")
        else:
            total = b.op("add" if _permutation_sign(p) > 0 else "sub", total, term, name=f"{name}_sum{k}")
    return total
