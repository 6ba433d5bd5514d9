"""Registry-driven op tests: every declared op, on each of its samples, compiled under its default schedule,
equals its NumPy reference, and its type rule agrees with what the reference produces."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.ir import lookup
from tilegrad.ir.registry import KINDS, OPS, Sample
from tilegrad.schedule.defaults import default_schedule

lookup("add")  # importing the op families fills the registry
CASES = [(name, i) for name in sorted(OPS) for i in range(len(OPS[name].samples))]


def _random(shape, dtype, rng):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("int"):
        return rng.integers(-3, 4, size=shape).astype(dtype)
    if dtype.startswith("uint"):
        return rng.integers(0, 9, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _arrays(sample: Sample, seed: int):
    rng = np.random.default_rng(seed)
    return [_random(shape, dtype, rng) for shape, dtype in sample.inputs]


def test_every_op_is_complete():
    for name, op in OPS.items():
        assert op.kind in KINDS, name
        assert op.samples, f"op {name!r} declares no samples, so nothing tests it"
        assert callable(op.infer) and callable(op.reference) and callable(op.compute), name


@pytest.mark.parametrize("name,index", CASES)
def test_compiled_compute_matches_reference(name, index):
    op = OPS[name]
    sample = op.samples[index]
    attrs = op.bind_attrs(sample.attrs, "test")
    placeholders = [te.placeholder(shape, dtype, f"in{i}") for i, (shape, dtype) in enumerate(sample.inputs)]
    out = op.compute(*placeholders, **attrs)
    arrays = _arrays(sample, index)
    with np.errstate(all="ignore"):
        want = np.asarray(op.reference(*arrays, **attrs))
    got = build(default_schedule(out), args=placeholders + [out]).run(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{name} sample {index}")


@pytest.mark.parametrize("name,index", CASES)
def test_type_rule_matches_reference(name, index):
    op = OPS[name]
    sample = op.samples[index]
    attrs = op.bind_attrs(sample.attrs, "test")
    from tilegrad.ir.registry import TensorType

    types = op.infer(*(TensorType(shape, dtype) for shape, dtype in sample.inputs), **attrs)
    with np.errstate(all="ignore"):
        want = np.asarray(op.reference(*_arrays(sample, index), **attrs))
    assert [(t.shape, t.dtype) for t in types] == [(want.shape, str(want.dtype))]
