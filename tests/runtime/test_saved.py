"""A saved module directory: saving replaces it whole by a rename (a process running the old module is
unaffected), and loading refuses an edited manifest, truncated files and foreign content with clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tilegrad
from tilegrad import config
from tilegrad.errors import ModuleFormatError
from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder

SRC = Path(__file__).resolve().parents[2] / "src"
X = np.arange(12, dtype="float32").reshape(3, 4) / 10
pytestmark = pytest.mark.usefixtures("cache_dir")  # the cache beside the saved module, in tmp_path


def _module(scale: float):
    """x -> exp(x) * scale: modules of other scales have other libraries."""
    b = GraphBuilder()
    x = b.input("x", (3, 4))
    return compile_graph(b.build(b.op("mul", b.op("exp", x), b.const(np.float32(scale), "scale"))))


@pytest.fixture
def saved(tmp_path):
    return _module(2.0).save(tmp_path / "m")


def test_a_saved_module_loads_and_gives_the_same_outputs(saved):
    np.testing.assert_allclose(tilegrad.load(saved)(X), np.exp(X) * 2, rtol=1e-6)
    assert sorted(p.name for p in saved.parent.iterdir()) == ["cache", "m"]  # no temporary directory left behind


def test_saving_over_a_module_a_running_process_uses_leaves_that_process_running(saved, tmp_path, cache_dir):
    """The process keeps calling the old module while the directory is replaced three times, then loads the new
    one from the same path (a subprocess, since a regression here is a segfault)."""
    stop = tmp_path / "stop"
    child = f"""
import sys, numpy as np, tilegrad
from pathlib import Path
x = np.arange(12, dtype="float32").reshape(3, 4) / 10
m = tilegrad.load({str(saved)!r})
print("ready", flush=True)
calls = 0
while not Path({str(stop)!r}).exists():
    assert np.allclose(m(x), np.exp(x) * 2, rtol=1e-6), "the old module changed under its caller"
    calls += 1
assert np.allclose(tilegrad.load({str(saved)!r})(x), np.exp(x) * 3, rtol=1e-6), "a fresh load is the new module"
assert np.allclose(m(x), np.exp(x) * 2, rtol=1e-6), "the old module still runs beside the new one"
print("calls", calls, flush=True)
"""
    env = {**os.environ, "PYTHONPATH": str(SRC), "TILEGRAD_CACHE_DIR": str(cache_dir)}
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        replacement = _module(3.0)
        for _ in range(3):
            replacement.save(saved)
            time.sleep(0.05)
        stop.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, f"exit {proc.returncode}: {err}"
    assert out.startswith("calls ")


def test_an_edited_manifest_is_refused(saved):
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["spec"]["outputs"][0]["shape"] = [1, 4]
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModuleFormatError, match=r"manifest.json does not match its own checksum \(edited\?\)"):
        tilegrad.load(saved)


@pytest.mark.parametrize("name", ["weights.bin", "model.so"])
def test_truncated_files_are_refused(saved, name):
    path = saved / name
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ModuleFormatError, match=rf"{name} does not match its checksum .*truncated or altered"):
        tilegrad.load(saved)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"format": 1}', "saved in format 1; this version reads format 3"),
])
def test_foreign_manifests_are_refused(saved, text, message):
    (saved / "manifest.json").write_text(text)
    with pytest.raises(ModuleFormatError, match=message):
        tilegrad.load(saved)


def test_a_missing_file_is_named(saved):
    (saved / "weights.bin").unlink()
    with pytest.raises(ModuleFormatError, match="weights.bin is missing"):
        tilegrad.load(saved)


def test_saving_never_deletes_other_files(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ModuleFormatError, match=r"holds other files \(notes.txt\), which saving would delete"):
        _module(2.0).save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"
    (tmp_path / "file").write_text("")
    with pytest.raises(ModuleFormatError, match="exists and is not a directory"):
        _module(2.0).save(tmp_path / "file")


def _conv_net(rng) -> bytes:
    """Four 3x3 convolutions of 96 channels (Winograd's, whose laid-out weights are 16/9 to 4 times larger): 1.3 MB
    of weights, enough that the library's size does not decide the ratio."""
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, prev = [], [], "x"
    for i in range(4):
        w = (rng.standard_normal((96, 96 if i else 8, 3, 3)) * 0.05).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes += [helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 28, 28])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_a_saved_module_is_at_most_1_2_times_the_weights_and_recomputes_laid_out_ones(tmp_path):
    rng = np.random.default_rng(0)
    model = _conv_net(rng)
    with config.override(sanitize=None):  # an ordinary library (benchmarks/asan_check.py runs this test too)
        m = tilegrad.compile(model)
    assert m.spec.derived, "expected Winograd weights, computed on load from the convolutions' weights"
    directory = m.save(tmp_path / "m")
    initializer_bytes = 4 * 96 * 9 * (8 + 3 * 96)
    saved_bytes = sum(p.stat().st_size for p in directory.iterdir())
    assert saved_bytes <= 1.2 * initializer_bytes, (saved_bytes, initializer_bytes)
    x = rng.standard_normal((1, 8, 28, 28)).astype(np.float32)
    loaded = tilegrad.load(directory)
    np.testing.assert_array_equal(loaded(x), m(x))
    assert all(np.array_equal(a, b) for a, b in zip(loaded._weights, m._weights))


