"""The specializing module against ONNX Runtime: symbolic dims (with `dynamic=False`) and value inputs compile once
per signature, from many threads at once, bounded in memory, saved and loaded with their specialisations, with
tuning records. Symbolic dims made dynamic as calls change them: tests/dynamic/test_automatic_dims.py."""

import threading
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import metrics
from tilegrad.api import compile_with_report
from tilegrad.errors import (
    KernelCallError,
    ModuleFormatError,
    ShapeError,
    TilegradError,
    UnsupportedFeatureError,
)
from tilegrad.runtime.module import Module
from tilegrad.runtime.specializing import SpecializingModule

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)),
                             opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


@pytest.fixture
def mlp():
    """x (N, 8) -> MatMul(8, 16) -> Add -> Relu -> y (N, 16); N symbolic."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 16)).astype("float32"), "w")
    bias = numpy_helper.from_array(rng.standard_normal(16).astype("float32"), "bias")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "bias"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N", 8])],
                  [helper.make_tensor_value_info("y", F, ["N", 16])], [w, bias])


@pytest.fixture
def reshape():
    """y = Reshape(Relu(x), shape): x (N, 6) with N symbolic, shape an int64 input."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N", 6]),
                          helper.make_tensor_value_info("shape", I64, [2])],
                  [helper.make_tensor_value_info("y", F, None)])


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def test_a_symbolic_batch_compiles_once_per_batch_size_and_matches_onnxruntime(mlp):
    mod = tilegrad.compile(mlp, dynamic=False)
    assert isinstance(mod, SpecializingModule)
    assert mod.input_names == ["x"] and mod.output_names == ["y"] and mod.value_inputs == []
    for n in (1, 3, 8, 3, 1):
        x = _x(n, 8, seed=n)
        np.testing.assert_allclose(mod(x), _onnxruntime(mlp, {"x": x})[0], rtol=1e-5, atol=1e-5)
    assert metrics.counters["specializations_compiled"] == 3
    assert [s.shapes for s in mod.specializations()] == [{"x": (8, 8)}, {"x": (3, 8)}, {"x": (1, 8)}]
    assert mod.specialization(_x(3, 8)).input_shapes == {"x": (3, 8)}  # the compiled Module, not compiled again
    assert metrics.counters["specializations_compiled"] == 3


def test_a_static_model_is_still_a_plain_module(mlp):
    assert isinstance(tilegrad.compile(mlp, input_shapes={"x": (2, 8)}), Module)


def test_a_reshape_whose_shape_is_an_input_compiles_per_value(reshape):
    mod = tilegrad.compile(reshape)
    assert mod.value_inputs == ["shape"]
    x = _x(4, 6)
    for target in ([3, 8], [8, 3], [-1, 2], [3, 8]):
        shape = np.array(target, "int64")
        got, want = mod(x, shape), _onnxruntime(reshape, {"x": x, "shape": shape})[0]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    assert metrics.counters["specializations_compiled"] == 3
    assert mod.specializations()[-1].values == {"shape": [3, 8]}


