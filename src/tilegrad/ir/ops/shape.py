"""Shape and data-movement ops with ONNX semantics: reshape, transpose, flatten, squeeze, unsqueeze, concat, slice,
gather, gather_elements, expand, pad, identity and tile.

Every output element is one read of an input, so the computes (mostly `te.nn.transform`'s) inline into their
consumers. A slice that selects nothing has an extent of 0; the frontend makes such a result an empty constant,
so no compute sees it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ...errors import ShapeError, UnsupportedFeatureError
from ...te import expr as E
from ...te import nn
from ...te import tensor as te
from ...te.dims import clamp, dim, divides, equal, is_negative, is_static, product, quotient
from ..registry import BROADCAST, ELEMWISE, INJECTIVE, Sample, TensorType, declare, same_as_input

INT64_MAX = 2**63 - 1


def ints(value, what: str) -> tuple[int, ...]:
    """An attribute that must be a sequence of integers, as Python ints."""
    items = [value] if isinstance(value, numbers.Integral) else value
    try:
        out = tuple(items)
    except TypeError:
        out = None
    if out is None or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in out):
        raise ShapeError(f"{what} must be a sequence of integers, got {value!r}")
    return tuple(int(v) for v in out)


def shape_attr(value, what: str) -> tuple:
    """A shape attribute: `ints`, where an extent may also be an expression of dynamic dimensions."""
    items = tuple(value) if isinstance(value, (tuple, list)) else value
    if isinstance(items, tuple) and any(isinstance(v, E.Expr) for v in items):
        return tuple(dim(v) if isinstance(v, E.Expr) else ints(v, what)[0] for v in items)
    return ints(value, what)


def normalize_axis(axis, ndim: int, what: str = "axis") -> int:
    """`axis` in [0, ndim), counting negative axes from the end as ONNX does."""
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool) or not -ndim <= axis < ndim:
        raise ShapeError(f"{what} {axis!r} is out of range for rank {ndim}; expected {-ndim} to {ndim - 1}")
    return int(axis) % ndim


def normalize_axes(axes, ndim: int, what: str = "axes") -> tuple[int, ...]:
    """Distinct axes in [0, ndim), in the order given."""
    out = tuple(normalize_axis(a, ndim, what) for a in ints(axes, what))
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} {tuple(axes)} name an axis twice")
    return out


def _required(value, attr: str, op: str):
    if value is None:
        raise ShapeError(f"{op} needs the attribute {attr!r}")
    return value


# --- reshape, flatten, squeeze, unsqueeze: the same elements in another shape ---

def _reshape_shape(in_shape: tuple[int, ...], shape) -> tuple[int, ...]:
    """`shape` with each 0 copied from the input (ONNX allowzero=0) and its -1 inferred from the element count."""
    shape = shape_attr(_required(shape, "shape", "reshape"), "reshape shape")
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape shape {shape} has more than one -1; at most one extent can be inferred")
    if any(not isinstance(n, E.Expr) and n < -1 for n in shape):
        raise ShapeError(f"reshape shape {shape} has a negative extent other than -1")
    if any(n == 0 and d >= len(in_shape) for d, n in enumerate(shape)):
        raise ShapeError(f"reshape shape {shape} has a 0 (copy the input extent) beyond the input's rank "
                         f"{len(in_shape)}")
    out = [in_shape[d] if n == 0 else n for d, n in enumerate(shape)]
    size = product(in_shape)
    if -1 in out:
        known = product(n for n in out if not equal(n, -1))
        if not divides(known, size):
            raise ShapeError(f"reshape: {size} elements cannot fill shape {shape}: {size} is not a multiple of "
                             f"{known}")
        out[out.index(-1)] = quotient(size, known)
    if not equal(product(out), size):
        raise ShapeError(f"reshape: {size} elements do not fit shape {shape} (resolved to {tuple(out)})")
    return tuple(out)


def _reshape_ref(x, shape):
    return np.reshape(x, [x.shape[d] if n == 0 else n for d, n in enumerate(shape)])


def _flatten_shape(in_shape: tuple[int, ...], axis) -> tuple[int, int]:
    r = len(in_shape)
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool) or not -r <= axis <= r:
        raise ShapeError(f"flatten axis {axis!r} is out of range for rank {r}; expected {-r} to {r}")
    a = int(axis) % r if axis != r else r
    return math.prod(in_shape[:a]), math.prod(in_shape[a:])


def _squeeze_shape(in_shape: tuple[int, ...], axes) -> tuple[int, ...]:
    if axes is None:
        return tuple(n for n in in_shape if n != 1)
    axes = normalize_axes(axes, len(in_shape), "squeeze axes")
    wide = [a for a in axes if in_shape[a] != 1]
    if wide:
        raise ShapeError(f"squeeze axes {wide} have extents {[in_shape[a] for a in wide]}, not 1")
    return tuple(n for d, n in enumerate(in_shape) if d not in axes)


def _unsqueeze_shape(in_shape: tuple[int, ...], axes) -> tuple[int, ...]:
    axes = ints(_required(axes, "axes", "unsqueeze"), "unsqueeze axes")
    axes = normalize_axes(axes, len(in_shape) + len(axes), "unsqueeze axes")
    rest = iter(in_shape)
    return tuple(1 if d in axes else next(rest) for d in range(len(in_shape) + len(axes)))


def _keeps_dtype(rule):
    """The type rule of an op whose output has the input's dtype and the shape `rule(input shape, **attrs)`."""
    return lambda x, **attrs: [TensorType(rule(x.shape, **attrs), x.dtype)]


