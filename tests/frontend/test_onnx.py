"""ONNX import: models built with onnx.helper and exported from PyTorch, run by the reference interpreter,
against ONNX Runtime; and the error paths (unsupported ops, malformed files, symbolic dimensions)."""

from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tilegrad.errors import ShapeError, UnsupportedOpError
from tilegrad.frontend.onnx import import_onnx
from tilegrad.frontend.onnx_file import ModelFormatError
from tilegrad.ir.interpret import run_reference

from .conftest import run_onnxruntime


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_elementwise_model_matches_onnxruntime():
    w = numpy_helper.from_array(np.linspace(-1, 1, 5).astype("float32"), "w")
    lo = numpy_helper.from_array(np.array(0.0, "float32"), "lo")
    hi = numpy_helper.from_array(np.array(0.7, "float32"), "hi")
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("Tanh", ["s"], ["t"], name="tanh"),
             helper.make_node("Clip", ["t", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Max", ["c", "x", "s"], ["y"], name="max")]
    model = _model(nodes, [_vi("x", [3, 5])], [_vi("y", [3, 5])], [w, lo, hi])
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    g = import_onnx(model.SerializeToString())
    assert [n.op for n in g.nodes] == ["add", "tanh", "clip", "maximum", "maximum"]
    np.testing.assert_allclose(run_reference(g, [x])[0], run_onnxruntime(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_unsupported_ops_are_reported_together():
    nodes = [helper.make_node("StringNormalizer", ["x"], ["a"], name="strnorm_0"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Frobnicate", ["b"], ["y"], name="frob")]
    model = _model(nodes, [_vi("x", [2])], [_vi("y", [2])])
    with pytest.raises(UnsupportedOpError) as info:
        import_onnx(model)
    text = str(info.value)
    assert "2 op(s) not supported" in text and "StringNormalizer (node 'strnorm_0')" in text and "'frob'" in text


def test_malformed_and_missing_files_give_clear_errors(tmp_path):
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    data = model.SerializeToString()
    with pytest.raises(ModelFormatError, match="not a valid ONNX model"):
        import_onnx(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="no ONNX file"):
        import_onnx(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not protobuf at all \xff\xff")
    with pytest.raises(ModelFormatError):
        import_onnx(bad)


def test_symbolic_dimensions_need_input_shapes():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["batch", 4])], [_vi("y", ["batch", 4])])
    with pytest.raises(ShapeError, match="symbolic dimension 'batch'.*input_shapes"):
        import_onnx(model)
    g = import_onnx(model, input_shapes={"x": (3, 4)})
    assert g.inputs[0].shape == (3, 4)
    with pytest.raises(ShapeError, match="not inputs of the model"):
        import_onnx(model, input_shapes={"x": (3, 4), "z": (1,)})


def test_shape_subcomputation_folds_to_a_constant():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, "int64"), "zero"),
             numpy_helper.from_array(np.array([0], "int64"), "zero1"),
             numpy_helper.from_array(np.array([-1], "int64"), "minus1")]
    model = _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [2, 12])], inits)
    g = import_onnx(model)
    assert [n.op for n in g.nodes] == ["reshape"]
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    np.testing.assert_array_equal(run_reference(g, [x])[0], run_onnxruntime(model, {"x": x})[0])


def test_pytorch_cnn_matches_onnxruntime():
    torch = pytest.importorskip("torch")
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, stride=2, groups=2), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 4), torch.nn.Softmax(-1)).eval()
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1)
        m[1].running_var.uniform_(0.5, 2)
    f = io.BytesIO()
    x = torch.randn(1, 3, 12, 12)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), f, dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load_from_string(f.getvalue())
    g = import_onnx(model)
    want = run_onnxruntime(model, {"x": x.numpy()})[0]
    np.testing.assert_allclose(run_reference(g, [x.numpy()])[0], want, rtol=1e-4, atol=1e-5)


