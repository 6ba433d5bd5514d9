"""ONNX op types mapped onto the registry: one small function each, ONNX attributes as keyword parameters with
ONNX's defaults. Inputs that ONNX passes as tensors but the registry takes as attributes (shapes, axes, pads) must
be constants; constant folding during import makes them so when shapes are static."""

from __future__ import annotations

import math

import numpy as np

from ..dtype import is_float
from ..errors import ShapeError, UnsupportedFeatureError
from ..ir.graph import Value, infer_types
from ..te import expr as E
from ..te.dims import dim, is_symbolic_array, provably_le, upper_shape
from .onnx_builder import OnnxBuilder as B
from .onnx_composite_ops import gelu_tanh
from .onnx_file import ModelFormatError
from .onnx_op_table import constant_input, onnx_op
from .onnx_pool_indices import max_pool_indices
from .onnx_spatial_attrs import spatial_attrs
from .onnx_tensors import check_constant, onnx_dtype, tensor_array
from .transposed_conv import transposed_as_conv

_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
          "Erf": "erf", "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal", "Not": "not",
          "HardSwish": "hard_swish", "GlobalAveragePool": "global_avg_pool", "GlobalMaxPool": "global_max_pool"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Equal": "equal", "Less": "less",
           "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal",
           "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}


def _unary(op):
    return lambda b, name, x: b.op(op, x, name=name)


def _binary(op):
    return lambda b, name, x, y: b.op(op, x, y, name=name)


for _onnx, _op in _UNARY.items():
    onnx_op(_onnx)(_unary(_op))
for _onnx, _op in _BINARY.items():
    onnx_op(_onnx)(_binary(_op))


def _nonzero_divisor(name: str, y: Value) -> None:
    """An integer division by a constant holding zero is undefined (ONNX Runtime refuses it): refuse the node."""
    if y.is_constant and not is_float(y.dtype) and not np.all(y.data):
        raise ModelFormatError(f"node {name!r} divides integers by a constant holding zero")


@onnx_op("Div")
def _div(b: B, name, x, y):
    _nonzero_divisor(name, y)
    return b.op("div", x, y, name=name)


