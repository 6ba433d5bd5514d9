"""NaN, inf, -inf and -0.0 through the ops whose C compares, selects or takes a min or max.

Element-wise ops, Max/Min, Softmax, ReduceLogSumExp and TopK are compared with ONNX Runtime: same NaN positions,
same values, same signs of infinities. ONNX Runtime's max reductions (ReduceMax, MaxPool, GlobalMaxPool, ArgMax)
return NaN or not depending on where the NaN sits in the window (ReduceMax([1, NaN, 3]) is 3, ReduceMax([NaN, 1,
3]) is NaN, and MaxPool and GlobalMaxPool differ again); tilegrad propagates NaN from any position, as NumPy and
the ONNX reference implementation do, so those are compared with NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad

SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 3.0], np.float32)


def _with_specials(shape, seed=0) -> np.ndarray:
    """Normal numbers with every special value placed at random positions, several times."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    where = rng.choice(flat.size, size=min(flat.size, 3 * len(SPECIAL)), replace=False)
    flat[where] = np.resize(SPECIAL, len(where))
    return x


def _model(op, inputs, attrs=None, initializers=(), outputs=(("y", TensorProto.FLOAT),)) -> bytes:
    infos = [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(x.shape)) for name, x in inputs.items()]
    node = helper.make_node(op, list(inputs) + [t.name for t in initializers], [n for n, _ in outputs],
                            **(attrs or {}))
    results = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    graph = helper.make_graph([node], op.lower(), infos, results, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def _ort(model: bytes, feeds) -> list[np.ndarray]:
    import onnxruntime as ort
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def _tilegrad(model: bytes, feeds) -> list[np.ndarray]:
    out = tilegrad.compile(model)(**feeds)
    return out if isinstance(out, list) else [out]


def _assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal NaN positions, equal infinities (with their signs), close finite values."""
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg="NaN positions differ")
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg="+inf positions differ")
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want), err_msg="-inf positions differ")
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


def _scalar(value, name):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


UNARY = [("Relu", {}), ("LeakyRelu", {"alpha": 0.1}), ("Elu", {}), ("Selu", {}), ("Celu", {}),
         ("ThresholdedRelu", {}), ("HardSigmoid", {}), ("HardSwish", {}), ("Sign", {}), ("Abs", {}),
         ("Shrink", {"lambd": 0.5}), ("Softplus", {}), ("Softsign", {}), ("Sigmoid", {}), ("Tanh", {}),
         ("Softmax", {}), ("Softmax", {"axis": 0}), ("LogSoftmax", {})]


@pytest.mark.parametrize("op, attrs", UNARY, ids=[f"{op}{attrs or ''}" for op, attrs in UNARY])
def test_unary_ops_treat_special_values_as_onnxruntime(op, attrs):
    feeds = {"x": _with_specials((4, 33))}
    model = _model(op, feeds, attrs)
    _assert_same(_tilegrad(model, feeds)[0], _ort(model, feeds)[0])


def test_reduce_log_sum_exp_of_infinite_rows_is_infinite():
    """The max shift would make inf - inf = NaN; ONNX Runtime gives inf, and -inf for a row of -inf. (A row with
    both NaN and inf is NaN here and may be inf in ONNX Runtime, whose max skips some NaN: see the module's
    docstring.)"""
    rows = np.array([[1, np.inf, 2], [np.inf, -np.inf, 1], [-np.inf, -np.inf, -np.inf], [np.nan, 1, 2]], np.float32)
    feeds = {"x": rows}
    model = _model("ReduceLogSumExp", feeds, {"keepdims": 0}, [numpy_helper.from_array(np.array([1]), "axes")])
    got = _tilegrad(model, feeds)[0]
    _assert_same(got, _ort(model, feeds)[0])
    assert np.isposinf(got[:2]).all() and np.isneginf(got[2]) and np.isnan(got[3])


def test_clip_keeps_nan():
    feeds = {"x": _with_specials((4, 33))}
    model = _model("Clip", feeds, initializers=[_scalar(-1, "lo"), _scalar(1, "hi")])
    _assert_same(_tilegrad(model, feeds)[0], _ort(model, feeds)[0])


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("count", [2, 3])
def test_variadic_max_and_min_propagate_nan_from_any_input(op, count):
    """Every pair of special values, in both orders; -0.0 against 0.0 gives the later input, as ONNX Runtime."""
    a, b = np.repeat(SPECIAL, len(SPECIAL)), np.tile(SPECIAL, len(SPECIAL))
    feeds = {"a": a, "b": b, "c": np.roll(b, 3)}
    feeds = dict(list(feeds.items())[:count])
    model = _model(op, feeds)
    got, want = _tilegrad(model, feeds)[0], _ort(model, feeds)[0]
    _assert_same(got, want)
    zeros = want == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_orders_nan_as_the_largest_value(largest):
    x = np.array([[np.nan, 1, 2, 0], [1, 2, np.nan, 0], [np.nan] * 4, [np.nan, np.inf, -np.inf, 0],
                  [-0.0, 0.0, -0.0, 0.0]], np.float32)
    x = np.concatenate([x, _with_specials((3, 4))])
    feeds = {"x": x}
    model = _model("TopK", feeds, {"largest": largest}, [numpy_helper.from_array(np.array([3]), "k")],
                   outputs=(("values", TensorProto.FLOAT), ("indices", TensorProto.INT64)))
    for got, want in zip(_tilegrad(model, feeds), _ort(model, feeds)):
        _assert_same(got, want)


# --- max reductions: NaN from any position, as NumPy ---

ROWS = np.array([[np.nan, 1, 2, 0], [1, 2, np.nan, 0], [2, 5, np.nan, np.nan], [np.nan] * 4,
                 [np.nan, np.inf, -np.inf, 0], [-np.inf] * 4, [np.inf, 1, 2, np.inf], [3, -1, 7, 7]], np.float32)


@pytest.mark.parametrize("op, np_reduce", [("ReduceMax", np.max), ("ReduceMin", np.min)])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce_max_and_min_propagate_nan(op, np_reduce, axis):
    x = np.concatenate([ROWS, _with_specials((8, 4))]) if axis == 1 else _with_specials((40, 6))
    feeds = {"x": x}
    model = _model(op, feeds, {"keepdims": 0}, [numpy_helper.from_array(np.array([axis]), "axes")])
    _assert_same(_tilegrad(model, feeds)[0], np_reduce(x, axis=axis))


@pytest.mark.parametrize("op, np_arg", [("ArgMax", np.argmax), ("ArgMin", np.argmin)])
@pytest.mark.parametrize("last", [0, 1])
def test_argmax_and_argmin_point_at_the_first_nan(op, np_arg, last):
    """A NaN is the extreme, as ReduceMax says; the index is always within the axis."""
    x = np.concatenate([ROWS, _with_specials((8, 4))])
    feeds = {"x": x}
    model = _model(op, feeds, {"axis": 1, "keepdims": 0, "select_last_index": last},
                   outputs=(("y", TensorProto.INT64),))
    want = np_arg(x, axis=1) if not last else x.shape[1] - 1 - np_arg(x[:, ::-1], axis=1)
    np.testing.assert_array_equal(_tilegrad(model, feeds)[0], want)


def test_max_pool_and_global_max_pool_propagate_nan():
    x = _with_specials((1, 3, 8, 8))
    feeds = {"x": x}
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)),
                                                              constant_values=-np.inf), (3, 3), axis=(2, 3))
    pool = _model("MaxPool", feeds, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
    _assert_same(_tilegrad(pool, feeds)[0], windows.max(axis=(4, 5)))
    glob = _model("GlobalMaxPool", feeds)
    _assert_same(_tilegrad(glob, feeds)[0], x.max(axis=(2, 3), keepdims=True))


@pytest.mark.parametrize("attrs, scales", [({"mode": "linear"}, [1, 1, 2, 2]), ({"mode": "linear"}, [1, 1, 0.5, 0.75]),
                                           ({"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                                            [1, 1, 1.5, 2])])
def test_linear_resize_keeps_an_edge_inf_and_propagates_nan(attrs, scales):
    """At the far edge ONNX Runtime takes the last element as it is (inf stays inf); elsewhere a NaN or inf
    neighbour, even of weight 0, makes the result NaN in both."""
    x = _with_specials((1, 2, 8, 8))
    x[0, 0, -1, -1], x[0, 1, -1, 3] = np.inf, -np.inf
    feeds = {"x": x}
    model = _model("Resize", feeds, attrs, [numpy_helper.from_array(np.array([], np.float32), "roi"),
                                            numpy_helper.from_array(np.array(scales, np.float32), "scales")])
    _assert_same(_tilegrad(model, feeds)[0], _ort(model, feeds)[0])


def test_hardmax_marks_the_first_nan_as_argmax_does():
    x = np.concatenate([ROWS, _with_specials((8, 4))])
    feeds = {"x": x}
    want = np.eye(x.shape[1], dtype=np.float32)[np.argmax(x, axis=1)]
    _assert_same(_tilegrad(_model("Hardmax", feeds), feeds)[0], want)