declare("reshape", view=True, kind=INJECTIVE, attrs={"shape": None}, infer=_keeps_dtype(_reshape_shape),
        reference=_reshape_ref,
        compute=lambda x, shape: nn.reshape(x, _reshape_shape(x.shape, shape)),
        samples=(Sample((((2, 3, 4), "float32"),), {"shape": (0, -1)}),
                 Sample((((2, 3, 4), "float32"),), {"shape": (4, 0, -1)}),
                 Sample((((6,), "int32"),), {"shape": (1, 2, -1)})))
declare("flatten", view=True, kind=INJECTIVE, attrs={"axis": 1}, infer=_keeps_dtype(_flatten_shape),
        reference=lambda x, axis: x.reshape(math.prod(x.shape[:axis]), -1),
        compute=lambda x, axis: nn.flatten(x, axis),
        samples=(Sample((((2, 3, 4, 5), "float32"),), {"axis": -2}), Sample((((2, 3, 4), "float32"),), {"axis": 0})))
declare("squeeze", view=True, kind=INJECTIVE, attrs={"axes": None}, infer=_keeps_dtype(_squeeze_shape),
        reference=lambda x, axes: np.squeeze(x, None if axes is None else tuple(axes)),
        compute=lambda x, axes: nn.reshape(x, _squeeze_shape(x.shape, axes), name="squeeze"),
        samples=(Sample((((1, 3, 1, 4), "float32"),)), Sample((((1, 3, 1, 4), "float32"),), {"axes": (-2,)})))
declare("unsqueeze", view=True, kind=INJECTIVE, attrs={"axes": None}, infer=_keeps_dtype(_unsqueeze_shape),
        reference=lambda x, axes: np.expand_dims(x, tuple(axes)),
        compute=lambda x, axes: nn.reshape(x, _unsqueeze_shape(x.shape, axes), name="unsqueeze"),
        samples=(Sample((((3, 4), "float32"),), {"axes": (0, -1)}), Sample((((3, 4), "float32"),), {"axes": (1,)})))


# --- transpose, concat ---

def _perm(ndim: int, perm) -> tuple[int, ...]:
    perm = tuple(reversed(range(ndim))) if perm is None else ints(perm, "transpose perm")
    if sorted(perm) != list(range(ndim)):
        raise ShapeError(f"transpose perm {perm} is not a permutation of the {ndim} axes (0 to {ndim - 1})")
    return perm