def _extreme(op):
    def convert(b: B, name, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = b.op(op, out, x, name=name)
        return out
    return convert


onnx_op("Max")(_extreme("maximum"))
onnx_op("Min")(_extreme("minimum"))


@onnx_op("Identity")
def _identity(b: B, name, x):
    if not isinstance(x, Value):  # a sequence or an optional, resolved at import: the same value
        return x
    return b.op("identity", x, name=name)


@onnx_op("Dropout")
def _dropout(b: B, name, x, ratio=None, training_mode=None, *, seed=None, is_test=1, **legacy):
    """The identity, and a mask of all true if the node asks for one: in inference, or in training with a ratio
    of 0. Training with a non-zero ratio drops at random, which is refused, not silently ignored."""
    training = constant_input(training_mode, "training_mode", name) if training_mode is not None else False
    if bool(np.asarray(training)) or not is_test:
        drop = constant_input(ratio, "ratio", name) if ratio is not None else legacy.get("ratio", 0.5)
        if float(np.ravel(drop)[0]) != 0:
            raise UnsupportedFeatureError(f"node {name!r}: Dropout in training mode with ratio "
                                          f"{float(np.ravel(drop)[0])} drops at random, which tilegrad does not "
                                          f"support (only inference, or a ratio of 0)")
    out = b.op("identity", x, name=name)
    return (out, b.const(np.ones(x.shape, bool), f"{name}_mask")) if b.node_outputs > 1 else out


@onnx_op("LeakyRelu")
def _leaky_relu(b: B, name, x, *, alpha=0.01):
    return b.op("leaky_relu", x, name=name, alpha=alpha)


@onnx_op("HardSigmoid")
def _hard_sigmoid(b: B, name, x, *, alpha=0.2, beta=0.5):
    return b.op("hard_sigmoid", x, name=name, alpha=alpha, beta=beta)


@onnx_op("Gelu")
def _gelu(b: B, name, x, *, approximate="none"):
    if approximate == "tanh":
        return gelu_tanh(b, name, x)
    if approximate != "none":
        raise UnsupportedFeatureError(f"node {name!r}: Gelu approximate={approximate!r} is not supported "
                                      f"(only 'none' and 'tanh')")
    return b.op("gelu", x, name=name)


@onnx_op("Clip")
def _clip(b: B, name, x, lo=None, hi=None, *, min=-math.inf, max=math.inf):
    if b.opset >= 11 and any(v is not None and not v.is_constant for v in (lo, hi)):  # bounds known at run time
        if any(v is not None and v.shape not in ((), (1,)) for v in (lo, hi)):
            raise ShapeError(f"node {name!r}: Clip's min and max must be scalars")
        out = x if lo is None else b.op("maximum", x, lo, name=f"{name}_min")
        return out if hi is None else b.op("minimum", out, hi, name=name)
    if b.opset >= 11:
        lo_v, hi_v = constant_input(lo, "min", name), constant_input(hi, "max", name)
        if any(v is not None and np.size(v) != 1 for v in (lo_v, hi_v)):
            raise ShapeError(f"node {name!r}: Clip's min and max must be scalars")
        min = -math.inf if lo_v is None else float(np.ravel(lo_v)[0])
        max = math.inf if hi_v is None else float(np.ravel(hi_v)[0])
    return b.op("clip", x, name=name, min=float(min), max=float(max))


@onnx_op("Cast")
def _cast(b: B, name, x, *, to, saturate=1):
    return b.op("cast", x, name=name, to=onnx_dtype(to, f"node {name!r}: Cast's target"))


@onnx_op("Where")
def _where(b: B, name, cond, x, y):
    return b.op("where", cond, x, y, name=name)


@onnx_op("Conv")
def _conv(b: B, name, x, w, bias=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
          strides=None):
    kernel = tuple(kernel_shape) if kernel_shape else w.shape[2:]
    strides, dilations, pads = spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
    inputs = (x, w) if bias is None else (x, w, bias)
    return b.op("conv", *inputs, name=name, strides=strides, pads=pads, dilations=dilations, group=group)


@onnx_op("ConvTranspose")
def _conv_transpose(b: B, name, x, w, bias=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                    output_padding=None, output_shape=None, pads=None, strides=None):
    nd = len(x.shape) - 2
    if len(w.shape) != len(x.shape):
        raise ShapeError(f"node {name!r}: ConvTranspose's weight {list(w.shape)} must have the rank of its input "
                         f"{list(x.shape)}")
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads, output_padding = _transposed_pads(name, x, w, auto_pad, kernel_shape, output_shape, output_padding,
                                                strides, dilations)
    as_conv = transposed_as_conv(b, name, x, w, bias, strides, pads, dilations, output_padding, group)
    if as_conv is not None:
        return as_conv
    inputs = (x, w) if bias is None else (x, w, bias)
    return b.op("conv_transpose", *inputs, name=name, strides=tuple(strides) if strides else (1,) * nd,
                pads=tuple(pads) if pads else (0,) * (2 * nd), dilations=tuple(dilations) if dilations else (1,) * nd,
                group=group, output_padding=tuple(output_padding) if output_padding else (0,) * nd)


def _transposed_pads(name, x, w, auto_pad, kernel_shape, output_shape, output_padding, strides, dilations):
    """(pads, output_padding) that give ConvTranspose its `output_shape` (by default the input's extents times
    the strides, for auto_pad SAME_*), as ONNX Runtime computes them: the padding that the full output exceeds the
    wanted one by, split by auto_pad (the odd one at the end for SAME_UPPER), and output_padding for the rest."""
    nd = len(x.shape) - 2
    kernel = tuple(kernel_shape) if kernel_shape else w.shape[2:]
    strides = tuple(strides) if strides else (1,) * nd
    dilations = tuple(dilations) if dilations else (1,) * nd
    extra = tuple(output_padding) if output_padding else (0,) * nd
    wanted = tuple(output_shape)[-nd:] if output_shape is not None else tuple(n * s for n, s in zip(x.shape[2:],
                                                                                                      strides))
    if len(wanted) != nd:
        raise ShapeError(f"node {name!r}: ConvTranspose output_shape {tuple(output_shape)} needs {nd} spatial "
                         f"extents")
    begins, ends, rest = [], [], []
    for n, k, s, d, e, out in zip(x.shape[2:], kernel, strides, dilations, extra, wanted):
        full = s * (n - 1) + (k - 1) * d + 1
        total = max(0, full + e - out)
        begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        begins.append(begin)
        ends.append(total - begin)
        rest.append(out - (full - total))
    return tuple(begins + ends), tuple(rest)


@onnx_op("MatMul")
def _matmul(b: B, name, x, y):
    return b.op("matmul", x, y, name=name)


@onnx_op("Gemm")
def _gemm(b: B, name, a, w, c=None, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    inputs = (a, w) if c is None else (a, w, c)
    return b.op("gemm", *inputs, name=name, alpha=float(alpha), beta=float(beta), trans_a=transA, trans_b=transB)


def _pool(op):
    def convert(b: B, name, x, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                kernel_shape, pads=None, storage_order=0, strides=None):
        kernel = tuple(kernel_shape)
        strides, dilations, pads = spatial_attrs(x, kernel, strides, dilations, pads, auto_pad)
        extra = {"count_include_pad": count_include_pad} if op == "avg_pool" else {}
        y = b.op(op, x, name=name, kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations,
                 ceil_mode=ceil_mode, **extra)
        if op == "max_pool" and b.node_outputs > 1:  # MaxPool's Indices
            return y, max_pool_indices(b, name, x, y.shape[2:], kernel, strides, pads, dilations, storage_order)
        return y
    return convert


onnx_op("MaxPool")(_pool("max_pool"))
onnx_op("AveragePool")(_pool("avg_pool"))


def _softmax(op):
    def convert(b: B, name, x, *, axis=None):
        rank = len(x.shape)
        if b.opset >= 13:
            return b.op(op, x, name=name, axis=-1 if axis is None else axis)
        axis = 1 if axis is None else axis % rank
        if axis == rank - 1:
            return b.op(op, x, name=name, axis=-1)
        # Before opset 13 the op normalises over all axes from `axis` on, as one flattened axis.
        rows = int(np.prod(x.shape[:axis]))
        flat = b.op("reshape", x, name=f"{name}_flatten", shape=(rows, -1))
        return b.op("reshape", b.op(op, flat, name=name, axis=-1), name=f"{name}_unflatten", shape=x.shape)
    return convert


onnx_op("Softmax")(_softmax("softmax"))
onnx_op("LogSoftmax")(_softmax("log_softmax"))


@onnx_op("InstanceNormalization")
def _instance_norm(b: B, name, x, scale, bias, *, epsilon=1e-5):
    return b.op("instance_norm", x, scale, bias, name=name, epsilon=float(epsilon))


@onnx_op("Reshape")
def _reshape(b: B, name, x, shape, *, allowzero=0):
    given = constant_input(shape, "the target shape", name)
    if np.ndim(given) != 1:
        raise ShapeError(f"node {name!r}: Reshape's target shape must be a 1-D tensor, got one of shape "
                         f"{list(np.shape(given))}")
    target = tuple(dim(d) for d in given)
    if allowzero and 0 in target:  # a 0 is an extent of 0, not "copy the input's extent"
        if -1 in target or math.prod(x.shape) != 0:
            raise ShapeError(f"node {name!r}: Reshape with allowzero=1 of {list(x.shape)} to {list(target)}: the "
                             f"element counts differ")
        return b.const(np.zeros(target, x.dtype), name)
    return b.op("reshape", x, name=name, shape=target)


@onnx_op("Transpose")
def _transpose(b: B, name, x, *, perm=None):
    return b.op("transpose", x, name=name, perm=None if perm is None else tuple(perm))


@onnx_op("Flatten")
def _flatten(b: B, name, x, *, axis=1):
    return b.op("flatten", x, name=name, axis=axis)


def _axes(b: B, name, axes_input, axes_attr):
    if axes_input is not None:
        return tuple(int(a) for a in np.ravel(constant_input(axes_input, "axes", name)))
    return None if axes_attr is None else tuple(axes_attr)


@onnx_op("Squeeze")
def _squeeze(b: B, name, x, axes_input=None, *, axes=None):
    return b.op("squeeze", x, name=name, axes=_axes(b, name, axes_input, axes))


@onnx_op("Unsqueeze")
def _unsqueeze(b: B, name, x, axes_input=None, *, axes=None):
    return b.op("unsqueeze", x, name=name, axes=_axes(b, name, axes_input, axes))


@onnx_op("Concat")
def _concat(b: B, name, *xs, axis):
    """Empty inputs add nothing (their other extents still have to match); an empty result is all of them."""
    (out,) = infer_types("concat", [x.type for x in xs], {"axis": axis}, name)
    if math.prod(out.shape) == 0:  # the builder makes it an empty constant of the concatenated shape
        return b.op("concat", *xs, name=name, axis=axis)
    kept = [x for x in xs if math.prod(upper_shape(x.shape))]
    return b.op("concat", *kept, name=name, axis=axis) if len(kept) > 1 else b.op("identity", kept[0], name=name)


@onnx_op("Slice")
def _slice(b: B, name, x, starts=None, ends=None, axes=None, steps=None, **attrs):
    def ints(v, what):
        data = constant_input(v, what, name)
        return None if data is None else tuple(dim(d) for d in np.ravel(data))
    if b.opset < 10:
        return b.op("slice", x, name=name, starts=tuple(attrs["starts"]), ends=tuple(attrs["ends"]),
                    axes=None if "axes" not in attrs else tuple(attrs["axes"]))
    steps_v = ints(steps, "steps")
    if steps_v is None or min(steps_v) > 0:
        return b.op("slice", x, name=name, starts=ints(starts, "starts"), ends=ints(ends, "ends"),
                    axes=ints(axes, "axes"), steps=steps_v)
    return _slice_backwards(b, name, x, ints(starts, "starts"), ints(ends, "ends"), ints(axes, "axes"), steps_v)


def _slice_backwards(b: B, name, x, starts, ends, axes, steps):
    """A slice with negative steps: the positions each axis keeps (ONNX's clamping: a start in [0, n - 1], an end
    in [-1, n - 1]) gathered one axis at a time."""
    rank = len(x.shape)
    axes = tuple(range(len(starts))) if axes is None else axes
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
        raise ShapeError(f"node {name!r}: Slice starts {starts}, ends {ends}, axes {axes} and steps {steps} must "
                         f"have one entry per sliced axis, and no step may be 0")
    if any(not -rank <= a < rank for a in axes):
        raise ShapeError(f"node {name!r}: Slice axes {axes} must be axes of a rank-{rank} tensor")
    for k, (a, start, end, step) in enumerate(zip(axes, starts, ends, steps)):
        n = x.shape[a % rank]
        start, end = (v + n if v < 0 else v for v in (start, end))
        if step < 0:
            start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
        else:
            start, end = min(max(start, 0), n), min(max(end, 0), n)
        x = b.op("gather", x, b.const(np.arange(start, end, step, dtype=np.int64), f"{name}_positions_{k}"),
                 axis=a % rank, name=name if k == len(axes) - 1 else f"{name}_axis_{k}")
    return x


@onnx_op("Gather")
def _gather(b: B, name, x, indices, *, axis=0):
    if (indices.is_constant and not is_symbolic_array(indices.data) and indices.data.size and x.shape
            and -len(x.shape) <= axis < len(x.shape)):
        n = x.shape[axis]  # out of range is an error, as in ONNX Runtime (the kernel would clamp them)
        if not (provably_le(-n, int(indices.data.min())) and provably_le(int(indices.data.max()) + 1, n)):
            raise ShapeError(f"node {name!r}: Gather indices {indices.data.min()}..{indices.data.max()} are outside "
                             f"[-{n}, {n - 1}], the extent of axis {axis}")
    return b.op("gather", x, indices, name=name, axis=axis)


@onnx_op("Expand")
def _expand(b: B, name, x, shape):
    return b.op("expand", x, name=name, shape=tuple(dim(d) for d in constant_input(shape, "the shape", name)))


@onnx_op("Tile")
def _tile(b: B, name, x, repeats):
    return b.op("tile", x, name=name, repeats=tuple(int(d) for d in constant_input(repeats, "repeats", name)))


def _reduce(op):
    def convert(b: B, name, x, axes_input=None, *, keepdims=1, noop_with_empty_axes=0, axes=None):
        chosen = _axes(b, name, axes_input, axes)
        if chosen == () and noop_with_empty_axes:
            return b.op("identity", x, name=name)
        if x.dtype == "bool" and op in ("reduce_max", "reduce_min"):
            # any / all, over 0 and 1; "> 0" maps the int8 identities of an empty set to False / True
            as_int8 = b.op("cast", x, name=f"{name}_int8", to="int8")
            out = b.op(op, as_int8, name=f"{name}_int8_{op}", axes=chosen or None, keepdims=keepdims)
            return b.op("greater", out, b.const(np.zeros((), np.int8), f"{name}_zero"), name=name)
        return b.op(op, x, name=name, axes=chosen or None, keepdims=keepdims)
    return convert


for _onnx, _op in {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
                   "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod", "ReduceL2": "reduce_l2"}.items():
    onnx_op(_onnx)(_reduce(_op))


def _arg(op):
    def convert(b: B, name, x, *, axis=0, keepdims=1, select_last_index=0):
        return b.op(op, x, name=name, axis=axis, keepdims=keepdims, select_last_index=int(select_last_index))
    return convert


onnx_op("ArgMax")(_arg("argmax"))
onnx_op("ArgMin")(_arg("argmin"))


@onnx_op("Constant")
def _constant(b: B, name, **attrs):
    if "value" in attrs:
        return b.const(tensor_array(attrs["value"], f"node {name!r}: Constant value"), name)
    for key, dtype in (("value_float", "float32"), ("value_int", "int64")):
        if key in attrs:
            return b.const(np.array(attrs[key], dtype), name)
    for key, dtype in (("value_floats", "float32"), ("value_ints", "int64")):
        if key in attrs:
            return b.const(np.array(attrs[key], dtype), name)
    raise UnsupportedFeatureError(f"node {name!r}: Constant with attributes {sorted(attrs)} is not supported")


@onnx_op("Shape")
def _shape(b: B, name, x, *, start=0, end=None):
    """A constant: its dynamic dimensions are expressions in it (`te/dims.py`), which the shape arithmetic after
    it folds as it folds numbers."""
    return b.const(np.array(x.shape[start:end], object), name)


@onnx_op("Size")
def _size(b: B, name, x):
    return b.const(np.array(int(np.prod(x.shape)), "int64"), name)


@onnx_op("ConstantOfShape")
def _constant_of_shape(b: B, name, shape, *, value=None):
    dims = tuple(int(d) for d in constant_input(shape, "the shape", name))
    fill = np.zeros(1, "float32") if value is None else tensor_array(value, f"node {name!r}: value").reshape(-1)
    check_constant(dims, fill.dtype, f"node {name!r} (ConstantOfShape)")
    return b.const(np.full(dims, fill[0], fill.dtype), name)


@onnx_op("Range")
def _range(b: B, name, start, limit, delta):
    """A constant; where the limit is a dynamic dimension's expression, an `arange` of that length."""
    args = [constant_input(v, "Range's inputs", name) for v in (start, limit, delta)]
    first, last, step = (np.asarray(a).item() for a in args)
    if step == 0:
        raise ShapeError(f"node {name!r}: Range with delta 0")
    if any(isinstance(x, E.Expr) for x in (first, last, step)):
        if isinstance(first, E.Expr) or isinstance(step, E.Expr) or step < 0:
            raise UnsupportedFeatureError(f"node {name!r}: Range over dynamic dimensions takes a constant start "
                                          f"and a positive constant delta")
        return b.op("arange", name=name, start=first, delta=step, length=E.ceildiv(last - first, step),
                    dtype=str(start.dtype))
    check_constant((max(0, math.ceil((last - first) / step)),), np.asarray(args[0]).dtype, f"node {name!r} (Range)")
    return b.const(np.arange(first, last, step).astype(np.asarray(args[0]).dtype), name)


@onnx_op("Split")
def _split(b: B, name, x, sizes=None, *, axis=0, num_outputs=None, split=None):
    """One slice per output; the sizes come from the input (opset 13+) or the `split` attribute (before), or the
    axis is cut into equal parts, the last one smaller if need be."""
    a = axis % len(x.shape)
    n = x.shape[a]
    if n == 0:  # whatever the sizes (a run-time input, say), every part is empty
        split = [0] * b.node_outputs
    elif sizes is not None:
        split = [int(s) for s in constant_input(sizes, "split", name)]
    if num_outputs is not None and num_outputs != b.node_outputs:
        raise ShapeError(f"node {name!r}: Split with num_outputs={num_outputs} has {b.node_outputs} output(s)")
    if split is None:
        parts = b.node_outputs
        step = -(-n // parts)
        split = [min(step, n - i * step) for i in range(parts)]
    split = [int(s) for s in split]
    if len(split) != b.node_outputs:
        raise ShapeError(f"node {name!r}: Split into {len(split)} part(s) has {b.node_outputs} output(s)")
    if sum(split) != n or min(split) < 0:
        raise ShapeError(f"node {name!r}: split sizes {split} must not be negative and must add up to the extent "
                         f"{n} of axis {axis}")
    starts = np.cumsum([0] + split[:-1])
    return tuple(b.op("slice", x, name=f"{name}_{i}", starts=(int(s),), ends=(int(s) + k,), axes=(a,))
                 for i, (s, k) in enumerate(zip(starts, split)))


@onnx_op("Trilu")
def _trilu(b: B, name, x, k=None, *, upper=1):
    if math.prod(x.shape) == 0:  # empty whatever k is
        return b.const(np.zeros(x.shape, x.dtype), name)
    shift = constant_input(k, "k", name)
    return b.op("trilu", x, name=name, upper=int(upper), k=0 if shift is None else int(np.asarray(shift).item()))


@onnx_op("CumSum")
def _cumsum(b: B, name, x, axis, *, exclusive=0, reverse=0):
    a = int(np.asarray(constant_input(axis, "axis", name)).item())
    return b.op("cumsum", x, name=name, axis=a, exclusive=int(exclusive), reverse=int(reverse))


@onnx_op("Einsum")
def _einsum(b: B, name, *xs, equation):
    return b.op("einsum", *xs, name=name, equation=equation)


@onnx_op("Pow")
def _pow(b: B, name, x, y):
    """ONNX Pow allows an integer base and an exponent of another type; the power is taken in float64 when the
    base is an integer or either operand is float64 (so no digit is lost), else in float32, and the result has the
    base's type."""
    if x.dtype == y.dtype and "float" in x.dtype:
        return b.op("pow", x, y, name=name)
    wide = "float64" if "float64" in (x.dtype, y.dtype) or "float" not in x.dtype else "float32"
    base = x if x.dtype == wide else b.op("cast", x, name=f"{name}_base", to=wide)
    exponent = y if y.dtype == wide else b.op("cast", y, name=f"{name}_exponent", to=wide)
    out = b.op("pow", base, exponent, name=name)
    return out if x.dtype == wide else b.op("cast", out, name=f"{name}_result", to=x.dtype)


# --- trigonometry, activations, float tests, Mod, CastLike and LRN ---

_UNARY_MATH = {"Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
               "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
               "Softplus": "softplus", "Softsign": "softsign", "Mish": "mish", "IsNaN": "is_nan", "Sign": "sign",
               "Floor": "floor", "Ceil": "ceil", "Round": "round"}
onnx_op("PRelu")(_binary("prelu"))
for _onnx, _op in _UNARY_MATH.items():
    onnx_op(_onnx)(_unary(_op))


@onnx_op("Mod")
def _mod(b: B, name, x, y, *, fmod=0):
    _nonzero_divisor(name, y)
    return b.op("mod", x, y, name=name, fmod=int(fmod))


for _onnx, _op in (("BitwiseAnd", "bitwise_and"), ("BitwiseOr", "bitwise_or"), ("BitwiseXor", "bitwise_xor")):
    onnx_op(_onnx)(_binary(_op))
onnx_op("BitwiseNot")(_unary("bitwise_not"))


@onnx_op("BitShift")
def _bit_shift(b: B, name, x, y, *, direction):
    if direction not in ("LEFT", "RIGHT"):
        raise UnsupportedFeatureError(f"node {name!r}: BitShift direction={direction!r} is not LEFT or RIGHT")
    return b.op("bit_shift", x, y, name=name, left=direction == "LEFT")


@onnx_op("CastLike")
def _cast_like(b: B, name, x, like, *, saturate=1):
    return b.op("cast", x, name=name, to=like.dtype)


@onnx_op("LRN")
def _lrn(b: B, name, x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    return b.op("lrn", x, name=name, size=int(size), alpha=float(alpha), beta=float(beta), bias=float(bias))


@onnx_op("Elu")
def _elu(b: B, name, x, *, alpha=1.0):
    return b.op("elu", x, name=name, alpha=float(alpha))


@onnx_op("Selu")
def _selu(b: B, name, x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return b.op("selu", x, name=name, alpha=float(alpha), gamma=float(gamma))


@onnx_op("Celu")
def _celu(b: B, name, x, *, alpha=1.0):
    return b.op("celu", x, name=name, alpha=float(alpha))


@onnx_op("ThresholdedRelu")
def _thresholded_relu(b: B, name, x, *, alpha=1.0):
    return b.op("thresholded_relu", x, name=name, alpha=float(alpha))


@onnx_op("Shrink")
def _shrink(b: B, name, x, *, bias=0.0, lambd=0.5):
    return b.op("shrink", x, name=name, bias=float(bias), lambd=float(lambd))


@onnx_op("IsInf")
def _is_inf(b: B, name, x, *, detect_negative=1, detect_positive=1):
    return b.op("is_inf", x, name=name, detect_negative=int(detect_negative), detect_positive=int(detect_positive))


def _reduce_of(before, op, after=None):
    """A reduction of a map of x, then a map of its result (ReduceL1: the sum of |x|; ReduceLogSum: the log of the
    sum). With no axes and noop_with_empty_axes the maps' meaning is unclear, so that case is refused."""
    def convert(b: B, name, x, axes_input=None, *, keepdims=1, noop_with_empty_axes=0, axes=None):
        chosen = _axes(b, name, axes_input, axes)
        if chosen == () and noop_with_empty_axes:
            raise UnsupportedFeatureError(f"node {name!r}: noop_with_empty_axes=1 with no axes is not supported")
        mapped = before(b, f"{name}_map", x) if before else x
        out = b.op(op, mapped, name=name if after is None else f"{name}_reduce", axes=chosen or None,
                   keepdims=keepdims)
        return out if after is None else b.op(after, out, name=name)
    return convert


onnx_op("ReduceL1")(_reduce_of(lambda b, name, x: b.op("abs", x, name=name), "reduce_sum"))
onnx_op("ReduceSumSquare")(_reduce_of(lambda b, name, x: b.op("mul", x, x, name=name), "reduce_sum"))
onnx_op("ReduceLogSum")(_reduce_of(None, "reduce_sum", "log"))


@onnx_op("ReduceLogSumExp")
def _reduce_log_sum_exp(b: B, name, x, axes_input=None, *, keepdims=1, noop_with_empty_axes=0, axes=None):
    """log(sum(exp(x - max))) + max: the maximum keeps exp from overflowing. An infinite maximum shifts by 0
    instead, so rows holding inf or only -inf give inf or -inf (as ONNX Runtime does), not inf - inf = NaN."""
    chosen = _axes(b, name, axes_input, axes)
    if chosen == () and noop_with_empty_axes:
        raise UnsupportedFeatureError(f"node {name!r}: noop_with_empty_axes=1 with no axes is not supported")

    def finite_max(suffix, keep):
        top = b.op("reduce_max", x, name=f"{name}_{suffix}", axes=chosen or None, keepdims=keep)
        zero = b.const(np.zeros((), x.dtype), f"{name}_{suffix}_zero")
        infinite = b.op("is_inf", top, name=f"{name}_{suffix}_inf")
        return b.op("where", infinite, zero, top, name=f"{name}_{suffix}_finite")

    kept = finite_max("max", 1)
    shifted = b.op("exp", b.op("sub", x, kept, name=f"{name}_shift"), name=f"{name}_exp")
    logs = b.op("log", b.op("reduce_sum", shifted, name=f"{name}_sum", axes=chosen or None, keepdims=keepdims),
                name=f"{name}_log")
    top = kept if keepdims else finite_max("max_dropped", 0)
    return b.op("add", logs, top, name=name)
