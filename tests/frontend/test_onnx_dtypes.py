"""Every ONNX element type tilegrad compiles, end to end: one-node ONNX models per dtype, compiled to native code,
against ONNX's reference implementation (NumPy), and the edge cases each dtype brings (uint64 above 2**63,
float64 digits float32 would lose, bfloat16 rounding, unsigned wrap-around and division, shifts)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tilegrad

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
SHAPE = [3, 4]


def _elem(dtype: str) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _model(nodes, inputs, outputs, opset=21):
    """A model of `nodes`; inputs and outputs are (name, dtype, shape) triples."""
    vi = [helper.make_tensor_value_info(n, _elem(d), s) for n, d, s in inputs]
    vo = [helper.make_tensor_value_info(n, _elem(d), s) for n, d, s in outputs]
    graph = helper.make_graph(nodes, "g", vi, vo)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _values(dtype: str, rng, nonzero=False) -> np.ndarray:
    """Values spread over the dtype's range: the whole range for integers (uint64 above 2**63 too)."""
    if dtype == "bool":
        return rng.random(SHAPE) > 0.5
    if dtype in INTS:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, SHAPE, dtype=dtype, endpoint=True)
        return np.where(x == 0, 1, x).astype(dtype) if nonzero else x
    x = rng.standard_normal(SHAPE) * 8
    return x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def _run(model, feeds):
    want = ReferenceEvaluator(model).run(None, feeds)
    got = tilegrad.compile(model)(**feeds)
    return (got if isinstance(got, list) else [got]), want


def _check(got, want, names, dtype):
    for g, w, name in zip(got, want, names):
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype}, want {w.dtype}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{name} ({dtype})")
        else:
            rtol = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-14}[str(w.dtype)]
            np.testing.assert_allclose(g.astype("float64"), w.astype("float64"), rtol=rtol, atol=rtol,
                                       err_msg=f"{name} ({dtype})")


ARITHMETIC = ("Add", "Sub", "Mul", "Div", "Max", "Min")
COMPARE = ("Less", "Greater", "Equal", "LessOrEqual")


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_arithmetic_comparisons_and_structure_match_the_reference(dtype):
    """add/sub/mul/div/max/min, comparisons, reduce, matmul, where, gather and concat in one model per dtype."""
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in ARITHMETIC + COMPARE]
    nodes += [helper.make_node("Where", ["c", "a", "b"], ["where"]),
              helper.make_node("Gather", ["a", "idx"], ["gather"], axis=1),
              helper.make_node("Concat", ["a", "b"], ["concat"], axis=0)]
    structure = ["where", "gather", "concat"]
    if dtype not in ("int16", "uint16"):  # the types ONNX's ReduceMax takes
        nodes.append(helper.make_node("ReduceMax", ["a", "axes"], ["reduce_max"], keepdims=1))
        structure.append("reduce_max")
    if dtype not in ("int8", "int16", "uint8", "uint16"):  # the types ONNX's ReduceSum and MatMul take
        nodes += [helper.make_node("ReduceSum", ["a", "axes"], ["reduce_sum"], keepdims=0),
                  helper.make_node("Transpose", ["b"], ["bt"]), helper.make_node("MatMul", ["a", "bt"], ["matmul"])]
        structure += ["reduce_sum", "matmul"]
    nodes.insert(0, helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("v", 7, [1], [1])))
    bool_out = [(op.lower(), "bool", None) for op in COMPARE]
    outputs = [(op.lower(), dtype, None) for op in ARITHMETIC] + bool_out + [(n, dtype, None) for n in structure]
    model = _model(nodes, [("a", dtype, SHAPE), ("b", dtype, SHAPE), ("c", "bool", SHAPE), ("idx", "int64", [2])],
                   outputs, opset=18)
    rng = np.random.default_rng(1)
    feeds = {"a": _values(dtype, rng), "b": _values(dtype, rng, nonzero=True), "c": _values("bool", rng),
             "idx": np.array([3, -4], "int64")}
    if dtype in INTS:  # small enough that the sums of products are exact in every implementation
        feeds["a"] = (feeds["a"] % 8).astype(dtype)
        feeds["a"][0, :2] = (feeds["a"][0, :2] ^ np.array(np.iinfo(dtype).max, dtype))  # and extremes
    got, want = _run(model, feeds)
    if dtype == "bfloat16":  # sums accumulate in float32 and round once (the reference rounds every step)
        a, b = feeds["a"].astype("float32"), feeds["b"].astype("float32")
        sums = {"reduce_sum": a.sum(axis=1), "matmul": a @ b.T}
        want = [sums[o[0]].astype(ml_dtypes.bfloat16) if o[0] in sums else w for o, w in zip(outputs, want)]
    _check(got, want, [o[0] for o in outputs], dtype)