def test_outputs_keep_the_model_names():
    nodes = [helper.make_node("Relu", ["x"], ["logits"], name="/fc/Relu"),
             helper.make_node("Neg", ["logits"], ["second"], name="neg")]
    model = _model(nodes, [_vi("x", [2, 3])], [_vi("logits", [2, 3]), _vi("second", [2, 3]), _vi("x", [2, 3])])
    g = import_onnx(model)
    assert [v.name for v in g.outputs] == ["logits", "second", "x"]
    x = np.random.default_rng(1).standard_normal((2, 3)).astype("float32")
    for got, want in zip(run_reference(g, [x]), run_onnxruntime(model, {"x": x})):
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("attrs,sizes,scales", [
    ({"mode": "nearest"}, None, [1, 1, 2, 3]),
    ({"mode": "linear"}, [1, 2, 7, 5], None),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 2, 8, 8], None),
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, None,
     [1, 1, 0.5, 2]),
])
def test_resize_matches_onnxruntime(attrs, sizes, scales):
    inits = [numpy_helper.from_array(np.array([], "float32"), "roi")]
    names = ["x", "roi"]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.array(scales, "float32"), "scales"))
        names.append("scales")
    else:
        names += ["", "sizes"]
        inits.append(numpy_helper.from_array(np.array(sizes, "int64"), "sizes"))
    out_shape = sizes or [int(n * s) for n, s in zip([1, 2, 4, 6], scales)]
    model = _model([helper.make_node("Resize", names, ["y"], **attrs)], [_vi("x", [1, 2, 4, 6])],
                   [_vi("y", out_shape)], inits)
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 6)).astype("float32")
    import tilegrad

    got = tilegrad.compile(model)(x)
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


# ---- one-node models of more ops (math, activations, variadic, indexing), compiled, against ONNX Runtime ----

_rng = np.random.default_rng(26)


def _normal(*shape, scale=1.0):
    return (_rng.standard_normal(shape) * scale).astype("float32")


def _unit(*shape):
    return _rng.uniform(-0.9, 0.9, shape).astype("float32")


def _ints(*shape, dtype="int32", low=-9, high=10, nonzero=False):
    out = _rng.integers(low, high, shape).astype(dtype)
    return np.where(out == 0, 3, out).astype(dtype) if nonzero else out


class _Const(NamedTuple):
    """An input given as an initializer (k, depth, ...), not fed."""

    data: np.ndarray