def _concat(*xs: TensorType, axis) -> list[TensorType]:
    first = xs[0]
    if len({x.dtype for x in xs}) != 1:
        raise ShapeError(f"concat operands have different dtypes {sorted({x.dtype for x in xs})}; insert a Cast")
    a = normalize_axis(axis, len(first.shape), "concat axis")
    rest = first.shape[:a] + first.shape[a + 1:]
    for x in xs[1:]:
        if len(x.shape) != len(first.shape) or x.shape[:a] + x.shape[a + 1:] != rest:
            raise ShapeError(f"concat operands {first.shape} and {x.shape} differ outside axis {a}")
    return [TensorType(first.shape[:a] + (dim(sum(x.shape[a] for x in xs)),) + first.shape[a + 1:], first.dtype)]


declare("transpose", kind=INJECTIVE, attrs={"perm": None},
        infer=lambda x, perm: [TensorType(tuple(x.shape[p] for p in _perm(len(x.shape), perm)), x.dtype)],
        reference=lambda x, perm: np.transpose(x, perm),
        compute=lambda x, perm: nn.transpose(x, _perm(x.ndim, perm)),
        samples=(Sample((((2, 3, 4), "float32"),)), Sample((((2, 3, 4, 5), "float32"),), {"perm": (1, 3, 0, 2)})))
declare("concat", kind=INJECTIVE, attrs={"axis": 0}, infer=_concat,
        reference=lambda *xs, axis: np.concatenate(xs, axis),
        compute=lambda *xs, axis: nn.concat(xs, axis),
        num_inputs=(1, -1),
        samples=(Sample((((2, 3), "float32"), ((2, 5), "float32"), ((2, 1), "float32")), {"axis": -1}),
                 Sample((((1, 4), "int64"), ((3, 4), "int64")), {"axis": 0})))


# --- slice, gather ---

