"""The whole path: compute -> schedule -> loop IR -> C -> native kernel, timed in process and in a worker."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.errors import KernelCallError
from tilegrad.runtime import time_kernel
from tilegrad.schedule.defaults import default_schedule
from tilegrad.te import nn

from .runtime.timing_worker import time_in_subprocess


def _kernel():
    a = te.placeholder((32, 24), name="A")
    b = te.placeholder((24, 16), name="B")
    return build(default_schedule(nn.matmul(a, b, name="C")), name="mm")


def test_built_kernel_runs_and_times_in_process_and_in_a_worker():
    kern = _kernel()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 24)).astype("float32")
    b = rng.standard_normal((24, 16)).astype("float32")
    np.testing.assert_allclose(kern.run(a, b), a @ b, rtol=1e-5, atol=1e-5)
    local = time_kernel(kern.kernel, [a, b, np.empty((32, 16), "float32")], repeats=3, min_repeat_s=0.001)
    assert local.ok and 0 < local.median < 1
    isolated = time_in_subprocess(kern.kernel.library, "mm", kern.params, repeats=3, min_repeat_s=0.001)
    assert isolated.ok, isolated.error


def test_wrong_arrays_get_clear_errors():
    kern = _kernel()
    with pytest.raises(KernelCallError, match="parameter 'B'"):
        kern.run(np.zeros((32, 24), "float32"), np.zeros((16, 24), "float32"))
    with pytest.raises(KernelCallError, match="float32"):
        kern.run(np.zeros((32, 24), "float64"), np.zeros((24, 16), "float32"))
