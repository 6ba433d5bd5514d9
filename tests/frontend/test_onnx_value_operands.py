"""Shape-like operands fed as graph inputs (value inputs, one specialisation per value) for the ops whose
mappings read them as constants, against ONNX Runtime (`onnx_cases` in conftest); and `SHAPE_OPERANDS`
checked against every mapping that calls `constant_input`."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tilegrad.frontend.onnx_inputs import SHAPE_OPERANDS

_rng = np.random.default_rng(26)


def _normal(*shape):
    return _rng.standard_normal(shape).astype("float32")


def _i64(*values):
    return np.array(values, "int64")


def test_image_and_data_ops_with_run_time_shapes_match_onnxruntime(onnx_cases):
    pooled, picks = _normal(1, 2, 2, 2), np.array([[[[0, 3], [9, 14]], [[1, 6], [10, 19]]]], "int64")
    onnx_cases([
        {"op": "CumProd", "inputs": [_normal(3, 4), np.array(-1, "int64")], "attrs": {"exclusive": 1}},
        {"op": "CenterCropPad", "inputs": [_normal(5, 6, 3), _i64(3, 9, 3)], "attrs": {}},
        {"op": "AffineGrid", "inputs": [_normal(2, 2, 3), _i64(2, 3, 4, 5)], "attrs": {"align_corners": 1}},
        {"op": "Col2Im", "inputs": [_normal(2, 2 * 4, 12), _i64(4, 5), _i64(2, 2)], "attrs": {}},
        {"op": "MaxUnpool", "inputs": [pooled, picks, _i64(1, 2, 4, 5)],
         "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}},
    ], opset=26)


def test_signal_ops_with_run_time_lengths_and_axes_match_onnxruntime(onnx_cases):
    onnx_cases([
        {"op": "DFT", "inputs": [_normal(2, 6, 2), _i64(5), np.array(1, "int64")], "attrs": {"inverse": 1}},
        {"op": "STFT", "inputs": [_normal(1, 32, 1), np.array(4, "int64"), np.hanning(8).astype("float32"),
                                  np.array(8, "int64")], "attrs": {}},
    ], opset=20, rtol=1e-4, atol=1e-4)


def test_recurrent_sequence_lens_given_at_run_time_match_onnxruntime(onnx_cases):
    seq, batch, size, hidden = 5, 3, 4, 6
    x, lens = _normal(seq, batch, size), np.array([5, 2, 4], "int32")
    onnx_cases([
        {"op": op, "inputs": [x, _normal(1, gates * hidden, size), _normal(1, gates * hidden, hidden),
                              _normal(1, 2 * gates * hidden), lens], "attrs": {"hidden_size": hidden}}
        for op, gates in (("RNN", 1), ("GRU", 3), ("LSTM", 4))
    ], opset=17, rtol=1e-4, atol=1e-5)


def test_dropout_in_training_with_ratio_zero_is_the_identity(onnx_cases):
    onnx_cases([{"op": "Dropout", "inputs": [_normal(3, 4), np.array(0, "float32"), np.array(True)],
                 "attrs": {}, "out_types": (1, 9)}], opset=22)


def test_dropout_in_training_with_a_ratio_is_refused_as_random():
    from onnx import TensorProto, helper

    from tilegrad.errors import UnsupportedFeatureError
    from tilegrad.frontend.onnx import import_onnx

    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")
    inits = [helper.make_tensor("r", TensorProto.FLOAT, [], [0.5]), helper.make_tensor("t", TensorProto.BOOL, [], [1])]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    with pytest.raises(UnsupportedFeatureError, match=r"'drop'.*ratio 0.5 drops at random"):
        import_onnx(model)


# A mapping may read these operands as constants only when they are; otherwise it computes with them at run time.
_READ_AT_RUN_TIME_TOO = {"Clip": (1, 2)}


def _constant_operands(fn, reads_constant: dict[str, set[int]]) -> set[int]:
    """The ONNX input positions of mapping `fn` (parameters after `b` and `name`) that reach `constant_input`."""
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    found = _reaching(tree.body[0], params, reads_constant)
    return {params.index(p) - 2 for p in found}


def _reaching(func: ast.FunctionDef, params: list[str], reads_constant: dict[str, set[int]]) -> set[str]:
    """The parameters of `func` passed on (as a bare name) to a position that reaches `constant_input`."""
    found = set()
    for call in ast.walk(func):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
            for k in reads_constant.get(call.func.id, ()):
                arg = call.args[k] if k < len(call.args) else None
                if isinstance(arg, ast.Name) and arg.id in params:
                    found.add(arg.id)
    return found


def _helpers_reading_constants() -> dict[str, set[int]]:
    """{function name: its parameter positions that reach `constant_input`} over the frontend's modules, to a
    fixpoint (helpers call helpers)."""
    from tilegrad import frontend

    funcs = [f for path in Path(frontend.__file__).parent.glob("onnx*.py")
             for f in ast.walk(ast.parse(path.read_text())) if isinstance(f, ast.FunctionDef)]
    reads_constant = {"constant_input": {0}}
    while True:
        before = {k: set(v) for k, v in reads_constant.items()}
        for f in funcs:
            params = [a.arg for a in f.args.posonlyargs + f.args.args]
            hits = {params.index(p) for p in _reaching(f, params, reads_constant)}
            if hits:
                reads_constant.setdefault(f.name, set()).update(hits)
        if reads_constant == before:
            return reads_constant


def test_shape_operands_list_every_operand_a_mapping_reads_as_a_constant():
    from tilegrad.frontend import onnx  # noqa: F401  (the reader imports the op families, which fill ONNX_OPS)
    from tilegrad.frontend.onnx_op_table import ONNX_OPS

    reads_constant = _helpers_reading_constants()
    missing = {}
    for op, fn in ONNX_OPS.items():
        operands = _constant_operands(fn, reads_constant) - set(_READ_AT_RUN_TIME_TOO.get(op, ()))
        if operands - set(SHAPE_OPERANDS.get(op, ())):
            missing[op] = sorted(operands - set(SHAPE_OPERANDS.get(op, ())))
    assert not missing
    assert {"Reshape", "Slice", "CumProd", "Col2Im", "LSTM", "DFT"} <= {
        op for op, fn in ONNX_OPS.items() if _constant_operands(fn, reads_constant)}  # the scan finds them