def _slice_plan(in_shape: tuple[int, ...], starts, ends, axes, steps) -> list[tuple[int, int, int, int]]:
    """(axis, begin, step, extent) per sliced axis, with ONNX's negative indices and clamping into the extent."""
    starts = shape_attr(_required(starts, "starts", "slice"), "slice starts")
    ends = shape_attr(_required(ends, "ends", "slice"), "slice ends")
    axes = tuple(range(len(starts))) if axes is None else normalize_axes(axes, len(in_shape), "slice axes")
    steps = (1,) * len(starts) if steps is None else ints(steps, "slice steps")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ShapeError(f"slice starts {starts}, ends {ends}, axes {axes} and steps {steps} must have one entry "
                         f"per sliced axis")
    if len(axes) > len(in_shape):
        raise ShapeError(f"slice has {len(axes)} starts for a tensor of rank {len(in_shape)}")
    plan = []
    for a, start, end, step in zip(axes, starts, ends, steps):
        if step <= 0:
            raise UnsupportedFeatureError(f"slice step {step} on axis {a} is not supported: steps must be positive")
        n = in_shape[a]
        lo, hi = (clamp(dim(v + n) if is_negative(v) else v, 0, n) for v in (start, end))
        extent = dim(E.ceildiv(E.as_expr(hi) - lo, step)) if not is_static((lo, hi)) else -(-(hi - lo) // step)
        plan.append((a, lo, step, clamp(extent, 0, INT64_MAX)))
    return plan


def _slice_shape(in_shape: tuple[int, ...], starts, ends, axes, steps) -> tuple[int, ...]:
    shape = list(in_shape)
    for a, _, _, extent in _slice_plan(in_shape, starts, ends, axes, steps):
        shape[a] = extent
    return tuple(shape)


def _slice_ref(x, starts, ends, axes, steps):
    index = [slice(None)] * x.ndim
    axes = range(len(starts)) if axes is None else axes
    for a, start, end, step in zip(axes, starts, ends, steps or (1,) * len(starts)):
        index[a] = slice(start, end, step)
    return x[tuple(index)]


def _slice_te(x, starts, ends, axes, steps):
    axes, begins, steps, extents = zip(*_slice_plan(x.shape, starts, ends, axes, steps))
    return nn.slice(x, begins, [b + s * (n - 1) + 1 for b, s, n in zip(begins, steps, extents)], axes, steps)


def _gather(data: TensorType, indices: TensorType, axis) -> list[TensorType]:
    if indices.dtype not in ("int32", "int64"):
        raise ShapeError(f"gather indices must be int32 or int64, got {indices.dtype}")
    a = normalize_axis(axis, len(data.shape), "gather axis")
    return [TensorType(data.shape[:a] + indices.shape + data.shape[a + 1:], data.dtype)]


declare("slice", kind=INJECTIVE, attrs={"starts": None, "ends": None, "axes": None, "steps": None},
        infer=_keeps_dtype(_slice_shape), reference=_slice_ref, compute=_slice_te,
        samples=(Sample((((6, 7, 5), "float32"),), {"starts": (-4, 1), "ends": (INT64_MAX, -1), "axes": (0, -1),
                                                     "steps": (2, 1)}),
                 Sample((((10, 3), "float32"),), {"starts": (-100, 0), "ends": (9, 2), "steps": (3, 1)})))
declare("gather", kind=INJECTIVE, attrs={"axis": 0}, infer=_gather,
        reference=lambda data, indices, axis: np.take(data, indices, axis=axis),
        compute=lambda data, indices, axis: nn.gather(data, indices, axis), num_inputs=2,
        samples=(Sample((((5, 4), "float32"), ((2, 3), "int64"))),
                 Sample((((3, 6, 2), "float32"), ((4,), "int64")), {"axis": -2})))


def _gather_elements(data: TensorType, indices: TensorType, axis) -> list[TensorType]:
    if indices.dtype not in ("int32", "int64"):
        raise ShapeError(f"gather_elements indices must be int32 or int64, got {indices.dtype}")
    a = normalize_axis(axis, len(data.shape), "gather_elements axis")
    if len(indices.shape) != len(data.shape) or any(m > n for d, (m, n) in enumerate(zip(indices.shape, data.shape))
                                                    if d != a):
        raise ShapeError(f"gather_elements indices of shape {indices.shape} must have the rank of the data "
                         f"{data.shape} and no larger extent outside axis {a}")
    return [TensorType(indices.shape, data.dtype)]


def _gather_elements_ref(data, indices, axis):
    a = axis % data.ndim
    index = list(np.indices(indices.shape, sparse=True))
    index[a] = np.where(indices < 0, indices + data.shape[a], indices)
    return data[tuple(index)]


declare("gather_elements", kind=INJECTIVE, attrs={"axis": 0}, infer=_gather_elements,
        reference=_gather_elements_ref, compute=lambda data, indices, axis: nn.gather_elements(data, indices, axis),
        num_inputs=2, samples=(Sample((((4, 5), "float32"), ((6, 5), "int64"))),
                               Sample((((3, 6, 4), "float32"), ((2, 3, 4), "int32")), {"axis": -1})))


# --- expand, pad, tile, identity ---

def _expand_shape(in_shape: tuple[int, ...], shape) -> tuple[int, ...]:
    shape = shape_attr(_required(shape, "shape", "expand"), "expand shape")
    if any(is_negative(n) for n in shape):
        raise ShapeError(f"expand shape {shape} must not have negative extents")
    return nn.broadcast_shape(in_shape, shape)


def _pad_pairs(x, pads, value, mode) -> tuple[tuple[int, int], ...]:
    """(begin, end) per axis from ONNX pads (all the begins, then all the ends); x is a tensor or TensorType."""
    if mode != "constant":
        raise ShapeError(f"pad mode {mode!r} is not supported; only 'constant' is")
    pads, r = ints(_required(pads, "pads", "pad"), "pads"), len(x.shape)
    if len(pads) != 2 * r:
        raise ShapeError(f"pads {pads} must have {2 * r} entries for rank {r}: all the begins, then all the ends")
    if any(p < 0 for p in pads):
        raise ShapeError(f"negative pads {pads} (cropping) are not supported; slice the tensor instead")
    if not E.is_float(x.dtype) and not float(value).is_integer():
        raise ShapeError(f"pad value {value} does not fit dtype {x.dtype}")
    return tuple(zip(pads[:r], pads[r:]))


def _pad(x: TensorType, **attrs) -> list[TensorType]:
    return [TensorType(tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, _pad_pairs(x, **attrs))), x.dtype)]


def _pad_te(x, pads, value, mode):
    pairs = _pad_pairs(x, pads, value, mode)
    return nn.pad(x, pairs, value if E.is_float(x.dtype) else int(value))


