"""Sequence and optional graph inputs and outputs against ONNX Runtime: lists and None in and out, one
specialisation per sequence length and optional presence, saved and loaded, and the errors of a wrong kind."""

import json

import numpy as np
import pytest
from onnx import TensorProto, helper

import tilegrad
from tilegrad import metrics
from tilegrad.api import compile_with_report
from tilegrad.errors import KernelCallError, ModuleFormatError, ShapeError
from tilegrad.runtime.specializing import SpecializingModule

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                             opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _seq(name, dims=None):
    return helper.make_tensor_sequence_value_info(name, F, dims)


def _opt(name, inner):
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def _tensor_type(dims=None):
    return helper.make_tensor_type_proto(F, dims)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _same(out, ref):
    """`out` equals ONNX Runtime's `ref` as ONNX's runner compares: lists element by element, None as None."""
    if ref is None or isinstance(ref, list):
        assert (out is None) == (ref is None) and (ref is None or len(out) == len(ref)), (out, ref)
        for o, r in zip(out or [], ref or []):
            _same(o, r)
        return
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.fixture
def insert_and_concat():
    """seq (a sequence of [?, 3] tensors), t [2, 3] -> grown = SequenceInsert(seq, Relu(t)) (a sequence),
    joined = ConcatFromSequence(grown, axis 0) (a tensor)."""
    nodes = [helper.make_node("Relu", ["t"], ["r"]), helper.make_node("SequenceInsert", ["seq", "r"], ["grown"]),
             helper.make_node("ConcatFromSequence", ["grown"], ["joined"], axis=0)]
    return _model(nodes, [_seq("seq", ["n", 3]), helper.make_tensor_value_info("t", F, [2, 3])],
                  [_seq("grown"), helper.make_tensor_value_info("joined", F, None)])


def test_sequences_in_and_out_match_onnxruntime_per_length(insert_and_concat, tmp_path):
    mod = tilegrad.compile(insert_and_concat)
    assert isinstance(mod, SpecializingModule)
    t = _x(2, 3, seed=9)
    calls = [[_x(1, 3, seed=1), _x(4, 3, seed=2)], [_x(2, 3, seed=3), _x(1, 3, seed=4), _x(5, 3, seed=5)]]
    for seq in calls:
        grown, joined = mod(seq, t)
        assert isinstance(grown, list)
        _same([grown, joined], _onnxruntime(insert_and_concat, {"seq": seq, "t": t}))
    assert [s.forms for s in mod.specializations()] == [{"seq": 2, "t": "tensor"}, {"seq": 3, "t": "tensor"}]
    assert sorted(mod.specializations()[1].shapes) == ["seq.0", "seq.1", "seq.2", "t"]
    mod(tuple(calls[0]), t)  # a tuple is a sequence too; same length and shapes: no new compile
    assert len(mod.specializations()) == 2

    mod.save(tmp_path / "saved")
    loaded = tilegrad.load(tmp_path / "saved")
    assert isinstance(loaded, SpecializingModule) and len(loaded.specializations()) == 2
    metrics.reset()
    for seq in calls:
        _same(list(loaded(seq, t)), _onnxruntime(insert_and_concat, {"seq": seq, "t": t}))
    assert metrics.counters["specializations_compiled"] == 0  # both lengths were loaded, not compiled


def test_an_empty_sequence_input_is_its_own_specialisation():
    nodes = [helper.make_node("SequenceLength", ["seq"], ["n"]), helper.make_node("Cast", ["n"], ["nf"], to=F),
             helper.make_node("Add", ["x", "nf"], ["y"])]
    model = _model(nodes, [_seq("seq", [3]), helper.make_tensor_value_info("x", F, [3])],
                   [helper.make_tensor_value_info("y", F, [3])])
    mod = tilegrad.compile(model)
    x = _x(3)
    np.testing.assert_allclose(mod([], x), x)
    np.testing.assert_allclose(mod([_x(3), _x(3)], x), x + 2)
    _same(mod([_x(3), _x(3)], x), _onnxruntime(model, {"seq": [_x(3), _x(3)], "x": x})[0])


def test_a_sequence_output_of_tensor_inputs_is_a_list():
    model = _model([helper.make_node("SplitToSequence", ["x"], ["parts"], axis=1, keepdims=0)],
                   [helper.make_tensor_value_info("x", F, [2, 3])], [_seq("parts")])
    x = _x(2, 3)
    out = tilegrad.compile(model)(x)
    assert isinstance(out, list) and len(out) == 3
    _same([out], _onnxruntime(model, {"x": x}))


@pytest.fixture
def optional_tensor():
    """opt (an optional [4] tensor) -> has = OptionalHasElement(opt), same = Identity(opt) (an optional)."""
    inner = _tensor_type([4])
    nodes = [helper.make_node("OptionalHasElement", ["opt"], ["has"]), helper.make_node("Identity", ["opt"], ["same"])]
    return _model(nodes, [_opt("opt", inner)], [helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                                                _opt("same", inner)], opset=18)


def test_optional_tensor_present_and_absent_match_onnxruntime(optional_tensor):
    mod = tilegrad.compile(optional_tensor)
    x = _x(4)
    has, same = mod(x)
    _same([has, same], _onnxruntime(optional_tensor, {"opt": x}))
    has, same = mod(None)
    assert bool(has) is False and same is None
    _same([has, same], _onnxruntime(optional_tensor, {"opt": None}))
    assert [s.forms for s in mod.specializations()] == [{"opt": "tensor"}, {"opt": None}]