_BOOL, _INT64 = TensorProto.BOOL, TensorProto.INT64
_SPECIALS = np.array([[np.inf, -np.inf, np.nan, 0.0, -2.5], [1.0, -0.0, 3.0, -np.inf, 7.0]], "float32")
_ONE_NODE = [
    ("LRN", [_normal(1, 5, 4, 4)], {"size": 3, "alpha": 1e-3, "bias": 2.0}, 17, None),
    ("LRN", [_normal(2, 6, 3, 2)], {"size": 5}, 17, None),
    ("Sum", [_normal(3, 4), _normal(4), _normal(1, 4)], {}, 17, None),
    ("Mean", [_normal(3, 4), _normal(4), _normal(2, 1, 4)], {}, 17, None),
    ("Max", [_ints(3, 4), _ints(4), _ints(1, 4)], {}, 17, None),
    ("Min", [_normal(3, 4), _normal(3, 1)], {}, 17, None),
    ("Dropout", [_normal(3, 4)], {}, 13, (TensorProto.FLOAT, _BOOL)),
    ("GatherElements", [_normal(3, 4), np.array([[0, -1, 2, 1], [2, 0, -3, 1]], "int64")], {}, 17, None),
    ("GatherElements", [_normal(3, 4, 2), _ints(3, 2, 2, dtype="int64", low=-4, high=4)], {"axis": 1}, 17, None),
    *[(op, [_unit(3, 5)], {}, 17, None)
      for op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh")],
    ("Acosh", [1.0 + np.abs(_normal(3, 5))], {}, 17, None),
    ("Sin", [_normal(4, 6, scale=10.0)], {}, 17, None),
    ("Mod", [_ints(4, 5), _ints(5, nonzero=True)], {}, 17, None),
    ("Mod", [_ints(4, 5, dtype="int64"), _ints(4, 1, dtype="int64", nonzero=True)], {"fmod": 1}, 17, None),
    ("Mod", [_normal(4, 5, scale=5.0), _normal(5) + 0.5], {"fmod": 1}, 17, None),
    ("CastLike", [_normal(3, 4, scale=4.0), np.zeros(1, "int32")], {}, 19, (TensorProto.INT32,)),
    ("CastLike", [_ints(3, 4, dtype="int64"), np.zeros((), "float32")], {}, 19, (TensorProto.FLOAT,)),
    ("Softplus", [_normal(3, 5, scale=6.0)], {}, 17, None),
    ("Softsign", [_normal(3, 5, scale=3.0)], {}, 17, None),
    ("Mish", [_normal(3, 5, scale=4.0)], {}, 18, None),
    ("Elu", [_normal(3, 5)], {"alpha": 0.7}, 17, None),
    ("Selu", [_normal(3, 5)], {}, 17, None),
    ("Celu", [_normal(3, 5)], {"alpha": 1.5}, 17, None),
    ("ThresholdedRelu", [_normal(3, 5)], {"alpha": 0.3}, 17, None),
    ("Shrink", [_normal(3, 5)], {"bias": 0.2, "lambd": 0.8}, 17, None),
    ("HardSigmoid", [_normal(3, 5)], {"alpha": 0.3, "beta": 0.4}, 17, None),
    ("HardSwish", [_normal(3, 5, scale=4.0)], {}, 17, None),
    ("Gelu", [_normal(3, 5, scale=2.0)], {"approximate": "tanh"}, 20, None),
    ("Swish", [_normal(3, 5, scale=2.0)], {"alpha": 0.5}, 24, None),
    ("PRelu", [_normal(2, 3, 4), _normal(3, 1)], {}, 17, None),
    ("Floor", [_normal(3, 5, scale=3.0)], {}, 17, None),
    ("Ceil", [_normal(3, 5, scale=3.0)], {}, 17, None),
    ("Round", [np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], [0.4, -0.6, 3.5, -3.5, 1.2, 7.0]], "float32")], {}, 17,
     None),
    ("ArgMin", [_ints(3, 5, low=-2, high=3)], {"axis": 1, "select_last_index": 1}, 17, (_INT64,)),
    ("ArgMax", [_ints(4, 5, low=-2, high=3)], {"keepdims": 0, "select_last_index": 1}, 17, (_INT64,)),
    ("ReduceL1", [_normal(3, 4, 5)], {"axes": [1], "keepdims": 0}, 17, None),
    ("ReduceSumSquare", [_normal(3, 4, 5)], {"axes": [0, 2]}, 17, None),
    ("ReduceLogSum", [np.abs(_normal(3, 4)) + 0.1], {}, 17, None),
    ("ReduceLogSumExp", [_normal(3, 4, 5, scale=10.0)], {"axes": [-1], "keepdims": 0}, 17, None),
    ("RMSNormalization", [_normal(2, 3, 8), _normal(8)], {"epsilon": 1e-3}, 23, None),
    ("RMSNormalization", [_normal(2, 3, 8), _normal(3, 8)], {"axis": 1}, 23, None),
    ("LpNormalization", [_normal(3, 5)], {"p": 1, "axis": 0}, 17, None),
    ("LpNormalization", [_normal(3, 5)], {}, 17, None),
    ("MeanVarianceNormalization", [_normal(2, 3, 4, 5)], {}, 17, None),
    ("Hardmax", [_ints(3, 5, low=-2, high=3).astype("float32")], {"axis": 0}, 17, None),
    ("DepthToSpace", [_normal(1, 8, 2, 3)], {"blocksize": 2}, 17, None),
    ("DepthToSpace", [_normal(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, 17, None),
    ("SpaceToDepth", [_normal(1, 2, 4, 6)], {"blocksize": 2}, 17, None),
    ("EyeLike", [_normal(3, 5)], {"k": 1, "dtype": TensorProto.INT32}, 17, (TensorProto.INT32,)),
    ("NegativeLogLikelihoodLoss", [_normal(3, 5), np.array([1, 4, 0], "int64")], {"reduction": "mean"}, 17, None),
    ("SoftmaxCrossEntropyLoss", [_normal(3, 5, 2), np.array([[1, 4], [0, 2], [3, 3]], "int64")],
     {"reduction": "sum"}, 17, None),
    ("Attention", [_normal(2, 3, 4, 8), _normal(2, 3, 6, 8), _normal(2, 3, 6, 8)], {"is_causal": 1}, 23, None),
    ("IsNaN", [_SPECIALS], {}, 17, (_BOOL,)),
    ("IsInf", [_SPECIALS], {}, 17, (_BOOL,)),
    ("IsInf", [_SPECIALS], {"detect_positive": 0}, 17, (_BOOL,)),
    ("Sign", [np.ascontiguousarray(_SPECIALS[:, 3:])], {}, 17, None),
    ("Sign", [_ints(3, 4)], {}, 17, None),
    ("GatherND", [_normal(4, 5, 3), np.array([[0, 1], [-1, 4], [2, -2]], "int64")], {}, 17, None),
    ("GatherND", [_normal(2, 4, 3), np.array([[[1], [3]], [[0], [-1]]], "int64")], {"batch_dims": 1}, 17, None),
    ("ScatterElements", [_normal(4, 5), np.array([[1, 0, 3], [1, 2, 0]], "int64"), _normal(2, 3)], {}, 17, None),
    ("ScatterElements", [_normal(3, 6), np.array([[5, -1, 0, 2]], "int64"), _normal(1, 4)],
     {"axis": 1, "reduction": "add"}, 18, None),
    ("ScatterND", [_normal(4, 3, 2), np.array([[1, 2], [-1, 0], [1, 2]], "int64"), _normal(3, 2)],
     {"reduction": "add"}, 18, None),
    ("ScatterND", [_normal(4, 3), np.array([[2], [0]], "int64"), _normal(2, 3)], {}, 17, None),
    ("OneHot", [np.array([[0, 3, -1], [4, 2, 9]], "int64"), _Const(np.array(5, "int64")),
                _Const(np.array([-1.0, 2.0], "float32"))], {"axis": 1}, 17, (TensorProto.FLOAT,)),
    ("TopK", [_normal(3, 7), _Const(np.array([3], "int64"))], {}, 17, (TensorProto.FLOAT, _INT64)),
    ("TopK", [_ints(6, 4, low=-2, high=3), _Const(np.array([2], "int64"))], {"axis": 0, "largest": 0}, 17,
     (TensorProto.INT32, _INT64)),
]


def _case_id(case):
    op, _, attrs, _, _ = case
    return op + "".join(f"-{k}={v}" for k, v in attrs.items())


@pytest.mark.parametrize("case", _ONE_NODE, ids=[_case_id(c) for c in _ONE_NODE])
def test_one_node_model_matches_onnxruntime(case):
    import tilegrad

    op, arrays, attrs, opset, out_types = case
    names = [f"in{i}" for i in range(len(arrays))]
    feeds = {n: a for n, a in zip(names, arrays) if not isinstance(a, _Const)}
    inputs = [_vi(n, list(a.shape), helper.np_dtype_to_tensor_dtype(a.dtype)) for n, a in feeds.items()]
    inits = [numpy_helper.from_array(a.data, n) for n, a in zip(names, arrays) if isinstance(a, _Const)]
    out_types = out_types or (helper.np_dtype_to_tensor_dtype(arrays[0].dtype),)
    outputs = [_vi(f"out{i}", None, t) for i, t in enumerate(out_types)]
    node = helper.make_node(op, names, [o.name for o in outputs], **attrs)
    model = _model([node], inputs, outputs, inits, opset=opset)
    want = run_onnxruntime(model, feeds)
    got = tilegrad.compile(model)(*feeds.values())
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