def _pad_ref(x, pads, value, mode):
    pairs = list(zip(pads[:x.ndim], pads[x.ndim:]))
    return np.pad(x, pairs, mode, **({"constant_values": value} if mode == "constant" else {}))


def _tile_shape(in_shape: tuple[int, ...], repeats) -> tuple[int, ...]:
    repeats = ints(_required(repeats, "repeats", "tile"), "tile repeats")
    if len(repeats) != len(in_shape):
        raise ShapeError(f"tile repeats {repeats} must have one entry per axis of the rank-{len(in_shape)} input")
    if any(n < 0 for n in repeats):
        raise ShapeError(f"tile repeats {repeats} must not be negative")
    return tuple(n * k for n, k in zip(in_shape, repeats))


def _tile_te(x, repeats):
    shape = _tile_shape(x.shape, repeats)
    return te.compute(shape, lambda *i: x[tuple(v if n == m else v % n for v, n, m in zip(i, x.shape, shape))],
                      name="tile", tag="injective", attrs={"repeats": tuple(repeats)})


declare("expand", kind=BROADCAST, attrs={"shape": None}, infer=_keeps_dtype(_expand_shape),
        reference=lambda x, shape: x * np.ones(shape, x.dtype),
        compute=lambda x, shape: nn.expand(x, _expand_shape(x.shape, shape)),
        samples=(Sample((((3, 1), "float32"),), {"shape": (2, 1, 4)}), Sample((((4,), "int32"),), {"shape": (3, 1)})))
declare("pad", kind=INJECTIVE, attrs={"pads": None, "value": 0.0, "mode": "constant"}, infer=_pad, reference=_pad_ref, compute=_pad_te,
        samples=(Sample((((3, 4), "float32"),), {"pads": (1, 0, 2, 3), "value": -1.5}),
                 Sample((((2, 3, 2), "int32"),), {"pads": (0, 1, 0, 0, 2, 1)})))
declare("tile", kind=INJECTIVE, attrs={"repeats": None}, infer=_keeps_dtype(_tile_shape),
        reference=lambda x, repeats: np.tile(x, repeats), compute=_tile_te,
        samples=(Sample((((2, 3), "float32"),), {"repeats": (2, 3)}),
                 Sample((((1, 4, 2), "float32"),), {"repeats": (3, 1, 2)})))
declare("identity", view=True, kind=ELEMWISE, infer=same_as_input, reference=np.copy,
        compute=lambda x: te.compute(x.shape, lambda *i: x[i], name="identity", tag="elemwise"),
        samples=(Sample((((4, 33), "float32"),)), Sample((((2, 3), "bool"),))), finite=True)


def _dilate_type(x: TensorType, *, strides) -> list[TensorType]:
    strides = tuple(int(s) for s in strides)
    if len(strides) != len(x.shape) - 2 or min(strides) < 1:
        raise ShapeError(f"dilate: strides {strides} must be positive, one per spatial axis of {x.shape}")
    return [TensorType((*x.shape[:2], *((n - 1) * s + 1 for n, s in zip(x.shape[2:], strides))), x.dtype)]


def _dilate_ref(x, *, strides):
    out = np.zeros(_dilate_type(TensorType(x.shape, str(x.dtype)), strides=strides)[0].shape, x.dtype)
    out[(slice(None), slice(None), *(slice(None, None, int(s)) for s in strides))] = x
    return out


def _dilate_te(x, *, strides):
    strides = tuple(int(s) for s in strides)
    shape = _dilate_type(TensorType(x.shape, x.dtype), strides=strides)[0].shape

    def body(*i):
        spatial = i[2:]
        hit = E.all_of((v % s).eq(0) for v, s in zip(spatial, strides) if s > 1)
        return E.select(hit, x[(*i[:2], *(v // s for v, s in zip(spatial, strides)))], E.const(0, x.dtype))

    return te.compute(shape, body, name="dilate", tag="injective")


declare("dilate", kind=INJECTIVE, attrs={"strides": (1, 1)}, infer=_dilate_type, reference=_dilate_ref,
        compute=_dilate_te, samples=(Sample((((1, 2, 3, 4), "float32"),), {"strides": (2, 3)}),))
