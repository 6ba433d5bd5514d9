"""GridSample, LpPool and the image ops with constant shapes, against ONNX Runtime (`onnx_cases` in conftest)."""

from __future__ import annotations

import itertools

import numpy as np

_rng = np.random.default_rng(27)


def _normal(*shape):
    return _rng.standard_normal(shape).astype("float32")


def _grid(*shape):
    return _rng.uniform(-2.2, 2.2, shape).astype("float32")


def test_grid_sample_every_mode_matches_onnxruntime(onnx_cases):
    x = _normal(2, 3, 5, 4)
    onnx_cases([{"op": "GridSample", "inputs": [x, _grid(2, 6, 3, 2)],
                 "attrs": {"mode": mode, "padding_mode": padding, "align_corners": align}}
                for mode, padding, align in itertools.product(("nearest", "linear", "cubic"),
                                                              ("zeros", "border", "reflection"), (0, 1))])


def test_grid_sample_3d_and_opset_16_names_match_onnxruntime(onnx_cases):
    volume = [{"op": "GridSample", "inputs": [_normal(1, 2, 3, 4, 5), _grid(1, 2, 3, 2, 3)],
               "attrs": {"mode": mode, "padding_mode": padding}}
              for mode, padding in (("nearest", "zeros"), ("linear", "border"), ("linear", "reflection"))]
    onnx_cases(volume)
    onnx_cases([{"op": "GridSample", "inputs": [_normal(1, 2, 4, 4), _grid(1, 3, 3, 2)], "attrs": {"mode": mode}}
                for mode in ("bilinear", "bicubic", "nearest")], opset=16)


def test_lp_pool_matches_onnxruntime(onnx_cases):
    x2, x1 = np.abs(_normal(1, 3, 9, 8)) + 0.1, _normal(2, 2, 11)
    onnx_cases([
        {"op": "LpPool", "inputs": [x2], "attrs": {"kernel_shape": [3, 2], "p": 3, "pads": [1, 0, 1, 1]}},
        {"op": "LpPool", "inputs": [x2], "attrs": {"kernel_shape": [2, 2], "strides": [2, 3], "dilations": [2, 1]}},
        {"op": "LpPool", "inputs": [x2], "attrs": {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER", "p": 1}},
        {"op": "LpPool", "inputs": [x2], "attrs": {"kernel_shape": [3, 3], "ceil_mode": 1, "strides": [3, 1]}},
        {"op": "LpPool", "inputs": [x1], "attrs": {"kernel_shape": [4], "p": 4, "strides": [2], "pads": [1, 2]}},
    ], opset=18, rtol=1e-4)


def test_lp_pool_refuses_a_partial_ceil_window():
    import pytest

    from tilegrad.errors import UnsupportedFeatureError
    from tilegrad.frontend.onnx import import_onnx

    with pytest.raises(UnsupportedFeatureError, match="ceil_mode"):
        from onnx import TensorProto, helper
        node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2], strides=[2], ceil_mode=1)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_roi_align_every_mode_matches_onnxruntime(onnx_cases):
    x = _normal(2, 3, 10, 9)
    rois = np.array([[0.5, 1.0, 6.3, 7.2], [-2.0, 3.1, 4.0, 12.0], [2.0, 2.0, 2.2, 2.1], [7.5, 0.0, 9.5, 9.9]],
                    "float32")
    batch = np.array([0, 1, 1, 0], "int64")
    onnx_cases([{"op": "RoiAlign", "inputs": [x, rois, batch],
                 "attrs": {"mode": mode, "coordinate_transformation_mode": transform, "output_height": 3,
                           "output_width": 4, "sampling_ratio": ratio, "spatial_scale": scale}}
                for mode, transform, ratio, scale in itertools.product(("avg", "max"),
                                                                       ("half_pixel", "output_half_pixel"),
                                                                       (1, 2), (1.0, 0.7))], opset=16)


def _i64(*values):
    return np.array(values, "int64")


