"""Convolutions, pools, transposed convolutions and Resize over a dynamic image size: one compile serves every
height, width and batch within the bounds (against ONNX Runtime, lengths at the bounds, primes and odd sizes
included; Winograd's tiles counted per call); the window arithmetic's expressions equal the concrete extents at
every value; a size the windows do not fit is refused with the bounds."""

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import metrics
from tilegrad.errors import TilegradError
from tilegrad.te import dims
from tilegrad.te.nn._window import output_extents

from .models import image_net

BOUNDS = {"n": (1, 3), "h": (24, 96), "w": (24, 96)}


def _compiles() -> int:
    return metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]


@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_one_module_runs_every_image_size_within_the_bounds(ceil_mode):
    model = image_net(ceil_mode=ceil_mode)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    module = tilegrad.compile(model, dynamic=BOUNDS)
    before = _compiles()
    for n, h, w in [(1, 24, 24), (2, 37, 53), (1, 96, 96), (3, 61, 29), (1, 64, 64), (2, 25, 96)]:
        x = np.random.default_rng(h * w).standard_normal((n, 3, h, w)).astype(np.float32)
        for got, want in zip(module(x), session.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"shape {x.shape}")
    assert _compiles() == before  # nothing compiled for any size


def test_an_int8_model_over_a_dynamic_image_size_computes_what_its_fixed_sizes_do():
    """tilegrad.quantize's QDQ model compiled once over the bounds: at each size the bytes of a module compiled for
    that size alone (int8 rounds as tilegrad does everywhere, so the reference is tilegrad's own fixed module)."""
    rng = np.random.default_rng(0)
    model = tilegrad.quantize(image_net(), [{"x": rng.standard_normal((1, 3, 48, 48)).astype(np.float32)}],
                              "max_min").model
    module = tilegrad.compile(model, dynamic=BOUNDS)
    for n, h, w in [(2, 37, 53), (1, 96, 64)]:
        x = rng.standard_normal((n, 3, h, w)).astype(np.float32)
        fixed = tilegrad.compile(model, input_shapes={"x": [n, 3, h, w]})
        for got, want in zip(module(x), fixed(x)):
            np.testing.assert_array_equal(got, want, err_msg=f"shape {x.shape}")


def test_a_resize_by_a_fraction_of_a_dynamic_size_rounds_down_as_onnx_does():
    model = image_net(resize_scale=0.5)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    module = tilegrad.compile(model, dynamic=BOUNDS)
    for h, w in [(24, 24), (45, 83)]:
        x = np.random.default_rng(h).standard_normal((1, 3, h, w)).astype(np.float32)
        for got, want in zip(module(x), session.run(None, {"x": x})):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bounds_that_let_a_window_outgrow_the_image_are_refused_with_them():
    conv = helper.make_node("Conv", ["x", "k"], ["y"], kernel_shape=[5, 5])
    graph = helper.make_graph([conv], "valid", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, None, 4])],
                              [numpy_helper.from_array(np.ones((1, 1, 5, 5), np.float32), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(TilegradError, match=r"Conv.*dyn_h \(its bounds allow 3\).*kernel extent 5"):
        tilegrad.compile(model, dynamic={"h": (3, 64)})
    module = tilegrad.compile(model, dynamic={"h": (5, 64)})
    x = np.ones((1, 1, 9, 8), np.float32)
    np.testing.assert_allclose(module(x), np.full((1, 1, 5, 4), 25, np.float32))


@settings(max_examples=60, deadline=None)
@given(kernel=st.integers(1, 5), stride=st.integers(1, 3), pads=st.tuples(st.integers(0, 2), st.integers(0, 2)),
       dilation=st.integers(1, 3), ceil_mode=st.booleans(), lo=st.integers(1, 12))
def test_the_window_extent_of_a_dynamic_size_is_the_concrete_extent_at_every_value(kernel, stride, pads, dilation,
                                                                                  ceil_mode, lo):
    reach = dilation * (kernel - 1) + 1
    lo = max(lo, reach - sum(pads), max(pads) + 1)  # every window fits and starts inside the input or its padding
    size = dims.dimension("s", lo, lo + 20)
    (extent,) = output_extents("pool", [size], [kernel], [stride], [pads], [dilation], ceil_mode)
    for value in range(lo, lo + 21):
        (want,) = output_extents("pool", [value], [kernel], [stride], [pads], [dilation], ceil_mode)
        assert dims.evaluate(extent, {size.name: value}) == want, value


def test_without_dynamic_a_changed_image_size_compiles_one_module_for_the_sizes_after():
    model = image_net()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    module = tilegrad.compile(model)
    metrics.reset()
    for h, w in [(32, 32), (40, 48)]:
        x = np.random.default_rng(h).standard_normal((1, 3, h, w)).astype(np.float32)
        np.testing.assert_allclose(module(x)[0], session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert metrics.counters["dynamic_modules_compiled"] == 1
    assert module.dynamic_bounds == {"n": 1, "h": (8, 256), "w": (8, 256)}  # a factor 4 about the sizes seen
    before = _compiles()
    for h, w in [(50, 30), (9, 200), (33, 35)]:
        x = np.random.default_rng(h).standard_normal((1, 3, h, w)).astype(np.float32)
        np.testing.assert_allclose(module(x)[0], session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert _compiles() == before


def test_winograd_counts_its_tiles_per_call_over_a_dynamic_image():
    rng = np.random.default_rng(0)
    conv = helper.make_node("Conv", ["x", "k", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    graph = helper.make_graph(
        [conv, helper.make_node("Relu", ["y"], ["z"])], "winograd",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, "h", "w"])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array((rng.standard_normal((64, 64, 3, 3)) * 0.1).astype(np.float32), "k"),
         numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    module = tilegrad.compile(model, dynamic={"h": (16, 64), "w": (16, 64)})
    assert [k.label.split("[")[0] for k in module.spec.kernels] == ["winograd_conv+relu"]
    for h, w in [(16, 16), (17, 23), (64, 64), (33, 50), (61, 16)]:  # tiles that divide the size and ones that do not
        x = rng.standard_normal((1, 64, h, w)).astype(np.float32)
        np.testing.assert_allclose(module(x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4,
                                   err_msg=f"{h} x {w}")