def test_tile_repeats_as_an_input_match_onnxruntime():
    model = _model([helper.make_node("Tile", ["x", "repeats"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("repeats", I64, [2])],
                   [helper.make_tensor_value_info("y", F, None)])
    mod = tilegrad.compile(model)
    x = _x(2, 3)
    for repeats in ([1, 1], [2, 3], [3, 1]):
        r = np.array(repeats, "int64")
        np.testing.assert_array_equal(mod(x=x, repeats=r), _onnxruntime(model, {"x": x, "repeats": r})[0])


def test_eight_threads_with_two_shapes_compile_each_once_and_all_get_the_right_outputs(mlp):
    mod = tilegrad.compile(mlp, dynamic=False)
    inputs = {n: _x(n, 8, seed=n) for n in (2, 5)}
    expected = {n: _onnxruntime(mlp, {"x": x})[0] for n, x in inputs.items()}
    start = threading.Barrier(8)
    wrong: list[str] = []

    def work(t: int) -> None:
        start.wait()
        for k in range(5):
            n = (2, 5)[(t + k) % 2]
            try:
                np.testing.assert_allclose(mod(inputs[n]), expected[n], rtol=1e-5, atol=1e-5)
            except Exception as exc:  # noqa: BLE001  (collected, asserted below)
                wrong.append(f"thread {t} call {k}: {exc}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert wrong == []
    assert metrics.counters["specializations_compiled"] == 2


def test_save_and_load_restore_the_specializations_without_compiling(reshape, tmp_path):
    mod = tilegrad.compile(reshape)
    x = _x(4, 6)
    a, b = np.array([3, 8], "int64"), np.array([2, 12], "int64")
    want_a, want_b = mod(x, a), mod(x, b)
    mod.save(tmp_path / "saved")
    metrics.reset()
    loaded = tilegrad.load(tmp_path / "saved")
    assert isinstance(loaded, SpecializingModule) and len(loaded.specializations()) == 2
    np.testing.assert_array_equal(loaded(x, a), want_a)
    np.testing.assert_array_equal(loaded(x, b), want_b)
    assert metrics.counters["specializations_compiled"] == 0 and metrics.counters["build.compiled"] == 0
    x2 = _x(2, 6)
    c = np.array([4, 3], "int64")
    np.testing.assert_array_equal(loaded(x2, c), _onnxruntime(reshape, {"x": x2, "shape": c})[0])
    assert metrics.counters["specializations_compiled"] == 1
    loaded.save(tmp_path / "saved")  # over itself: replaced whole
    assert len(tilegrad.load(tmp_path / "saved").specializations()) == 3


def test_saving_refuses_a_directory_holding_other_files(mlp, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("keep me")
    with pytest.raises(ModuleFormatError, match="not empty"):
        tilegrad.compile(mlp).save(tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "keep me"


def test_an_altered_saved_model_is_refused(mlp, tmp_path):
    mod = tilegrad.compile(mlp)
    mod(_x(2, 8))
    mod.save(tmp_path / "saved")
    (tmp_path / "saved" / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ModuleFormatError, match="checksum"):
        tilegrad.load(tmp_path / "saved")


def test_the_cache_keeps_the_most_recently_used(mlp):
    mod = tilegrad.compile(mlp, max_specializations=2, dynamic=False)
    for n in (1, 2, 1, 3):
        mod(_x(n, 8))
    assert [s.shapes["x"][0] for s in mod.specializations()] == [1, 3]  # 2 was the least recently used
    assert metrics.counters["specializations_evicted"] == 1
    mod(_x(2, 8))
    assert metrics.counters["specializations_compiled"] == 4
    with pytest.raises(TilegradError, match="max_specializations must be at least 1"):
        tilegrad.compile(mlp, max_specializations=0)


def test_each_new_specialization_is_logged(mlp, caplog):
    """A server compiling on a request it did not expect says so (a compile takes seconds)."""
    mod = tilegrad.compile(mlp)
    with caplog.at_level("INFO", logger="tilegrad.runtime.specializing"):
        mod(_x(3, 8))
        mod(_x(3, 8))
    compiled = [r.getMessage() for r in caplog.records if "compiled a specialisation" in r.getMessage()]
    assert len(compiled) == 1 and "x [3, 8]" in compiled[0], compiled


def _mapped_libraries() -> set[str]:
    """The shared objects of the build cache mapped into this process now."""
    cache = str(Path(tilegrad.config.get().cache_dir).resolve())
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if line.rstrip().endswith(".so") and cache in line}


def test_evicted_specializations_are_unloaded(mlp):
    """A dynamic module called with many batch sizes keeps the libraries of the `max_specializations` it holds
    (the issue found ~1,000 mapped library segments after 200 sizes with a bound of 8)."""
    import gc

    mod = tilegrad.compile(mlp, max_specializations=2, dynamic=False)
    mod(_x(1, 8))
    before = _mapped_libraries()
    for n in range(2, 9):
        np.testing.assert_allclose(mod(_x(n, 8)), _onnxruntime(mlp, {"x": _x(n, 8)})[0], rtol=1e-5, atol=1e-5)
    gc.collect()
    grown = _mapped_libraries() - before
    assert len(grown) <= 2, sorted(grown)  # the two held; the first one's library went with it


def test_wrong_inputs_are_clear_errors(mlp, reshape):
    mod = tilegrad.compile(mlp)
    with pytest.raises(KernelCallError, match=r"input 'x' expects rank 2 \(shape \[N, 8\]\), got shape \(8,\)"):
        mod(np.zeros(8, "float32"))
    with pytest.raises(KernelCallError, match=r"input 'x' expects shape \[N, 8\], got \(2, 7\): dimension 1 must"):
        mod(np.zeros((2, 7), "float32"))
    with pytest.raises(KernelCallError, match="input 'x' expects dtype float32, got float64"):
        mod(np.zeros((2, 8)))
    with pytest.raises(KernelCallError, match="no input 'z'"):
        mod(z=np.zeros((2, 8), "float32"))
    with pytest.raises(KernelCallError, match=r"missing input\(s\) \['shape'\]"):
        tilegrad.compile(reshape)(_x(2, 6))
    with pytest.raises(ShapeError, match="Reshape"):  # a value that does not fit: the compile's own error
        tilegrad.compile(reshape)(_x(2, 6), np.array([5, 5], "int64"))


def test_a_report_needs_a_fixed_shape(mlp, reshape):
    with pytest.raises(ShapeError, match=r"input x float32\[N, 8\] has symbolic dimensions.*input_shapes"):
        compile_with_report(mlp)
    with pytest.raises(ShapeError, match=r"input shape int64\[2\] is a value input \(it reaches Reshape"):
        compile_with_report(reshape, input_shapes={"x": (2, 6)})
    assert compile_with_report(mlp, input_shapes={"x": (2, 8)}).kernels >= 1


def test_a_float_input_that_shapes_compiles_per_value():
    model = _model([helper.make_node("Cast", ["s"], ["i"], to=I64), helper.make_node("Reshape", ["x", "i"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("s", F, [2])],
                   [helper.make_tensor_value_info("y", F, None)])
    module = tilegrad.compile(model)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    assert module(x, np.array([3, 2], "float32")).shape == (3, 2)
    assert module(x, np.array([6, 1], "float32")).shape == (6, 1)


def test_each_specialization_uses_the_tuning_records(mlp, tmp_path):
    from tilegrad.tune.model import model_graph
    from tilegrad.tune.records import Database, Record
    from tilegrad.tune.task import extract_tasks

    db = tmp_path / "tune.db"
    with Database(db) as records:
        for n in (2, 4):
            for t in extract_tasks(model_graph(mlp, input_shapes={"x": (n, 8)})):
                records.add(Record(t.key, t.name, t.default_trace().to_json(), (1e-3,)))
    mod = tilegrad.compile(mlp, db=db)
    applied = []
    for n in (2, 4, 3):
        before = metrics.counters["tune.records_applied"]
        x = _x(n, 8)
        np.testing.assert_allclose(mod(x), _onnxruntime(mlp, {"x": x})[0], rtol=1e-5, atol=1e-5)
        applied.append(metrics.counters["tune.records_applied"] - before)
    assert applied[0] >= 1 and applied[1] >= 1 and applied[2] == 0  # batch 3 was never tuned


def test_an_edited_manifest_is_refused(reshape, tmp_path):
    import json

    mod = tilegrad.compile(reshape)
    mod(_x(2, 6), np.array([3, 4], "int64"))
    mod.save(tmp_path / "saved")
    manifest = tmp_path / "saved" / "specializing.json"
    body = json.loads(manifest.read_text())
    body["specializations"][0]["shapes"] = {"x": [2, 6]}  # the value input 'shape' is missing
    manifest.write_text(json.dumps(body))
    with pytest.raises(ModuleFormatError, match="does not fit the model"):
        tilegrad.load(tmp_path / "saved")
    del body["options"]
    manifest.write_text(json.dumps(body))
    with pytest.raises(ModuleFormatError, match="lacks a field"):
        tilegrad.load(tmp_path / "saved")
