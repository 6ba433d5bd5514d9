"""The reductions of `ir/ops/reduce.py`: each sample compiled with its default schedule against the NumPy reference,
the type rule against the reference's output, the ties of argmax and argmin, and the errors a bad attribute or
dtype gets."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import ShapeError
from tilegrad.ir.registry import REDUCTION, TensorType, lookup
from tilegrad.schedule.defaults import default_schedule

NAMES = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_l2", "argmax", "argmin"]
CASES = [pytest.param(name, k, id=f"{name}-{k}") for name in NAMES for k in range(len(lookup(name).samples))]


def _random(shape, dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype.startswith("int"):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _run(name: str, arrays: list[np.ndarray], **attrs) -> np.ndarray:
    op = lookup(name)
    attrs = op.bind_attrs(attrs, name)
    args = [te.placeholder(a.shape, str(a.dtype), name=f"x{j}") for j, a in enumerate(arrays)]
    out = op.compute(*args, **attrs)
    return build(default_schedule(out), args=args + [out]).run(*arrays)


@pytest.mark.parametrize("name, k", CASES)
def test_compiled_sample_matches_reference_and_type_rule(name, k):
    op = lookup(name)
    sample = op.samples[k]
    attrs = op.bind_attrs(sample.attrs, name)
    rng = np.random.default_rng(k)
    arrays = [_random(shape, dtype, rng) for shape, dtype in sample.inputs]
    expected = op.reference(*arrays, **attrs)
    got = _run(name, arrays, **sample.attrs)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    types = op.infer(*(TensorType(shape, dtype) for shape, dtype in sample.inputs), **attrs)
    assert types == [TensorType(expected.shape, str(expected.dtype))]


def test_every_reduction_is_declared_with_samples():
    for name in NAMES:
        op = lookup(name)
        assert op.kind == REDUCTION and op.samples and op.infer and op.reference and op.compute
        arg = {"axis": 0, "keepdims": 1, "select_last_index": 0}
        assert op.attrs == (arg if name.startswith("arg") else {"axes": None, "keepdims": 1})


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_min"])
def test_integer_reductions_keep_the_dtype(name):
    x = np.random.default_rng(0).integers(-100, 100, (4, 9)).astype(np.int32)
    got = _run(name, [x], axes=(-1,), keepdims=0)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, lookup(name).reference(x, axes=(-1,), keepdims=0))


def test_argmax_picks_the_first_of_equal_maxima():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-5, -1, -9, -1]], np.float32)
    np.testing.assert_array_equal(_run("argmax", [x], axis=1, keepdims=0), [1, 0, 1])
    np.testing.assert_array_equal(_run("argmax", [x], axis=0), [[1, 0, 0, 1]])


def test_argmin_and_the_last_of_equal_extremes():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-5, -1, -9, -1]], np.float32)
    np.testing.assert_array_equal(_run("argmax", [x], axis=1, keepdims=0, select_last_index=1), [2, 3, 3])
    np.testing.assert_array_equal(_run("argmin", [x], axis=1, keepdims=0), [3, 0, 2])
    np.testing.assert_array_equal(_run("argmin", [x], axis=1, keepdims=0, select_last_index=1), [3, 3, 2])


def test_empty_axes_reduce_everything():
    x = TensorType((2, 3), "float32")
    assert lookup("reduce_sum").infer(x, axes=(), keepdims=1) == [TensorType((1, 1), "float32")]
    assert lookup("reduce_max").infer(x, axes=None, keepdims=0) == [TensorType((), "float32")]


@pytest.mark.parametrize("name, x, attrs, message", [
    ("reduce_sum", ((2, 3), "float32"), {"axes": (2,)}, "axes 2 is out of range for rank 2; expected -2 to 1"),
    ("reduce_max", ((2, 3), "float32"), {"axes": (1, -1)}, "name an axis twice"),
    ("reduce_min", ((2, 3), "float32"), {"keepdims": 2}, "keepdims must be 0 or 1, got 2"),
    ("reduce_mean", ((2, 3), "int32"), {}, "reduce_mean needs a float input, got int32; insert a Cast"),
    ("reduce_l2", ((2, 3), "int64"), {}, "reduce_l2 needs a float input"),
    ("reduce_sum", ((2, 3), "bool"), {}, "reduce_sum needs a numeric input, got bool"),
    ("reduce_sum", ((), "float32"), {}, "rank-0 tensor reduces nothing"),
    ("argmax", ((2, 3), "float32"), {"axis": -3}, "axis -3 is out of range for rank 2"),
])
def test_errors_say_what_to_change(name, x, attrs, message):
    op = lookup(name)
    with pytest.raises(ShapeError, match=message):
        op.infer(TensorType(*x), **op.bind_attrs(attrs, name))


def test_float16_sums_accumulate_in_float32():
    """A float16 sum is the float32 sum rounded once, as in NumPy and ONNX Runtime (rounding each step to float16
    gets most of these rows wrong)."""
    x = np.random.default_rng(0).standard_normal((16, 200)).astype(np.float16)
    got = _run("reduce_sum", [x], axes=(1,), keepdims=0)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x.astype(np.float32).sum(1).astype(np.float16))
