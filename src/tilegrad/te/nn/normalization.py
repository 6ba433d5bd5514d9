"""Softmax, log-softmax, layer normalisation and local response normalisation (LRN), each a short chain of computes.

Softmax subtracts the maximum before exponentiating so that no exponential overflows: stages `{name}_max`,
`{name}_exp` (exp(x - max), kept per row by the default schedule so each element is exponentiated once),
`{name}_expsum` and the output, which multiplies by the reciprocal of the sum. Log-softmax recomputes exp(x - max)
inside its sum. Layer norm takes the mean and the (biased) variance as reductions, `{name}_mean` and `{name}_var`, and
the output normalises, scales and shifts. The final stage of each is tagged with the op's name, and its `row_axes`
attribute (the leading axes that are rows) lets the default schedule run the whole chain row by row; the
reductions are tagged "reduce". LRN's window of channels is no row: its sums are a "reduce" stage and its output
an element-wise one.
"""

from __future__ import annotations


from ...errors import ShapeError
from .. import dims
from .. import expr as E
from .. import tensor as te
from ._arguments import check_float, normalize_axis
from .elementwise import broadcast_index, broadcast_shape
from .reduction import reduce_max


def softmax(x: te.Tensor, axis: int = -1, name: str = "softmax") -> te.Tensor:
    """exp(x) / sum(exp(x)) along `axis`, computed stably. The exponentials are a stage of their own
    (`{name}_exp`), so a schedule can keep a row of them and exponentiate once; the output multiplies by the
    reciprocal of the sum, one division per row."""
    check_float(x, "softmax")
    a = normalize_axis(axis, x.ndim, "softmax")
    maxes = reduce_max(x, a, name=f"{name}_max")
    exps = te.compute(x.shape, lambda *i: E.exp(x[i] - maxes[_drop(i, a)]), name=f"{name}_exp", tag="elemwise")
    k = te.reduce_axis(x.shape[a], f"r{a}")
    sums = te.compute(maxes.shape, lambda *i: te.sum(exps[(*i[:a], k, *i[a:])], axis=k), name=f"{name}_expsum",
                      tag="reduce", attrs={"axis": (a,)})
    one = E.const(1.0, x.dtype)
    return te.compute(x.shape, lambda *i: exps[i] * (one / sums[_drop(i, a)]), name=name, tag="softmax",
                      attrs={"axis": a, "row_axes": a})


def log_softmax(x: te.Tensor, axis: int = -1, name: str = "log_softmax") -> te.Tensor:
    """x - log(sum(exp(x))) along `axis`, computed stably as x - max - log(sum(exp(x - max)))."""
    a, maxes, expsum = _exp_sums("log_softmax", x, axis, name)
    return te.compute(x.shape, lambda *i: x[i] - maxes[_drop(i, a)] - E.log(expsum[_drop(i, a)]), name=name,
                      tag="log_softmax", attrs={"axis": a, "row_axes": a})


def layer_norm(x: te.Tensor, gamma: te.Tensor | None = None, beta: te.Tensor | None = None, axis: int = -1,
               epsilon: float = 1e-5, name: str = "layer_norm") -> te.Tensor:
    """(x - mean) / sqrt(var + epsilon) * gamma + beta, the statistics taken over the axes from `axis` on.

    As in ONNX, `axis` is the first normalised axis; gamma and beta broadcast to the normalised shape x.shape[axis:].
    """
    check_float(x, "layer_norm")
    a = normalize_axis(axis, x.ndim, "layer_norm")
    inner = x.shape[a:]
    for param in (gamma, beta):
        if param is not None:
            _check_param(param, x, inner)
    count = dims.count(dims.product(inner), x.dtype)
    ks = [te.reduce_axis(n, f"r{a + d}") for d, n in enumerate(inner)]
    mean = te.compute(x.shape[:a], lambda *i: te.sum(x[(*i, *ks)] / count, axis=ks), name=f"{name}_mean",
                      tag="reduce", attrs={"axis": tuple(range(a, x.ndim))})

    def squared_deviation(*i):
        centred = x[(*i, *ks)] - mean[i]
        return te.sum(centred * centred / count, axis=ks)

    var = te.compute(x.shape[:a], squared_deviation, name=f"{name}_var", tag="reduce",
                     attrs={"axis": tuple(range(a, x.ndim))})

    def normalised(*i):
        out = (x[i] - mean[i[:a]]) * E.rsqrt(var[i[:a]] + epsilon)
        if gamma is not None:
            out = out * gamma[broadcast_index(gamma.shape, i[a:])]
        if beta is not None:
            out = out + beta[broadcast_index(beta.shape, i[a:])]
        return out

    return te.compute(x.shape, normalised, name=name, tag="layer_norm",
                      attrs={"axis": a, "epsilon": epsilon, "row_axes": a})


def lrn(x: te.Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0,
        name: str = "lrn") -> te.Tensor:
    """Local response normalisation across channels (ONNX LRN, AlexNet): x / (bias + alpha / size * s) ** beta,
    where s sums the squares of x over the `size` channels around each one (floor((size - 1) / 2) before it,
    the rest after), channels beyond the edges counting as zeros. The sums are the stage `{name}_sqsum`."""
    check_float(x, "lrn")
    if x.ndim < 2 or size < 1:
        raise ShapeError(f"lrn: needs x of shape (N, C, ...) and a positive size, got {x.shape} and {size}")
    channels, before = x.shape[1], (size - 1) // 2
    k = te.reduce_axis(size, "k")

    def square_sum(*i):
        c = i[1] - before + k
        v = x[(i[0], c, *i[2:])]
        inside = E.logical_and(c >= 0, c < channels)
        return te.sum(E.select(inside, v * v, E.const(0.0, x.dtype)), axis=k)

    sums = te.compute(x.shape, square_sum, name=f"{name}_sqsum", tag="reduce")
    scale = alpha / size
    return te.compute(x.shape, lambda *i: x[i] * E.power(sums[i] * scale + bias, -beta), name=name, tag="elemwise",
                      attrs={"size": size, "alpha": alpha, "beta": beta, "bias": bias})


def _check_param(param: te.Tensor, x: te.Tensor, inner: tuple[int, ...]) -> None:
    if param.dtype != x.dtype:
        raise ShapeError(f"layer_norm: {param.name} has dtype {param.dtype} but {x.name} has {x.dtype}")
    try:
        fits = param.ndim <= len(inner) and broadcast_shape(param.shape, inner) == inner
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(f"layer_norm: {param.name} of shape {param.shape} does not broadcast to the normalised "
                         f"shape {inner}")


def _drop(index: tuple, axis: int) -> tuple:
    return index[:axis] + index[axis + 1:]


def _exp_sums(op: str, x: te.Tensor, axis: int, name: str):
    """The normalised axis, the maxima and the sums of exp(x - max) along it."""
    check_float(x, op)
    a = normalize_axis(axis, x.ndim, op)
    maxes = reduce_max(x, a, name=f"{name}_max")
    k = te.reduce_axis(x.shape[a], f"r{a}")

    def exp_sum(*i):
        return te.sum(E.exp(x[(*i[:a], k, *i[a:])] - maxes[i]), axis=k)

    expsum = te.compute(maxes.shape, exp_sum, name=f"{name}_expsum", tag="reduce", attrs={"axis": (a,)})
    return a, maxes, expsum
