"""A model with open dimensions compiled without `dynamic=`: the first call's shapes compile fixed, the first call
that changes a dimension compiles one dynamic module, and every later call within its bounds runs without
compiling (against ONNX Runtime); bounds widen by recompiling once; a failed dynamic compile falls back to one
module per shape; the dynamic module is saved and loaded."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import metrics
from tilegrad.runtime.automatic_dims import DimensionWatch, admits, upper
from tilegrad.runtime.specializing import SpecializingModule

from .models import encoder_layer


@pytest.fixture(scope="module")
def layer():
    model = encoder_layer()
    return model, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(autouse=True)
def _zeroed_counters():
    metrics.reset()


def _x(batch, seq, seed=0):
    return np.random.default_rng(seed).standard_normal((batch, seq, 32)).astype(np.float32)


def _compiles() -> int:
    """Modules compiled and libraries built (or found in the build cache) so far."""
    return (metrics.counters["specializations_compiled"] + metrics.counters["dynamic_modules_compiled"]
            + metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"])


def _check(module, session, x):
    np.testing.assert_allclose(module(x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4,
                               err_msg=f"shape {x.shape}")


def test_a_changed_length_compiles_one_module_that_runs_every_later_length(layer):
    model, session = layer
    module = tilegrad.compile(model)
    assert isinstance(module, SpecializingModule) and module.dynamic_bounds is None
    _check(module, session, _x(1, 5))
    assert metrics.counters["specializations_compiled"] == 1 and module.dynamic_bounds is None
    _check(module, session, _x(1, 7))
    assert metrics.counters["dynamic_modules_compiled"] == 1
    assert module.dynamic_bounds == {"batch": 1, "seq": (1, 64)}  # batch never changed: it stays fixed
    assert not module.specialization(_x(1, 5)).spec.dims  # the first shape keeps its fixed module
    assert [d.name for d in module.specialization(_x(1, 9)).spec.dims] == ["seq"]
    before = _compiles()
    for seq in (1, 2, 3, 13, 31, 37, 64, 6, 7, 5):
        _check(module, session, _x(1, seq, seed=seq))
    assert _compiles() == before  # nothing compiled for any of them


def test_bounds_widen_by_compiling_once_more(layer):
    model, session = layer
    module = tilegrad.compile(model)
    for seq in (4, 8):
        module(_x(1, seq))
    assert module.dynamic_bounds == {"batch": 1, "seq": (1, 64)}
    _check(module, session, _x(1, 100))  # beyond the bound
    _check(module, session, _x(2, 10))  # a dimension fixed so far changes
    assert metrics.counters["dynamic_modules_compiled"] == 3
    assert module.dynamic_bounds == {"batch": (1, 64), "seq": (1, upper(100))}
    before = _compiles()
    for batch, seq in ((3, 50), (1, 1), (2, 257)):
        _check(module, session, _x(batch, seq))
    assert _compiles() == before


def test_eight_threads_calling_many_lengths_compile_one_fixed_and_one_dynamic_module(layer):
    import threading

    model, session = layer
    module = tilegrad.compile(model)
    lengths = [3, 5, 8, 13, 21, 34, 55, 3]
    inputs = {n: _x(1, n, seed=n) for n in lengths}
    expected = {n: session.run(None, {"x": x})[0] for n, x in inputs.items()}
    start, wrong = threading.Barrier(8), []

    def work(t: int) -> None:
        start.wait()
        for k in range(4):
            n = lengths[(t + k) % len(lengths)]
            try:
                np.testing.assert_allclose(module(inputs[n]), expected[n], rtol=1e-4, atol=1e-4)
            except Exception as exc:  # noqa: BLE001  (collected, asserted below)
                wrong.append(f"thread {t} call {k}: {exc}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert wrong == []
    assert metrics.counters["specializations_compiled"] == 1 and metrics.counters["dynamic_modules_compiled"] == 1


def test_dynamic_false_compiles_every_shape_fixed(layer):
    model, session = layer
    module = tilegrad.compile(model, dynamic=False)
    for seq in (3, 4, 5):
        _check(module, session, _x(1, seq))
    assert metrics.counters["specializations_compiled"] == 3 and metrics.counters["dynamic_modules_compiled"] == 0
    assert module.dynamic_bounds is None


def test_a_dynamic_compile_that_fails_falls_back_to_a_module_per_shape(layer, monkeypatch, caplog):
    import tilegrad.api

    def refuse(inputs, bounds):
        raise tilegrad.errors.ShapeError("no symbolic kernels for this model")

    model, session = layer
    monkeypatch.setattr(tilegrad.api, "symbolic_shapes", refuse)
    module = tilegrad.compile(model)
    with caplog.at_level("WARNING", logger="tilegrad.runtime.specializing"):
        for seq in (3, 4, 5):
            _check(module, session, _x(1, seq))
    assert "ShapeError: no symbolic kernels" in module.dynamic_unavailable
    assert metrics.counters["specializations_compiled"] == 3
    said = [r.getMessage() for r in caplog.records if "could not be compiled" in r.getMessage()]
    assert len(said) == 1 and "['seq']" in said[0], said  # said once, naming the dimension


def test_saved_and_loaded_with_its_dynamic_module(layer, tmp_path):
    model, session = layer
    module = tilegrad.compile(model)
    for seq in (4, 8):
        module(_x(1, seq))
    module.save(tmp_path / "saved")
    before = _compiles()
    loaded = tilegrad.load(tmp_path / "saved")
    assert loaded.dynamic_bounds == {"batch": 1, "seq": (1, 64)}
    for seq in (4, 11, 60):
        _check(loaded, session, _x(1, seq))
    assert _compiles() == before


def test_the_watch_reads_dimensions_by_name_and_admits_within_bounds():
    watch = DimensionWatch({"a": ("n", None), "b": ("n", "m")})
    assert watch.values({"a": (3, 8), "b": (3, 5)}) == {"n": 3, "m": 5}
    assert watch.values({"a": (3, 8), "b": (4, 5)}) is None  # n given two values: the fixed module says why
    assert watch.values({"a": (3,), "b": (3, 5)}) is None
    watch.observe({"n": 3, "m": 5})
    assert not watch.varied
    watch.observe({"n": 20, "m": 5})
    assert watch.varied and watch.bounds() == {"n": (1, 128), "m": 5}
    assert admits(watch.bounds(), {"n": 128, "m": 5}) and not admits(watch.bounds(), {"n": 129, "m": 5})
    assert not admits(watch.bounds(), {"n": 1, "m": 6})
    assert [upper(v) for v in (1, 16, 17, 100)] == [64, 64, 128, 512]


def _convnet(spatial: str | int) -> onnx.ModelProto:
    """x[N, 3, H, H] -> Conv 3x3 (pads 1) -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> y[N, 4]."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w", (8, 3, 3, 3)), ("b", (8,)), ("m", (8, 4)), ("c", (4,)))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "m", "c"], ["y"])]
    graph = helper.make_graph(nodes, "convnet",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, spatial, spatial])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("spatial", [16, "H"])
def test_a_convolution_network_over_changing_batches_and_images(spatial):
    """A batch that changes makes one dynamic module (its convolution's algorithm chosen at the batch its schedules
    are); an image size that changes after it compiles the dynamic module again with the image size dynamic too,
    and every later shape runs on it."""
    model = _convnet(spatial)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    module = tilegrad.compile(model)
    shapes = [(1, 16), (3, 16), (2, 16), (5, 16)] + ([(1, 9), (2, 20), (4, 7), (7, 16)] if spatial == "H" else [])
    for n, size in shapes:
        x = np.random.default_rng(n * size).standard_normal((n, 3, size, size)).astype(np.float32)
        np.testing.assert_allclose(module(x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4,
                                   err_msg=f"x {x.shape}")
    assert module.dynamic_bounds == {"N": (1, 64), **({"H": (2, 64)} if spatial == "H" else {})}  # 9 // 4 up
    assert metrics.counters["dynamic_modules_compiled"] == (2 if spatial == "H" else 1)
    assert module.dynamic_unavailable is None and metrics.counters["specializations_compiled"] == 1