def test_optional_sequence_present_empty_and_absent_are_three_specialisations(tmp_path):
    """OptionalHasElement and SequenceLength of an optional sequence; an empty sequence is present."""
    inner = helper.make_sequence_type_proto(_tensor_type([2]))
    nodes = [helper.make_node("OptionalHasElement", ["opt"], ["has"]),
             helper.make_node("If", ["has"], ["n"],
                              then_branch=helper.make_graph(
                                  [helper.make_node("OptionalGetElement", ["opt"], ["seq"]),
                                   helper.make_node("SequenceLength", ["seq"], ["len"])], "then", [],
                                  [helper.make_tensor_value_info("len", I64, [])]),
                              else_branch=helper.make_graph(
                                  [helper.make_node("Constant", [], ["minus"], value_int=-1)], "else", [],
                                  [helper.make_tensor_value_info("minus", I64, [])]))]
    model = _model(nodes, [_opt("opt", inner)], [helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                                                 helper.make_tensor_value_info("n", I64, [])], opset=18)
    mod = tilegrad.compile(model)
    for value in ([_x(2), _x(2, seed=1)], None):
        _same(list(mod(value)), _onnxruntime(model, {"opt": value}))
    assert [bool(v) for v in mod([])] == [True, False]  # present, holding no tensors: has, length 0
    assert int(mod([])[1]) == 0
    assert [s.forms for s in mod.specializations()] == [{"opt": 2}, {"opt": None}, {"opt": 0}]
    mod.save(tmp_path / "saved")
    loaded = tilegrad.load(tmp_path / "saved")
    assert [s.forms for s in loaded.specializations()] == [{"opt": 2}, {"opt": None}, {"opt": 0}]
    assert int(loaded(None)[1]) == -1


def test_a_value_of_the_wrong_kind_or_dtype_names_the_input(insert_and_concat, optional_tensor):
    mod = tilegrad.compile(insert_and_concat)
    t = _x(2, 3)
    with pytest.raises(KernelCallError, match="input 'seq' is a sequence of tensors: give a list of arrays, not an "
                                              "array of shape \\(2, 3\\)"):
        mod(_x(2, 3), t)
    with pytest.raises(KernelCallError, match="input 't' is a tensor: give an array, not a list"):
        mod([_x(1, 3)], [t])
    with pytest.raises(KernelCallError, match="input 'seq' \\(its tensor 'seq.1'\\) expects dtype float32, got "
                                              "float64"):
        mod([_x(1, 3), np.zeros((1, 3))], t)
    with pytest.raises(KernelCallError, match="input 'seq' \\(its tensor 'seq.0'\\) expects shape \\[n, 3\\]"):
        mod([_x(1, 4)], t)
    with pytest.raises(KernelCallError, match="input 'seq' is a sequence of tensors: give a list of arrays, not "
                                              "None"):
        mod(None, t)
    with pytest.raises(KernelCallError, match="input 'opt' is an optional tensor: give an array or None, not a "
                                              "list"):
        tilegrad.compile(optional_tensor)([_x(4)])


def test_compile_with_report_names_a_sequence_input(insert_and_concat):
    with pytest.raises(ShapeError, match="input 'seq' is a sequence, whose length or presence each call gives"):
        compile_with_report(insert_and_concat)


def test_a_sequence_whose_values_are_shapes_specialises_on_them():
    """Reshape(x, SequenceAt(s, 0)): the sequence's tensors are value inputs, each distinct value compiles once."""
    nodes = [helper.make_node("Constant", [], ["zero"], value_int=0),
             helper.make_node("SequenceAt", ["s", "zero"], ["shape"]),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = _model(nodes, [helper.make_tensor_sequence_value_info("s", I64, [2]),
                           helper.make_tensor_value_info("x", F, [6])], [helper.make_tensor_value_info("y", F, None)])
    mod = tilegrad.compile(model)
    assert mod.value_inputs == ["s"]
    x = _x(6)
    for s in ([np.array([2, 3]), np.array([1, 1])], [np.array([3, 2])]):
        _same(mod(s, x), _onnxruntime(model, {"s": s, "x": x})[0])
    assert [spec.values for spec in mod.specializations()] == [{"s.0": [2, 3], "s.1": [1, 1]}, {"s.0": [3, 2]}]


def test_a_saved_specialisation_whose_forms_do_not_fit_its_tensors_is_refused(optional_tensor, tmp_path):
    mod = tilegrad.compile(optional_tensor)
    mod(_x(4))
    mod.save(tmp_path / "saved")
    manifest = tmp_path / "saved" / "specializing.json"
    row = json.loads(manifest.read_text())
    assert row["specializations"][0]["forms"] == {"opt": "tensor"}
    assert row["specializations"][0]["outputs"] == ["tensor", "tensor"]
    row["specializations"][0]["forms"] = {"opt": None}  # absent, yet its tensor opt.value is listed
    manifest.write_text(json.dumps(row))
    with pytest.raises(ModuleFormatError, match="lists a specialisation that does not fit the model"):
        tilegrad.load(tmp_path / "saved")
