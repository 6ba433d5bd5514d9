"""Denormal floats in kernels (Config.flush_denormals): read and written as zero by default on x86, kept when asked,
and the calling thread's own floating-point mode untouched either way, on a team of one and on a shared team."""

from __future__ import annotations

import platform

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import tilegrad
from tilegrad import config

X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
DENORMAL = np.float32(1e-40)  # below float32's smallest normal, 1.18e-38


def _square(n: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"])], "square", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(n: int, value: float) -> np.ndarray:
    module = tilegrad.compile(_square(n))
    out = module(np.full(n, value, np.float32))
    return out[0] if isinstance(out, list) else out


@pytest.mark.parametrize("n", [8, 1 << 16])  # a kernel too small to share, one shared by the team
def test_denormal_results_are_flushed_by_default(n):
    if not X86:
        pytest.skip("denormals are flushed on x86 only (MXCSR)")
    with config.override(module_cache=False):
        assert config.get().flush_denormals
        out = _run(n, 1e-20)  # 1e-40: a denormal result
    assert np.all(out == 0.0)


@pytest.mark.parametrize("n", [8, 1 << 16])
def test_denormals_are_kept_when_asked(n):
    with config.override(module_cache=False, flush_denormals=False):
        assert "-DTG_KEEP_DENORMALS" in config.get().compile_flags
        out = _run(n, 1e-20)
    np.testing.assert_allclose(out, np.float32(1e-20) * np.float32(1e-20), rtol=1e-2)
    assert np.all(out > 0.0)


@pytest.mark.parametrize("n", [8, 1 << 16])
def test_the_calling_threads_mode_is_left_as_it_was(n):
    with config.override(module_cache=False):
        _run(n, 1.0)
    tiny = np.full(64, 1e-20, np.float32)
    assert np.all(tiny * tiny > 0.0)  # NumPy on this thread still underflows gradually
    assert np.float32(1e-30) * np.float32(1e-10) == pytest.approx(DENORMAL, rel=1e-2)
