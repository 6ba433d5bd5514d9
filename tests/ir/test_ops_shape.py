"""The shape ops of `ir/ops/shape.py`: each sample compiled with its default schedule against the NumPy reference,
the type rule against the reference's output, and the errors a bad attribute or shape gets."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import ShapeError
from tilegrad.ir.registry import INJECTIVE, TensorType, lookup
from tilegrad.schedule.defaults import default_schedule

NAMES = ["reshape", "transpose", "flatten", "squeeze", "unsqueeze", "concat", "slice", "gather", "expand", "pad",
         "tile", "identity"]
CASES = [pytest.param(name, k, id=f"{name}-{k}") for name in NAMES for k in range(len(lookup(name).samples))]


def _inputs(name: str, sample, attrs: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Random arrays of the sample's types; gather's indices lie in [-n, n) for the gathered extent n."""
    arrays = []
    for k, (shape, dtype) in enumerate(sample.inputs):
        if name == "gather" and k == 1:
            n = sample.inputs[0][0][attrs["axis"]]
            arrays.append(rng.integers(-n, n, shape).astype(dtype))
        elif dtype == "bool":
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.startswith("int"):
            arrays.append(rng.integers(-50, 50, shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


@pytest.mark.parametrize("name, k", CASES)
def test_compiled_sample_matches_reference_and_type_rule(name, k):
    op = lookup(name)
    sample = op.samples[k]
    attrs = op.bind_attrs(sample.attrs, name)
    args = [te.placeholder(shape, dtype, name=f"x{j}") for j, (shape, dtype) in enumerate(sample.inputs)]
    out = op.compute(*args, **attrs)
    kern = build(default_schedule(out), args=args + [out])
    arrays = _inputs(name, sample, attrs, np.random.default_rng(k))
    expected = op.reference(*arrays, **attrs)
    np.testing.assert_array_equal(kern.run(*arrays), expected)
    types = op.infer(*(TensorType(shape, dtype) for shape, dtype in sample.inputs), **attrs)
    assert types == [TensorType(expected.shape, str(expected.dtype))]


def test_every_shape_op_is_declared_with_samples():
    for name in NAMES:
        op = lookup(name)
        assert op.samples and op.infer and op.reference and op.compute
        assert op.kind == {"expand": "broadcast", "identity": "elemwise"}.get(name, INJECTIVE)
    assert lookup("concat").num_inputs == (1, -1)


def _infer(name, *types, **attrs):
    op = lookup(name)
    return op.infer(*(TensorType(*t) for t in types), **op.bind_attrs(attrs, name))


@pytest.mark.parametrize("shape, expected", [
    ((0, -1), (2, 12)), ((-1, 0, 1), (8, 3, 1)), ((24,), (24,)), ((0, 0, 0), (2, 3, 4)), ((1, -1, 2), (1, 12, 2)),
])
def test_reshape_copies_zeros_and_infers_one_extent(shape, expected):
    assert _infer("reshape", ((2, 3, 4), "float32"), shape=shape) == [TensorType(expected, "float32")]


def test_slice_clamps_and_counts_from_the_end():
    x = ((10, 6), "float32")
    assert _infer("slice", x, starts=(-3,), ends=(2**63 - 1,))[0].shape == (3, 6)
    assert _infer("slice", x, starts=(-2**63, 1), ends=(4, -1), axes=(1, 0))[0].shape == (8, 4)
    assert _infer("slice", x, starts=(1,), ends=(100,), axes=(-1,), steps=(2,))[0].shape == (10, 3)
    assert _infer("slice", x, starts=(3,), ends=(3,))[0].shape == (0, 6)  # selects nothing: an empty tensor
    assert _infer("slice", x, starts=(5,), ends=(2,), axes=(1,))[0].shape == (10, 0)


def test_gather_takes_the_shape_of_its_indices():
    assert _infer("gather", ((5, 4, 3), "float32"), ((2, 6), "int64"), axis=1) == [TensorType((5, 2, 6, 3),
                                                                                                "float32")]


@pytest.mark.parametrize("name, types, attrs, message", [
    ("reshape", [((2, 3, 4), "float32")], {"shape": (5, -1)}, "24 elements cannot fill shape \\(5, -1\\)"),
    ("reshape", [((2, 3, 4), "float32")], {"shape": (-1, 4, -1)}, "more than one -1"),
    ("reshape", [((2, 3, 4), "float32")], {"shape": (7, 3)}, "24 elements do not fit shape \\(7, 3\\)"),
    ("reshape", [((2, 3), "float32")], {"shape": (6, 1, 0)}, "0 \\(copy the input extent\\) beyond the input's rank"),
    ("reshape", [((2, 3), "float32")], {}, "reshape needs the attribute 'shape'"),
    ("transpose", [((2, 3, 4), "float32")], {"perm": (0, 2, 2)}, "not a permutation of the 3 axes"),
    ("flatten", [((2, 3), "float32")], {"axis": 3}, "flatten axis 3 is out of range for rank 2; expected -2 to 2"),
    ("squeeze", [((1, 3), "float32")], {"axes": (1,)}, "squeeze axes \\[1\\] have extents \\[3\\], not 1"),
    ("unsqueeze", [((3, 4), "float32")], {"axes": (3,)}, "unsqueeze axes 3 is out of range for rank 3"),
    ("unsqueeze", [((3, 4), "float32")], {"axes": (0, -4)}, "name an axis twice"),
    ("concat", [((2, 3), "float32"), ((3, 3), "float32")], {"axis": 1}, "differ outside axis 1"),
    ("concat", [((2, 3), "float32"), ((2, 3), "int32")], {"axis": 0}, "different dtypes"),
    ("concat", [((2, 3), "float32")], {"axis": -3}, "concat axis -3 is out of range for rank 2"),
    ("slice", [((5,), "float32")], {"starts": (4,), "ends": (0,), "steps": (-1,)}, "steps must be positive"),
    ("slice", [((5,), "float32")], {"starts": (1,), "ends": (3,), "axes": (1,)}, "slice axes 1 is out of range"),
    ("slice", [((5, 2), "float32")], {"starts": (1, 0), "ends": (3,)}, "must have one entry per sliced axis"),
    ("gather", [((5,), "float32"), ((2,), "float32")], {}, "gather indices must be int32 or int64"),
    ("gather", [((5,), "float32"), ((2,), "int64")], {"axis": 1}, "gather axis 1 is out of range for rank 1"),
    ("expand", [((3, 2), "float32")], {"shape": (4, 1)}, "do not broadcast"),
    ("pad", [((3, 4), "float32")], {"pads": (1, 1, 1, 1), "mode": "reflect"}, "pad mode 'reflect' is not supported"),
    ("pad", [((3, 4), "float32")], {"pads": (1, 1)}, "must have 4 entries for rank 2"),
    ("pad", [((3, 4), "float32")], {"pads": (0, -1, 0, 0)}, "negative pads .* are not supported"),
    ("pad", [((3, 4), "int32")], {"pads": (0, 1, 0, 0), "value": 0.5}, "pad value 0.5 does not fit dtype int32"),
    ("tile", [((3, 4), "float32")], {"repeats": (2,)}, "one entry per axis of the rank-2 input"),
    ("tile", [((3, 4), "float32")], {"repeats": (2, -1)}, "must not be negative"),
    ("expand", [((3, 1), "float32")], {"shape": (3, -2)}, "must not have negative extents"),
])
def test_errors_say_what_to_change(name, types, attrs, message):
    with pytest.raises(ShapeError, match=message):
        _infer(name, *types, **attrs)


def test_compute_raises_what_the_type_rule_raises():
    x = te.placeholder((2, 3, 4), name="x")
    with pytest.raises(ShapeError, match="more than one -1"):
        lookup("reshape").compute(x, shape=(-1, -1))
    with pytest.raises(ShapeError, match="only 'constant' is"):
        lookup("pad").compute(x, pads=(0,) * 6, value=0.0, mode="edge")