def test_constant_shaped_image_ops_match_onnxruntime(onnx_cases):
    x = _normal(5, 6, 3)
    onnx_cases([
        {"op": "CenterCropPad", "inputs": [x, _i64(3, 9, 3)], "attrs": {}, "consts": (1,)},
        {"op": "CenterCropPad", "inputs": [x, _i64(8, 3)], "attrs": {"axes": [0, -2]}, "consts": (1,)},
        {"op": "CenterCropPad", "inputs": [x, _i64(2, 7)], "attrs": {"axes": [1, 2]}, "consts": (1,)},
        {"op": "AffineGrid", "inputs": [_normal(2, 2, 3), _i64(2, 3, 4, 5)], "attrs": {}, "consts": (1,)},
        {"op": "AffineGrid", "inputs": [_normal(2, 2, 3), _i64(2, 1, 4, 3)], "attrs": {"align_corners": 1},
         "consts": (1,)},
        {"op": "AffineGrid", "inputs": [_normal(1, 3, 4), _i64(1, 2, 3, 4, 2)], "attrs": {"align_corners": 1},
         "consts": (1,)},
        {"op": "Col2Im", "inputs": [_normal(2, 2 * 4, 12), _i64(4, 5), _i64(2, 2)], "attrs": {}, "consts": (1, 2)},
        {"op": "Col2Im", "inputs": [_normal(1, 3 * 6, 6), _i64(5, 7), _i64(2, 3)],
         "attrs": {"strides": [2, 2], "pads": [1, 0, 0, 1], "dilations": [1, 2]}, "consts": (1, 2)},
        {"op": "Col2Im", "inputs": [_normal(1, 2 * 8, 8), _i64(3, 4, 5), _i64(2, 2, 2)],
         "attrs": {"strides": [1, 2, 3]}, "consts": (1, 2)},
    ], opset=20)


def test_affine_grid_refuses_one_pixel_with_align_corners():
    import pytest
    from onnx import TensorProto, helper, numpy_helper

    from tilegrad.errors import UnsupportedFeatureError
    from tilegrad.frontend.onnx import import_onnx

    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("theta", TensorProto.FLOAT, [1, 2, 3])],
                              [helper.make_tensor_value_info("grid", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(_i64(1, 1, 4, 1), "size")])
    with pytest.raises(UnsupportedFeatureError, match="one pixel"):
        import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))


def test_deform_conv_matches_onnxruntime(onnx_cases):
    x = _normal(2, 4, 7, 6)
    onnx_cases([
        {"op": "DeformConv", "inputs": [x, _normal(3, 4, 3, 3), _normal(2, 18, 5, 4)], "attrs": {}},
        {"op": "DeformConv", "inputs": [x, _normal(4, 2, 2, 3), 2 * _normal(2, 24, 4, 2), _normal(4),
                                        _rng.uniform(0, 1, (2, 12, 4, 2)).astype("float32")],
         "attrs": {"group": 2, "offset_group": 2, "strides": [2, 1], "pads": [1, 0, 0, 0], "dilations": [1, 2]}},
        {"op": "DeformConv", "inputs": [x, _normal(2, 4, 2, 2), _normal(2, 8, 3, 3), None,
                                        _rng.uniform(0, 1, (2, 4, 3, 3)).astype("float32")],
         "attrs": {"strides": [2, 2], "kernel_shape": [2, 2]}},
    ], opset=19, rtol=1e-4, atol=1e-4)


def test_float16_grid_sample_and_lp_pool_match_onnxruntime(onnx_cases):
    x = _normal(1, 2, 5, 4).astype("float16")
    onnx_cases([{"op": "GridSample", "inputs": [x, _grid(1, 3, 3, 2).astype("float16")], "attrs": {}},
                {"op": "LpPool", "inputs": [x], "attrs": {"kernel_shape": [2, 2], "p": 3}}],
               opset=20, rtol=2e-3, atol=2e-3)
