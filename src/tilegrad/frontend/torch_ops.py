"""ATen's element-wise, reduction and shape ops mapped onto the registry (`torch_nn_ops.py` has the layers): one
small function each, taking the op's arguments in schema order (ATen's defaults as Python defaults). `b.val` is
what PyTorch says the node gives, so a mapping reads the output shape (a view's target, an expand's size) from it
rather than re-deriving PyTorch's rules. Scalars promote as in PyTorch: the operands are cast to the dtype
`torch.result_type` gives before a registry op sees them."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import TrainingModeError, UnsupportedFeatureError
from ..ir.graph import Value
from .torch_builder import TorchBuilder as B
from .torch_builder import dtype_name, torch_dtype
from .torch_op_table import Missing, torch_op

INT64_MAX = 2**63 - 1


def _axis(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _axes(dims, rank: int) -> tuple[int, ...] | None:
    """Reduction axes; None or [] is every axis."""
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return None
    dims = dims if isinstance(dims, (list, tuple)) else (dims,)
    return tuple(sorted(_axis(d, rank) for d in dims))


def _probe(x):
    if not isinstance(x, Value):
        return x
    return torch.empty(() if not x.shape else (1,) * len(x.shape), dtype=torch_dtype(x.dtype))


def _promoted(x, y) -> str:
    """The dtype PyTorch computes `x (op) y` in (Values or Python scalars)."""
    if isinstance(x, Value) or isinstance(y, Value):
        a, c = (x, y) if isinstance(x, Value) else (y, x)
        return dtype_name(torch.result_type(_probe(a), _probe(c)))
    return dtype_name(torch.result_type(torch.tensor(x), y))


def _as(b: B, x, dtype: str, name: str) -> Value:
    """`x` (a Value or a Python scalar) as a Value of `dtype`."""
    return b.cast(x, dtype, name) if isinstance(x, Value) else b.scalar(x, dtype, name)


# ---- element-wise ----

_UNARY = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt",
          "erf": "erf", "abs": "abs", "neg": "neg", "reciprocal": "reciprocal"}


def _unary(op):
    return lambda b, name, x: b.op(op, x, name=name)


for _aten, _op in _UNARY.items():
    torch_op(_aten)(_unary(_op))
torch_op("hardswish", keep=True)(_unary("hard_swish"))


@torch_op("rsqrt")
def _rsqrt(b: B, name, x):
    return b.op("reciprocal", b.op("sqrt", x, name=f"{name}_sqrt"), name=name)


@torch_op("log1p")
def _log1p(b: B, name, x):
    return b.op("log", b.op("add", x, b.scalar(1, x.dtype, name), name=f"{name}_plus_one"), name=name)


@torch_op("expm1")
def _expm1(b: B, name, x):
    return b.op("sub", b.op("exp", x, name=f"{name}_exp"), b.scalar(1, x.dtype, name), name=name)


@torch_op("silu", keep=True)
def _silu(b: B, name, x):
    return b.op("mul", x, b.op("sigmoid", x, name=f"{name}_sigmoid"), name=name)


@torch_op("gelu")
def _gelu(b: B, name, x, *, approximate="none"):
    if approximate == "none":
        return b.op("gelu", x, name=name)
    # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    cube = b.op("mul", b.op("mul", x, x, name=f"{name}_square"), x, name=f"{name}_cube")
    inner = b.op("add", x, b.op("mul", cube, b.scalar(0.044715, x.dtype, f"{name}_c"), name=f"{name}_cubic"),
                 name=f"{name}_inner")
    t = b.op("tanh", b.op("mul", inner, b.scalar(math.sqrt(2 / math.pi), x.dtype, f"{name}_k"), name=f"{name}_arg"),
             name=f"{name}_tanh")
    half = b.op("mul", x, b.scalar(0.5, x.dtype, f"{name}_half"), name=f"{name}_halved")
    return b.op("mul", half, b.op("add", t, b.scalar(1, x.dtype, f"{name}_one"), name=f"{name}_one_plus"), name=name)


@torch_op("hardsigmoid", keep=True)
def _hardsigmoid(b: B, name, x):
    return b.op("hard_sigmoid", x, name=name, alpha=1 / 6, beta=0.5)


@torch_op("leaky_relu")
def _leaky_relu(b: B, name, x, negative_slope=0.01):
    return b.op("leaky_relu", x, name=name, alpha=float(negative_slope))


@torch_op("hardtanh", keep=True)
def _hardtanh(b: B, name, x, min_val=-1.0, max_val=1.0):
    return b.op("clip", x, name=name, min=float(min_val), max=float(max_val))


@torch_op("relu6", keep=True)
def _relu6(b: B, name, x):
    return b.op("clip", x, name=name, min=0.0, max=6.0)


@torch_op("clamp", "clamp_min")
def _clamp(b: B, name, x, lo=None, hi=None):
    if isinstance(lo, Value) or isinstance(hi, Value):
        out = x
        for bound, op in ((lo, "maximum"), (hi, "minimum")):
            if bound is not None:
                out = b.op(op, out, _as(b, bound, x.dtype, f"{name}_{op}"), name=f"{name}_{op}")
        return out
    return b.op("clip", x, name=name, min=-math.inf if lo is None else float(lo),
                max=math.inf if hi is None else float(hi))


@torch_op("clamp_max")
def _clamp_max(b: B, name, x, hi):
    return _clamp(b, name, x, None, hi)


def _arithmetic(op, reverse=False):
    def convert(b: B, name, x, y, alpha=1):
        dtype = b.out_dtype
        if alpha != 1:
            y = b.op("mul", _as(b, y, dtype, f"{name}_y"), b.scalar(alpha, dtype, f"{name}_alpha"),
                     name=f"{name}_alpha")
        lhs, rhs = (y, x) if reverse else (x, y)
        return b.op(op, _as(b, lhs, dtype, f"{name}_a"), _as(b, rhs, dtype, f"{name}_b"), name=name)
    return convert


torch_op("add")(_arithmetic("add"))
torch_op("sub")(_arithmetic("sub"))
torch_op("rsub")(_arithmetic("sub", reverse=True))
torch_op("mul")(_arithmetic("mul"))
torch_op("maximum")(_arithmetic("maximum"))
torch_op("minimum")(_arithmetic("minimum"))


@torch_op("div")
def _div(b: B, name, x, y, *, rounding_mode=None):
    dtype = b.out_dtype
    if rounding_mode is not None and dtype.startswith("float"):
        raise UnsupportedFeatureError(f"division with rounding_mode={rounding_mode!r} on {dtype} is not supported")
    x, y = _as(b, x, dtype, f"{name}_a"), _as(b, y, dtype, f"{name}_b")
    if rounding_mode != "floor":
        return b.op("div", x, y, name=name)
    # Integer division truncates; floor is one less where the remainder is not 0 and has the other sign than y.
    q = b.op("div", x, y, name=f"{name}_trunc")
    r = b.op("sub", x, b.op("mul", q, y, name=f"{name}_back"), name=f"{name}_remainder")
    zero = b.scalar(0, dtype, f"{name}_zero")
    inexact = b.op("not", b.op("equal", r, zero, name=f"{name}_exact"), name=f"{name}_inexact")
    signs = b.op("logical_xor", b.op("less", r, zero, name=f"{name}_r_negative"),
                 b.op("less", y, zero, name=f"{name}_y_negative"), name=f"{name}_signs")
    down = b.op("logical_and", inexact, signs, name=f"{name}_down")
    return b.op("sub", q, b.op("cast", down, name=f"{name}_step", to=dtype), name=name)


@torch_op("pow")
def _pow(b: B, name, x, exponent):
    dtype = b.out_dtype
    if not dtype.startswith("float"):
        out = b.op("pow", _as(b, x, "float32", f"{name}_base"), _as(b, exponent, "float32", f"{name}_exp"),
                   name=f"{name}_float")
        return b.cast(out, dtype, name)
    if isinstance(x, Value) and exponent == 2:
        return b.op("mul", x, x, name=name)
    if isinstance(x, Value) and exponent == 0.5:
        return b.op("sqrt", x, name=name)
    return b.op("pow", _as(b, x, dtype, f"{name}_base"), _as(b, exponent, dtype, f"{name}_exp"), name=name)


def _comparison(op, negate=False):
    def convert(b: B, name, x, y):
        dtype = _promoted(x, y)
        out = b.op(op, _as(b, x, dtype, f"{name}_a"), _as(b, y, dtype, f"{name}_b"),
                   name=f"{name}_equal" if negate else name)
        return b.op("not", out, name=name) if negate else out
    return convert


for _aten, _op in {"eq": "equal", "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}.items():
    torch_op(_aten)(_comparison(_op))
torch_op("ne")(_comparison("equal", negate=True))


def _logical(op):
    def convert(b: B, name, x, y):
        return b.op(op, _as(b, x, "bool", f"{name}_a"), _as(b, y, "bool", f"{name}_b"), name=name)
    return convert


for _aten, _op in {"logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor"}.items():
    torch_op(_aten)(_logical(_op))


def _bitwise(op):
    def convert(b: B, name, x, y):
        if b.out_dtype != "bool":
            raise UnsupportedFeatureError("bitwise ops are supported on bool tensors only")
        return _logical(op)(b, name, x, y)
    return convert


for _aten, _op in {"bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor"}.items():
    torch_op(_aten)(_bitwise(_op))


@torch_op("logical_not", "bitwise_not")
def _logical_not(b: B, name, x):
    if b.out_dtype != "bool":
        raise UnsupportedFeatureError("bitwise_not is supported on bool tensors only")
    return b.op("not", b.cast(x, "bool", name), name=name)


@torch_op("where")
def _where(b: B, name, cond, x, y):
    dtype = b.out_dtype
    return b.op("where", b.cast(cond, "bool", name), _as(b, x, dtype, f"{name}_x"), _as(b, y, dtype, f"{name}_y"),
                name=name)


@torch_op("masked_fill")
def _masked_fill(b: B, name, x, mask, value):
    return b.op("where", mask, _as(b, value, x.dtype, f"{name}_value"), x, name=name)


@torch_op("_to_copy")
def _to_copy(b: B, name, x, **_):
    return b.op("cast", x, name=name, to=b.out_dtype) if x.dtype != b.out_dtype else x


@torch_op("clone", "alias", "detach", "lift_fresh_copy", "contiguous")
def _same(b: B, name, x, **_):
    return x


@torch_op("dropout")
def _dropout(b: B, name, x, p=0.5, train=False):
    if train and p > 0:
        raise TrainingModeError("dropout in training mode; tilegrad compiles inference: call module.eval()")
    return x


@torch_op("native_dropout")
def _native_dropout(b: B, name, x, p, train):
    if train and p > 0:
        raise TrainingModeError("dropout in training mode; tilegrad compiles inference: call module.eval()")
    return x, Missing("the mask of aten.native_dropout")


def _filled_like(fill):
    def convert(b: B, name, x, fill_value=None, **_):
        return b.const(np.full(b.out_shape, fill if fill is not None else fill_value, b.out_dtype), name)
    return convert


torch_op("full_like")(_filled_like(None))
torch_op("zeros_like")(_filled_like(0))
torch_op("ones_like")(_filled_like(1))


def _triangle(upper: int):
    def convert(b: B, name, x, diagonal=0):
        return b.op("trilu", x, name=name, upper=upper, k=int(diagonal))
    return convert


torch_op("tril")(_triangle(0))
torch_op("triu")(_triangle(1))


# ---- reductions ----

def _reduce(op):
    def convert(b: B, name, x, dim=None, keepdim=False, *, dtype=None):
        x = b.cast(x, b.out_dtype, name)
        return b.op(op, x, name=name, axes=_axes(dim, len(x.shape)), keepdims=int(keepdim))
    return convert


torch_op("sum")(_reduce("reduce_sum"))
torch_op("mean")(_reduce("reduce_mean"))
torch_op("amax")(_reduce("reduce_max"))
torch_op("amin")(_reduce("reduce_min"))
torch_op("prod")(_reduce("reduce_prod"))
torch_op("max.default")(_reduce("reduce_max"))
torch_op("min.default")(_reduce("reduce_min"))


@torch_op("linalg_vector_norm")
def _vector_norm(b: B, name, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    axes, keep = _axes(dim, len(x.shape)), int(keepdim)
    if ord == 2:
        return b.op("reduce_l2", x, name=name, axes=axes, keepdims=keep)
    if ord in (1, math.inf):
        size = b.op("abs", x, name=f"{name}_abs")
        return b.op("reduce_sum" if ord == 1 else "reduce_max", size, name=name, axes=axes, keepdims=keep)
    raise UnsupportedFeatureError(f"vector norms of order {ord} are not supported (only 1, 2 and inf)")


@torch_op("max.dim")
def _max_dim(b: B, name, x, dim, keepdim=False):
    values = b.op("reduce_max", x, name=name, axes=(_axis(dim, len(x.shape)),), keepdims=int(keepdim))
    return values, b.op("argmax", x, name=f"{name}_indices", axis=_axis(dim, len(x.shape)), keepdims=int(keepdim))


@torch_op("min.dim")
def _min_dim(b: B, name, x, dim, keepdim=False):
    values = b.op("reduce_min", x, name=name, axes=(_axis(dim, len(x.shape)),), keepdims=int(keepdim))
    return values, Missing("the indices of aten.min.dim")


@torch_op("argmax")
def _argmax(b: B, name, x, dim=None, keepdim=False):
    if dim is None:
        flat = b.op("reshape", x, name=f"{name}_flat", shape=(-1,))
        return b.op("reshape", b.op("argmax", flat, name=name, axis=0, keepdims=0), name=f"{name}_shape",
                    shape=b.out_shape)
    return b.op("argmax", x, name=name, axis=_axis(dim, len(x.shape)), keepdims=int(keepdim))


@torch_op("var")
def _var(b: B, name, x, dim=None, *, correction=None, keepdim=False):
    axes = _axes(dim, len(x.shape)) or tuple(range(len(x.shape)))
    count = math.prod(x.shape[a] for a in axes)
    correction = 1 if correction is None else correction
    mean = b.op("reduce_mean", x, name=f"{name}_mean", axes=axes, keepdims=1)
    centred = b.op("sub", x, mean, name=f"{name}_centred")
    squares = b.op("mul", centred, centred, name=f"{name}_squares")
    out = b.op("reduce_mean", squares, name=f"{name}_biased", axes=axes, keepdims=int(keepdim))
    if not correction:
        return out
    factor = count / (count - correction) if count > correction else math.inf
    return b.op("mul", out, b.scalar(factor, x.dtype, name), name=name)


@torch_op("cumsum")
def _cumsum(b: B, name, x, dim, *, dtype=None):
    return b.op("cumsum", b.cast(x, b.out_dtype, name), name=name, axis=_axis(dim, len(x.shape)))


def _softmax(op):
    def convert(b: B, name, x, dim, half_to_float=False, dtype=None):
        x = b.cast(x, b.out_dtype, name)
        return b.op(op, x, name=name, axis=_axis(dim, len(x.shape)))
    return convert


torch_op("_softmax")(torch_op("softmax", keep=True)(_softmax("softmax")))
torch_op("_log_softmax")(torch_op("log_softmax", keep=True)(_softmax("log_softmax")))


# ---- shapes and indexing ----

@torch_op("view", "_unsafe_view", "reshape", "squeeze", "view_as")
@torch_op("flatten", keep=True)
def _reshape(b: B, name, x, *_):
    return x if x.shape == b.out_shape else b.op("reshape", x, name=name, shape=b.out_shape)


@torch_op("unsqueeze")
def _unsqueeze(b: B, name, x, dim):
    return b.op("unsqueeze", x, name=name, axes=(_axis(dim, len(x.shape) + 1),))


@torch_op("permute")
def _permute(b: B, name, x, dims):
    return b.op("transpose", x, name=name, perm=tuple(_axis(d, len(x.shape)) for d in dims))


@torch_op("t")
def _t(b: B, name, x):
    return b.op("transpose", x, name=name, perm=(1, 0)) if len(x.shape) == 2 else x


@torch_op("transpose.int")
def _transpose(b: B, name, x, dim0, dim1):
    perm = list(range(len(x.shape)))
    a, c = _axis(dim0, len(perm)), _axis(dim1, len(perm))
    perm[a], perm[c] = perm[c], perm[a]
    return b.op("transpose", x, name=name, perm=tuple(perm))


@torch_op("expand")
def _expand(b: B, name, x, size, *, implicit=False):
    return x if x.shape == b.out_shape else b.op("expand", x, name=name, shape=b.out_shape)


@torch_op("repeat")
def _repeat(b: B, name, x, repeats):
    extra = len(repeats) - len(x.shape)
    if extra:
        x = b.op("reshape", x, name=f"{name}_rank", shape=(1,) * extra + x.shape)
    return b.op("tile", x, name=name, repeats=tuple(repeats))


def _slice_axis(b: B, name, x, dim, start, end, step=1):
    return b.op("slice", x, name=name, starts=(int(start),), ends=(int(end),), axes=(_axis(dim, len(x.shape)),),
                steps=(int(step),))


@torch_op("slice.Tensor")
def _slice(b: B, name, x, dim=0, start=None, end=None, step=1):
    if x.shape == b.out_shape:
        return x
    return _slice_axis(b, name, x, dim, 0 if start is None else start, INT64_MAX if end is None else end, step)


@torch_op("copy")
def _copy(b: B, name, x, src, non_blocking=False):
    """`x` overwritten by `src`, broadcast to x's shape in x's dtype (the functional form of `x.copy_(src)`)."""
    v = b.cast(src, x.dtype, name)
    return v if v.shape == x.shape else b.op("expand", v, name=name, shape=x.shape)


@torch_op("slice_scatter")
def _slice_scatter(b: B, name, x, src, dim=0, start=None, end=None, step=1):
    """`x` with its slice start:end along `dim` replaced by `src` (how torch.export writes `x[:, a:b] = src`):
    the part before, `src` and the part after, concatenated."""
    axis = _axis(dim, len(x.shape))
    n = x.shape[axis]
    if step != 1:
        raise UnsupportedFeatureError(f"slice_scatter with step {step}: only step 1 is supported")
    lo = min(max(0 if start is None else start + n if start < 0 else start, 0), n)
    hi = min(max(n if end is None else end + n if end < 0 else end, lo), n)
    parts = ([_slice_axis(b, f"{name}_before", x, axis, 0, lo)] if lo > 0 else []) + [src] + \
        ([_slice_axis(b, f"{name}_after", x, axis, hi, n)] if hi < n else [])
    return parts[0] if len(parts) == 1 else b.op("concat", *parts, name=name, axis=axis)


@torch_op("select.int")
def _select(b: B, name, x, dim, index):
    index = index % x.shape[_axis(dim, len(x.shape))]
    row = _slice_axis(b, f"{name}_slice", x, dim, index, index + 1)
    return b.op("reshape", row, name=name, shape=b.out_shape)


@torch_op("split_with_sizes", "split.Tensor")
def _split(b: B, name, x, sizes, dim=0):
    axis = _axis(dim, len(x.shape))
    if isinstance(sizes, int):
        sizes = [min(sizes, x.shape[axis] - s) for s in range(0, x.shape[axis], sizes)]
    starts = np.cumsum([0, *sizes[:-1]])
    return tuple(_slice_axis(b, f"{name}_{i}", x, axis, s, s + n) for i, (s, n) in enumerate(zip(starts, sizes)))


@torch_op("unbind.int")
def _unbind(b: B, name, x, dim=0):
    axis = _axis(dim, len(x.shape))
    shape = x.shape[:axis] + x.shape[axis + 1:]
    return tuple(b.op("reshape", _slice_axis(b, f"{name}_{i}_slice", x, axis, i, i + 1), name=f"{name}_{i}",
                      shape=shape) for i in range(x.shape[axis]))


@torch_op("cat")
def _cat(b: B, name, tensors, dim=0):
    dtype = b.out_dtype
    return b.op("concat", *(b.cast(t, dtype, f"{name}_{i}") for i, t in enumerate(tensors)), name=name,
                axis=_axis(dim, len(b.out_shape)))


@torch_op("constant_pad_nd")
def _constant_pad(b: B, name, x, pad, value=0):
    rank = len(x.shape)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if min(begins + ends) < 0:
        raise UnsupportedFeatureError(f"negative padding {list(pad)} (cropping) is not supported")
    return b.op("pad", x, name=name, pads=(*begins, *ends), value=float(value))


@torch_op("embedding")
def _embedding(b: B, name, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return b.op("gather", weight, indices, name=name, axis=0)


@torch_op("index_select")
def _index_select(b: B, name, x, dim, index):
    return b.op("gather", x, index, name=name, axis=_axis(dim, len(x.shape)))


@torch_op("gather")
def _gather(b: B, name, x, dim, index, *, sparse_grad=False):
    """`torch.gather`: each output element reads `x` at its own index along `dim` (ONNX's GatherElements)."""
    return b.op("gather_elements", x, index, name=name, axis=_axis(dim, len(x.shape)))


@torch_op("index.Tensor")
def _index(b: B, name, x, indices):
    """`x[idx]` with integer index tensors: one gives a gather along its axis; several (broadcast together, as
    in `x[rows, cols]` or a vmapped mask lookup) a gather_nd over their axes, moved first, whose broadcast
    dimensions go where PyTorch puts them: in place of adjacent indexed axes, else first. A boolean mask selects
    a data-dependent number of elements, which a compiled shape cannot hold."""
    given = [(d, t) for d, t in enumerate(indices) if t is not None]
    if any(t.dtype not in ("int32", "int64") for _, t in given):
        raise UnsupportedFeatureError("indexing with a boolean mask gives a data-dependent shape, which tilegrad "
                                      "does not compile; index with integer tensors")
    if len(given) == 1:
        axis, index = given[0]
        return b.op("gather", x, index, name=name, axis=axis)
    axes = [d for d, _ in given]
    rest = [d for d in range(len(x.shape)) if d not in axes]
    if axes != list(range(len(axes))):
        x = b.op("transpose", x, name=f"{name}_indexed_first", perm=(*axes, *rest))
    common = tuple(np.broadcast_shapes(*(t.shape for _, t in given)))
    columns = []
    for d, t in given:
        t = b.cast(t, "int64", f"{name}_{d}")
        if t.shape != common:
            t = b.op("expand", t, name=f"{name}_{d}_expand", shape=common)
        columns.append(b.op("unsqueeze", t, name=f"{name}_{d}_column", axes=(len(common),)))
    coordinates = b.op("concat", *columns, name=f"{name}_coordinates", axis=len(common))
    out = b.op("gather_nd", x, coordinates, name=f"{name}_gather" if axes[0] and _adjacent(axes) else name,
               batch_dims=0)
    if axes[0] and _adjacent(axes):  # x[:, i, j]: the broadcast dimensions replace the indexed axes in place
        k = len(common)
        perm = (*range(k, k + axes[0]), *range(k), *range(k + axes[0], len(out.shape)))
        out = b.op("transpose", out, name=name, perm=perm)
    return out


def _adjacent(axes: list[int]) -> bool:
    return axes == list(range(axes[0], axes[0] + len(axes)))
