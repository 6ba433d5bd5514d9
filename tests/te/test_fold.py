"""In-order reductions with several accumulators (te.fold, te.Reducer): the online softmax's running (maximum,
sum) as `te.logsumexp`, compiled to C and interpreted, against NumPy over random shapes; a split reduction axis
is allowed, rfactor and a spatial loop inside the reduction are refused with the reason; on GPU threads it
compiles to PTX."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad import te
from tilegrad.codegen.c import CRenderer
from tilegrad.codegen.cuda import CudaRenderer
from tilegrad.errors import LoweringError, ScheduleError
from tilegrad.kernel import build
from tilegrad.loop import lower
from tilegrad.loop.gpu import rewrite_for_gpu
from tilegrad.runtime.build import build as build_library
from tilegrad.runtime.kernel import BufferSpec, Kernel
from tilegrad.runtime.nvrtc import compile_ptx
from tilegrad.schedule.schedule import Schedule
from tilegrad.target import GPUS


def _logsumexp(shape, axes):
    x = te.placeholder(shape, name="x")
    kept = [d for d in range(len(shape)) if d not in axes]
    red = [te.reduce_axis(shape[d], f"r{d}") for d in axes]

    def body(*i):
        idx, it = [], iter(i)
        for d in range(len(shape)):
            idx.append(red[axes.index(d)] if d in axes else next(it))
        return te.fold(te.logsumexp, x[tuple(idx)], axis=red)
    return te.compute([shape[d] for d in kept] or [1], body if kept else lambda _: body(), name="lse")


def _want(a, axes):
    wide = a.astype(np.float64)
    with np.errstate(divide="ignore"):
        top = np.max(wide, axis=axes, keepdims=True)
        shift = np.where(np.isneginf(top), 0, top)
        out = np.log(np.sum(np.exp(wide - shift), axis=axes)) + np.squeeze(shift, axis=axes)
    return out.reshape(-1) if out.ndim == 0 else out


def _run(kernel, a, shape):
    out = np.empty(shape, np.float32)
    kernel.kernel(a, out)
    return out


@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 40), axis_last=st.booleans(), hidden=st.floats(0, 0.5))
def test_logsumexp_fold_matches_numpy(rows, cols, axis_last, hidden):
    rng = np.random.default_rng(rows * 100 + cols)
    a = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    a[rng.random(a.shape) < hidden] = -np.inf  # rows of -inf give -inf, not NaN
    axes = [1] if axis_last else [0]
    out = _logsumexp(a.shape, axes)
    want = _want(a, tuple(axes))
    np.testing.assert_allclose(te.interpret(out, {"x": a}), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(build(out), a, out.shape), want, rtol=1e-5, atol=1e-5)


def test_a_fold_over_two_axes_and_a_split_axis():
    a = np.random.default_rng(1).standard_normal((3, 5, 7)).astype(np.float32)
    out = _logsumexp(a.shape, [1, 2])
    sch = Schedule(out)
    sch.split("lse", "r2", 3)
    np.testing.assert_allclose(_run(build(sch), a, out.shape), _want(a, (1, 2)), rtol=1e-5, atol=1e-5)


def test_rfactor_of_a_fold_is_refused_with_the_reason():
    out = _logsumexp((4, 32), [1])
    sch = Schedule(out)
    _, inner = sch.split("lse", "r1", 8)
    with pytest.raises(ScheduleError, match="logsumexp reduction runs in order"):
        sch.rfactor("lse", inner)


def test_a_spatial_loop_inside_a_fold_is_refused_with_the_reason():
    out = _logsumexp((4, 32), [1])
    sch = Schedule(out)
    sch.reorder("lse", "r1", "i0")
    with pytest.raises(LoweringError, match="no spatial loop may run inside its reduction loops"):
        build(sch)


def test_a_fold_on_gpu_threads_compiles_with_nvrtc_and_keeps_its_numbers():
    """Rows bound to threads, each thread running its row's fold in registers: PTX from NVRTC (no GPU needed),
    and the same loop IR rendered serially as C gives NumPy's numbers."""
    a = np.random.default_rng(2).standard_normal((40, 33)).astype(np.float32)
    out = _logsumexp(a.shape, [1])
    sch = Schedule(out)
    i0, i1 = sch.split("lse", "i0", 8)
    sch.bind("lse", i0, "blockIdx.x")
    sch.bind("lse", i1, "threadIdx.x")
    k = lower(sch.state, "lse")
    assert ".entry lse" in compile_ptx(CudaRenderer(GPUS["sm_90"]).render(k), GPUS["sm_90"].arch)
    specs = [BufferSpec(b.name, tuple(int(d.value) for d in b.shape), b.dtype) for b in k.params]
    kernel = Kernel(build_library(CRenderer().render(rewrite_for_gpu(k))), "lse", specs)
    got = np.empty(out.shape, np.float32)
    kernel(a, got)
    np.testing.assert_allclose(got, _want(a, (1,)), rtol=1e-5, atol=1e-5)