@pytest.mark.parametrize("source", FLOATS + INTS + ("bool",))
def test_cast_to_every_dtype_matches_the_reference(source):
    targets = FLOATS + INTS + ("bool",)
    nodes = [helper.make_node("Cast", ["x"], [f"to_{t}"], to=_elem(t)) for t in targets]
    model = _model(nodes, [("x", source, SHAPE)], [(f"to_{t}", t, SHAPE) for t in targets])
    rng = np.random.default_rng(2)
    x = _values(source, rng)
    if source in FLOATS:  # in range of every target (C leaves casting out-of-range floats undefined)
        x = np.abs(x.astype("float32")).clip(0, 100).astype(x.dtype)
    got, want = _run(model, {"x": x})
    _check(got, want, [f"to_{t}" for t in targets], source)


def test_uint64_above_2_63_keeps_every_bit():
    big = np.array([[2**64 - 1, 2**63, 2**63 + 12345, 7]], "uint64")
    small = np.array([[2, 2**63 - 1, 10, 2**64 - 2]], "uint64")
    ops = ("Add", "Sub", "Mul", "Div", "Less", "Greater", "Equal", "Max", "Min", "Mod")
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in ops]
    outputs = [(op.lower(), "bool" if op in ("Less", "Greater", "Equal") else "uint64", None) for op in ops]
    model = _model(nodes, [("a", "uint64", [1, 4]), ("b", "uint64", [1, 4])], outputs)
    got = tilegrad.compile(model)(a=big, b=small)
    with np.errstate(over="ignore"):
        want = [big + small, big - small, big * small, big // small, big < small, big > small, big == small,
                np.maximum(big, small), np.minimum(big, small), big % small]
    for g, w, op in zip(got, want, ops):
        np.testing.assert_array_equal(g, w, err_msg=op)


def test_float64_keeps_digits_float32_would_lose():
    x = np.array([[1.0 + 1e-12, 1e300, 3.141592653589793, -2.0 ** -60]])
    nodes = [helper.make_node("Constant", [], ["one"], value=helper.make_tensor("v", 11, [], [1.0])),
             helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Sub", ["x", "one"], ["rest"]),
             helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0)]
    model = _model(nodes, [("x", "float64", [1, 4])], [("sq", "float64", None), ("rest", "float64", None),
                                                         ("sum", "float64", None)], opset=13)
    sq, rest, total = tilegrad.compile(model)(x=x)
    np.testing.assert_array_equal(sq, x * x)
    np.testing.assert_array_equal(rest, x - 1.0)
    assert rest[0, 0] != 0 and total == x.sum()


def test_bfloat16_rounds_once_to_nearest_even():
    """bfloat16 products are computed in float32 and rounded once, ties to even, as ml_dtypes does."""
    a = np.array([1.0, 1.0078125, 3.0, -5.5, 1e38, np.inf, np.nan, 0.0], ml_dtypes.bfloat16).reshape(2, 4)
    b = np.array([1.00390625, 1.0, 1.0078125, 2.0, 10.0, -1.0, 1.0, -0.0], ml_dtypes.bfloat16).reshape(2, 4)
    nodes = [helper.make_node("Mul", ["a", "b"], ["prod"]), helper.make_node("Add", ["a", "b"], ["sum"]),
             helper.make_node("Cast", ["sum"], ["wide"], to=_elem("float32"))]
    model = _model(nodes, [("a", "bfloat16", [2, 4]), ("b", "bfloat16", [2, 4])],
                   [("prod", "bfloat16", None), ("sum", "bfloat16", None), ("wide", "float32", None)])
    prod, total, wide = tilegrad.compile(model)(a=a, b=b)
    want_prod = (a.astype("float32") * b.astype("float32")).astype(ml_dtypes.bfloat16)
    want_sum = (a.astype("float32") + b.astype("float32")).astype(ml_dtypes.bfloat16)
    assert prod.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(prod.view("uint16"), want_prod.view("uint16"))
    np.testing.assert_array_equal(total.view("uint16") & 0x7FBF, want_sum.view("uint16") & 0x7FBF)  # NaN payloads
    np.testing.assert_array_equal(wide, want_sum.astype("float32"))


