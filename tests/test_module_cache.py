"""The module cache: compiling a model again loads the module kept from the first compile, and anything that
decides the module (the model's bytes and external data, the options, the configuration) is a new entry."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad import api, config
from tilegrad import module_cache

RNG = np.random.default_rng(0)


def _model(w: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                              [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def compiles(monkeypatch, tmp_path):
    """The module cache on, in a fresh directory; the list of graphs actually compiled."""
    calls, real = [], api._compile_imported

    def spy(imported, options):
        calls.append(imported)
        return real(imported, options)

    monkeypatch.setattr(api, "_compile_imported", spy)
    with config.override(module_cache=True, cache_dir=tmp_path / "cache"):
        yield calls


def test_a_model_compiled_again_is_loaded_and_anything_that_decides_it_is_compiled(compiles, tmp_path):
    w = RNG.standard_normal((4, 4)).astype("float32")
    path = tmp_path / "model.onnx"
    onnx.save(_model(w), path, save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    x = RNG.standard_normal((2, 4)).astype("float32")
    first = tilegrad.compile(path)
    again = tilegrad.compile(path)
    assert len(compiles) == 1 and again is not first
    np.testing.assert_allclose(again(x), np.maximum(x @ w, 0), rtol=1e-5)
    assert len(list((tmp_path / "cache" / "compiled").iterdir())) == 1

    tilegrad.compile(path, opt_level=1)  # other options
    assert len(compiles) == 2
    onnx.save(_model(2 * w), path, save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    changed = tilegrad.compile(path)  # other weights, in the external data file
    assert len(compiles) == 3
    np.testing.assert_allclose(changed(x), np.maximum(x @ (2 * w), 0), rtol=1e-5)
    with config.override(num_threads=1):  # another configuration
        tilegrad.compile(path)
    assert len(compiles) == 4
    tilegrad.compile(_model(2 * w).SerializeToString())  # bytes, of a model seen as a file: its own entry
    tilegrad.compile(_model(2 * w).SerializeToString())
    assert len(compiles) == 5


def test_a_damaged_entry_is_compiled_again_and_the_cache_stays_bounded(compiles, tmp_path):
    model = _model(RNG.standard_normal((4, 4)).astype("float32")).SerializeToString()
    tilegrad.compile(model)
    (entry,) = (tmp_path / "cache" / "compiled").iterdir()
    (entry / "weights.bin").write_bytes(b"not the weights")
    tilegrad.compile(model)
    assert len(compiles) == 2
    with config.override(cache_bytes=1):  # a bound no entry fits: each new one pushes the last out
        for k in range(3):
            tilegrad.compile(_model(np.full((4, 4), k, np.float32)).SerializeToString())
    assert len(list((tmp_path / "cache" / "compiled").iterdir())) <= 1


def test_off_by_configuration_and_for_other_targets(compiles, tmp_path):
    model = _model(RNG.standard_normal((4, 4)).astype("float32"))
    with config.override(module_cache=False):
        tilegrad.compile(model)
        tilegrad.compile(model)
    assert len(compiles) == 2 and not (tmp_path / "cache" / "compiled").exists()
    options = tilegrad.CompileOptions(target="cuda")
    assert module_cache.module_key(model, model, None, options) is None


def test_an_unchanged_file_is_loaded_unread_and_its_weights_stay_mapped(compiles, tmp_path, monkeypatch):
    """Compiling an unchanged model file again neither reads nor parses it (its digest is remembered with the
    identity of it and of its external data), and the kept module's stored weights are views of its weights
    file, not copies; a rewrite of the same size with the modification time set back still changes the change time, and
    is compiled."""
    import os

    from tilegrad import mapped

    w = RNG.standard_normal((4, 4)).astype("float32")
    path = tmp_path / "model.onnx"
    onnx.save(_model(w), path, save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    tilegrad.compile(path)

    def unread(*args, **kwargs):
        raise AssertionError("the model was read again")

    with monkeypatch.context() as patched:
        patched.setattr(api, "onnx_proto", unread)
        again = tilegrad.compile(path)
    x = RNG.standard_normal((2, 4)).astype("float32")
    np.testing.assert_allclose(again(x), np.maximum(x @ w, 0), rtol=1e-5)
    assert len(compiles) == 1
    assert any(mapped._mapping(a) is not None for a in [*again._weights, *again._sources])  # (a packed weight's
    # source: the packing runs at load)

    data = tmp_path / "model.onnx.data"
    before = data.stat()
    data.write_bytes((2 * w).tobytes())  # same size
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    changed = tilegrad.compile(path)
    assert len(compiles) == 2
    np.testing.assert_allclose(changed(x), np.maximum(x @ (2 * w), 0), rtol=1e-5)