@pytest.mark.parametrize("derived, message", [
    ("x", "'derived' is not a list"),
    ([{"weight": 5, "source": {"name": "w", "shape": [2], "dtype": "float32"}, "kernel": "d0"}], "names no weight"),
    ([{"weight": 0, "kernel": "d0"}], "no field 'source'"),
])
def test_a_spec_with_bad_derived_weights_is_refused(derived, message):
    from tilegrad.runtime.module import ModuleSpec

    spec = {"inputs": [], "outputs": [], "weights": [{"name": "u", "shape": [4], "dtype": "float32"}],
            "workspace_bytes": 0, "unshared_bytes": 0, "derived": derived}
    with pytest.raises(ModuleFormatError, match=message):
        ModuleSpec.from_json(spec)


def test_loads_racing_saves_of_the_same_directory_read_one_whole_version(saved):
    """A thread saves two modules over the directory in turn while loads run: each load is one version, whole
    (its manifest, library and weights from one save), never a transient ModuleFormatError."""
    import threading

    versions = [_module(2.0), _module(3.0)]
    stop = threading.Event()

    def save_in_turn():
        k = 0
        while not stop.is_set():
            versions[k % 2].save(saved)
            k += 1

    saver = threading.Thread(target=save_in_turn)
    saver.start()
    try:
        scales = set()
        for _ in range(60):
            y = tilegrad.load(saved)(X)
            scale = float(np.round(y[0, 0] / np.exp(X[0, 0])))
            np.testing.assert_allclose(y, np.exp(X) * scale, rtol=1e-6)
            scales.add(scale)
    finally:
        stop.set()
        saver.join()
    assert scales <= {2.0, 3.0}


def test_a_saved_module_loads_and_runs_without_a_c_compiler(tmp_path):
    """A serving machine need not have the compiler: the library carries its own call entry (`tg_call`) and
    computes its derived weights (a Winograd convolution's) itself."""
    import torch

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 16, 3, padding=1).eval()
    x = torch.randn(1, 16, 12, 12)
    saved = tilegrad.compile(conv, (x,)).save(tmp_path / "conv")
    assert tilegrad.load(saved).spec.derived  # the case that derives weights at load
    with config.override(cc="no-such-compiler"):
        module = tilegrad.load(saved)
        np.testing.assert_allclose(module(x.numpy()), conv(x).detach().numpy(), rtol=1e-4, atol=1e-4)


SAVE_PEAK = """
import resource, sys
from pathlib import Path
import numpy as np
from tilegrad.runtime import saved
weights = [np.ones((32, 2**20), np.float32)]  # 128 MiB, touched
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
(Path(sys.argv[1]) / "lib.so").write_bytes(b"library")
saved.write(Path(sys.argv[1]) / "m", Path(sys.argv[1]) / "lib.so", {}, weights)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 / weights[0].nbytes)
"""


def test_saving_holds_the_weights_once_not_again_as_the_file_it_checksums(tmp_path):
    """The checksum reads the written file mapped; its pages go as each chunk is hashed, so a save (every compile
    saves into the module cache) does not hold a large model's weights twice."""
    growth = subprocess.run([sys.executable, "-c", SAVE_PEAK, str(tmp_path)], capture_output=True, text=True,
                            check=True, env={**os.environ, "PYTHONPATH": str(SRC)}).stdout
    assert float(growth) < 0.5, f"peak memory grew by {float(growth):.2f}x the weights while saving"
