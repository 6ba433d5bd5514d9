"""ONNX Resize in every mode (frontend/onnx_resize.py and the registry's resize), with constant scales or sizes,
against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.errors import ShapeError
from tilegrad.frontend.onnx import import_onnx

from .conftest import run_onnxruntime

CASES = [
    ({"mode": "cubic"}, "scales", [1, 1, 0.8, 1.6], None),
    ({"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, "scales", [1, 1, 1.5, 0.75], None),
    ({"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, "sizes", [1, 2, 9, 4], None),
    ({"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}, "scales", [1, 1, 2, 2], None),
    ({"mode": "linear", "antialias": 1}, "sizes", [1, 2, 3, 3], None),
    ({"mode": "cubic", "antialias": 1}, "scales", [1, 1, 0.6, 0.5], None),
    ({"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"}, "scales", [1, 1, 0.7, 1.3], None),
    ({"mode": "nearest", "axes": [3, 2]}, "sizes", [9, 11], None),
    ({"mode": "linear", "axes": [2]}, "scales", [1.7], None),
    ({"mode": "nearest", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"}, "sizes", [7, 9], None),
    ({"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"}, "sizes", [7, 9], None),
    ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10.0},
     "sizes", [1, 2, 4, 5], [0, 0, 0.4, 0.6, 1, 1, 1.2, 0.7]),
    ({"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize", "axes": [2, 3]},
     "sizes", [3, 3], [0.2, 0.1, 0.8, 0.9]),
    ({"mode": "nearest"}, "sizes", [1, 2, 9, 14], None),  # ties: output coordinates halfway between inputs
    ({"mode": "linear"}, "scales", [1, 1, 0.75, 1.5], None),  # scales whose sizes are fractional
]


@pytest.mark.parametrize("attrs, kind, values, roi", CASES)
def test_resize_matches_onnxruntime(attrs, kind, values, roi):
    inits = [numpy_helper.from_array(np.array(values, np.int64 if kind == "sizes" else np.float32), kind)]
    if roi is not None:
        inits.append(numpy_helper.from_array(np.array(roi, np.float32), "roi"))
    names = ["x", "roi" if roi is not None else "", "scales" if kind == "scales" else ""]
    node = helper.make_node("Resize", names + ["sizes"] if kind == "sizes" else names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 2, 5, 6))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=10)
    x = np.random.default_rng(0).standard_normal((1, 2, 5, 6)).astype(np.float32)
    want = run_onnxruntime(model, {"x": x})[0]
    got = tilegrad.compile(model)(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset, mode, scales", [
    (9, "nearest", [1, 1, 2, 3]), (9, "linear", [1, 1, 2.5, 1.5]), (9, "nearest", [1, 1, 1.5, 1.7]),
    (7, "nearest", [1.0, 2.0, 3.0, 2.0]), (8, "linear", [1.0, 1.0, 3.0, 2.0]),
])
def test_upsample_matches_onnxruntime(opset, mode, scales):
    """Upsample-9 takes the scales as an input (here a graph input: a value input), Upsample-7 as an attribute."""
    x = np.random.default_rng(opset).standard_normal((1, 2, 4, 5)).astype("float32")
    feeds = {"x": x}
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    if opset >= 9:
        feeds["scales"] = np.array(scales, "float32")
        inputs.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, [4]))
        node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode=mode)
    else:
        node = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=scales)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    want = run_onnxruntime(model, feeds)[0]
    got = tilegrad.compile(model)(*feeds.values())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_upsample_scales_below_one_are_refused():
    node = helper.make_node("Upsample", ["x"], ["y"], name="up", scales=[1.0, 0.5])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(ShapeError, match=r"'up': Upsample scales \[1.0, 0.5\] need one entry >= 1"):
        import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)]))


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_coordinates_are_computed_once_per_axis_not_per_element(mode):
    """DeepLab's 8x upsampling: the per-axis coordinate tables are stages of their own (224 values each), read by
    the output's loop, and the compiled resize equals the reference."""
    from tilegrad.ir import lookup
    from tilegrad.kernel import build
    from tilegrad.schedule.defaults import default_schedule
    from tilegrad import te

    op = lookup("resize")
    attrs = op.bind_attrs({"sizes": (1, 3, 224, 224), "mode": mode}, "r")
    x = te.placeholder((1, 3, 28, 28), "float32", "x")
    out = op.compute(x, **attrs)
    sch = default_schedule(out)
    tables = [s.name for s in sch.state.stages if s.op.tag == "resize_table"]
    assert len(tables) == (6 if mode == "linear" else 2) and all(sch.state.stage(t).attach != "inline" for t in tables)
    data = np.random.default_rng(0).standard_normal((1, 3, 28, 28)).astype("float32")
    got = build(sch, args=[x, out]).run(data)
    np.testing.assert_allclose(got, op.reference(data, **attrs), rtol=1e-5, atol=1e-5)