@pytest.mark.parametrize("dtype", INTS)
def test_bitwise_ops_match_the_reference(dtype):
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")]
    nodes.append(helper.make_node("BitwiseNot", ["a"], ["bitwisenot"]))
    names = ["bitwiseand", "bitwiseor", "bitwisexor", "bitwisenot"]
    model = _model(nodes, [("a", dtype, SHAPE), ("b", dtype, SHAPE)], [(n, dtype, None) for n in names], opset=18)
    rng = np.random.default_rng(3)
    got, want = _run(model, {"a": _values(dtype, rng), "b": _values(dtype, rng)})
    _check(got, want, names, dtype)


@pytest.mark.parametrize("dtype", ("uint8", "uint16", "uint32", "uint64"))
def test_bit_shifts_match_numpy(dtype):
    width = np.dtype(dtype).itemsize * 8
    x = np.array([[1, 3, np.iinfo(dtype).max, 0x81]], dtype)
    shift = np.array([[1, width - 1, 2, 0]], dtype)
    nodes = [helper.make_node("BitShift", ["x", "s"], ["left"], direction="LEFT"),
             helper.make_node("BitShift", ["x", "s"], ["right"], direction="RIGHT")]
    model = _model(nodes, [("x", dtype, [1, 4]), ("s", dtype, [1, 4])], [("left", dtype, None), ("right", dtype, None)])
    left, right = tilegrad.compile(model)(x=x, s=shift)
    np.testing.assert_array_equal(left, np.left_shift(x, shift))
    np.testing.assert_array_equal(right, np.right_shift(x, shift))


@pytest.mark.parametrize("dtype,fmod", [(d, 1) for d in FLOATS + INTS] + [(d, 0) for d in INTS])  # floats: fmod=1
def test_mod_matches_the_reference(dtype, fmod):
    model = _model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                   [("a", dtype, SHAPE), ("b", dtype, SHAPE)], [("y", dtype, None)])
    rng = np.random.default_rng(4)
    feeds = {"a": _values(dtype, rng), "b": _values(dtype, rng, nonzero=True)}
    got, want = _run(model, feeds)
    _check(got, want, ["y"], dtype)


@pytest.mark.parametrize("dtype", ("bfloat16", "float64", "uint64", "int16"))
def test_weights_of_every_dtype_survive_save_and_load(dtype, tmp_path):
    """NumPy's file format cannot name bfloat16; its weights come back as bfloat16 all the same."""
    w = _values(dtype, np.random.default_rng(5))
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", _elem(dtype), SHAPE)],
                              [helper.make_tensor_value_info("y", _elem(dtype), SHAPE)],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    x = _values(dtype, np.random.default_rng(6))
    module = tilegrad.compile(model)
    want = module(x=x)
    module.save(tmp_path / "m")
    got = tilegrad.load(tmp_path / "m")(x=x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))
    _check([want], ReferenceEvaluator(model).run(None, {"x": x}), ["y"], dtype)


def test_bfloat16_constants_fold_as_floats():
    """A node of constant bfloat16 inputs is folded by its NumPy reference, which must treat bfloat16 (NumPy kind
    "V") as a float: MatMul and Div once folded it as integers."""
    rng = np.random.default_rng(7)
    a, b, d = ((rng.standard_normal(s) * 3).astype(ml_dtypes.bfloat16) for s in ((3, 4), (4, 5), (3, 4)))
    nodes = [helper.make_node("MatMul", ["a", "b"], ["mm"]), helper.make_node("Div", ["a", "d"], ["dv"]),
             helper.make_node("Gemm", ["a", "b"], ["gm"], alpha=0.5), helper.make_node("Add", ["mm", "x"], ["y1"]),
             helper.make_node("Add", ["dv", "x2"], ["y2"]), helper.make_node("Add", ["gm", "x"], ["y3"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", _elem("bfloat16"), [3, 5]),
                                           helper.make_tensor_value_info("x2", _elem("bfloat16"), [3, 4])],
                              [helper.make_tensor_value_info(n, _elem("bfloat16"), None) for n in ("y1", "y2", "y3")],
                              [numpy_helper.from_array(v, n) for v, n in ((a, "a"), (b, "b"), (d, "d"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    feeds = {"x": np.zeros((3, 5), ml_dtypes.bfloat16), "x2": np.zeros((3, 4), ml_dtypes.bfloat16)}
    got, want = _run(model, feeds)
    _check(got, want, ["matmul", "div", "gemm"], "bfloat16")
