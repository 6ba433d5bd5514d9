"""The ONNX conformance harness on a few fixed node tests: passes, a skip with its reason, the JSON shape."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tilegrad.tools import conformance
from tilegrad.tools.conformance import Result, TilegradBackend

PASSING = ("test_relu", "test_add", "test_softmax_axis_0", "test_matmul_2d", "test_conv_with_strides_padding")
UNSUPPORTED = "test_strnormalizer_export_monday_casesensintive_lower"  # a string op: no mapping
SEQUENCE = "test_sequence_insert_at_back"  # a sequence graph input and output, handed and compared as lists
WRONG_DTYPE = "test_cast_FLOAT_to_FLOAT8E4M3FN"  # float8 output: the runtime has no float8 buffers
NAMES = PASSING + (UNSUPPORTED, SEQUENCE, WRONG_DTYPE)


@pytest.fixture(scope="module")
def cases():
    found = conformance.load_cases("^(" + "|".join(NAMES) + ")$")
    assert sorted(c.name for c in found) == sorted(NAMES)
    return found


@pytest.fixture(scope="module")
def results(cases):
    return {r.name: r for r in conformance.run_suite(cases, jobs=2)}


@pytest.mark.parametrize("name", PASSING)
def test_known_good_node_tests_pass(results, name):
    assert results[name].status == "passed", results[name].message


def test_unsupported_op_is_skipped_with_the_op_named(results):
    r = results[UNSUPPORTED]
    assert (r.status, r.op) == ("skipped", "StringNormalizer")
    assert "StringNormalizer" in r.message


def test_sequence_inputs_and_outputs_run_and_unsupported_types_are_skipped(results):
    assert results[SEQUENCE].status == "passed", results[SEQUENCE].message
    assert results[WRONG_DTYPE].status == "skipped" and "float8_e4m3fn" in results[WRONG_DTYPE].message
    seq_of_seq = helper.make_sequence_type_proto(helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                                [helper.make_value_info("x", seq_of_seq)],
                                                [helper.make_value_info("y", seq_of_seq)]))
    assert "input 'x' is a sequence of sequence of tensor" in conformance.skip_reason(model)


def test_sequence_and_optional_outputs_are_compared_as_onnx_compares_them():
    a, b = np.ones(3, np.float32), np.zeros(2, np.float32)
    assert conformance._compare([[a, b], None], [[a, b], None], 1e-3, 1e-7) is None
    assert conformance._compare([[a]], [[a, b]], 1e-3, 1e-7) == "output 0: 1 elements, expected 2"
    assert conformance._compare([[a, a[:2]]], [[a, b]], 1e-3, 1e-7).startswith("output 0: element 1: 2/2")
    assert conformance._compare([None], [[a]], 1e-3, 1e-7) == "output 0: None, expected a sequence of 1"
    assert conformance._compare([a], [None], 1e-3, 1e-7) == "output 0: a tensor, expected None"


def test_groups_by_the_op_type():
    model = helper.make_model(helper.make_graph([helper.make_node("Constant", [], ["k"], value_float=1.0),
                                                 helper.make_node("Add", ["x", "k"], ["y"])], "g", [], []))
    assert conformance.op_group("test_reduce_max_keepdims_expanded", model) == "ReduceMax (expanded)"
    assert conformance.op_group("test_something_else", model) == "Add"  # the first node that is not a Constant


def test_json_output_shape(capsys):
    code = conformance.main(["--json", "--pattern", "^test_(relu|strnormalizer_export_monday_casesensintive_lower)$", "--jobs", "1"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {k: summary[k] for k in ("passed", "failed", "skipped")} == {"passed": 1, "failed": 0, "skipped": 1}
    assert summary["by_op"]["Relu"] == {"passed": 1, "failed": 0, "skipped": 0,
                                        "tests": {"test_relu": {"status": "passed"}}}
    assert summary["by_op"]["StringNormalizer"]["tests"][UNSUPPORTED]["status"] == "skipped"


def test_table_has_a_row_per_op_and_totals():
    summary = conformance.summarize([Result("test_relu", "Relu", "passed"),
                                     Result("test_det_2d", "Det", "skipped", "unsupported op: Det"),
                                     Result("test_add_bcast", "Add", "failed", "output 0: 3/60 elements differ")])
    lines = conformance.format_table(summary).splitlines()
    assert lines[0].split()[:4] == ["op", "passed", "failed", "skipped"]
    assert any(ln.split()[:4] == ["Add", "0", "1", "0"] and "3/60" in ln for ln in lines)
    assert lines[-1].split() == ["TOTAL", "1", "1", "1"]


def test_a_crashing_test_fails_alone(monkeypatch, cases):
    def crash(case):
        if case.name == "test_relu":
            os._exit(3)
        return Result(case.name, "X", "passed")

    monkeypatch.setattr(conformance, "run_case", crash)
    picked = [c for c in cases if c.name in ("test_relu", "test_add")]
    out = {r.name: r for r in conformance.run_suite(picked, jobs=1)}
    assert out["test_relu"].status == "failed" and "crashed" in out["test_relu"].message
    assert out["test_add"].status == "passed"


def test_a_wrong_result_is_a_failure_with_the_difference():
    problem = conformance._compare([np.ones(4, "float32")], [np.array([1, 1, 1, 2], "float32")], 1e-3, 1e-7)
    assert problem.startswith("output 0: 1/4 elements differ")
    assert "dtype" in conformance._compare([np.ones(4, "float32")], [np.ones(4, "int64")], 1e-3, 1e-7)


def test_bfloat16_outputs_are_compared_within_two_ulps_as_onnx_does():
    import ml_dtypes

    ref = np.array([1.0, 2.0, -4.0], ml_dtypes.bfloat16)
    two_ulps = np.array([1.015625, 2.0, -4.0], ml_dtypes.bfloat16)  # 1 + 2**-6
    three_ulps = np.array([1.0234375, 2.0, -4.0], ml_dtypes.bfloat16)
    assert conformance._compare([two_ulps], [ref], 1e-3, 1e-7) is None
    assert conformance._compare([three_ulps], [ref], 1e-3, 1e-7).startswith("output 0: 1/3 elements differ")


def test_backend_interface():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 13)])
    rep = TilegradBackend.prepare(model, "CPU")
    a = np.array([[-1, 2, -3], [4, -5, 6]], "float32")
    (out,) = rep.run([a])  # a symbolic dimension: compiled for the shape of the first run
    np.testing.assert_array_equal(out, np.maximum(a, 0))
    (out,) = TilegradBackend.run_node(onnx.helper.make_node("Relu", ["x"], ["y"]), [a])
    np.testing.assert_array_equal(out, np.maximum(a, 0))
    assert TilegradBackend.supports_device("CPU") and not TilegradBackend.supports_device("CUDA")


def test_the_backend_compiles_a_shape_given_as_an_input_per_value():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    shape = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                                                [x, shape], [y]), opset_imports=[helper.make_opsetid("", 13)])
    rep = TilegradBackend.prepare(model, "CPU")
    a = np.arange(6, dtype="float32").reshape(2, 3)
    for target in ([3, 2], [6, 1]):
        (out,) = rep.run({"x": a, "shape": np.array(target, "int64")})
        np.testing.assert_array_equal(out, a.reshape(target))


def test_reads_a_test_directory(tmp_path):
    from types import SimpleNamespace

    from onnx import numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                                opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "model.onnx")
    (tmp_path / "test_data_set_0").mkdir()
    a = np.array([[-1, 2, -3], [4, -5, 6]], "float32")
    for kind, arr in (("input", a), ("output", np.maximum(a, 0))):
        (tmp_path / "test_data_set_0" / f"{kind}_0.pb").write_bytes(numpy_helper.from_array(arr).SerializeToString())
    case = SimpleNamespace(name="test_relu_on_disk", model=None, model_dir=str(tmp_path), data_sets=None,
                           rtol=1e-3, atol=1e-7)
    assert conformance.run_case(case) == Result("test_relu_on_disk", "Relu", "passed")
