"""`compile(dynamic=, specialize=)`: named values run modules specialised to them, every other value the dynamic
module, all compiled up front; wrong names and values are refused with the reason."""

import numpy as np
import onnxruntime as ort
import pytest

import tilegrad
from tilegrad import metrics
from tilegrad.errors import KernelCallError, TilegradError

from .models import pooled_rows


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    path = tmp_path_factory.mktemp("fast_paths") / "pooled.onnx"
    path.write_bytes(pooled_rows().SerializeToString())
    return path, ort.InferenceSession(str(path))


def test_named_values_run_their_specialised_modules_and_others_the_dynamic_one(pooled):
    path, session = pooled
    module = tilegrad.compile(path, dynamic={"rows": (1, 64)}, specialize={"rows": [16, 48]})
    assert set(module.paths) == {(16,), (48,)}
    assert all(not m.spec.dims for m in module.paths.values()) and module.dynamic.spec.dims
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    for n in (1, 16, 17, 48, 64):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        want = module.paths[(n,)] if (n,) in module.paths else module.dynamic
        assert module.module_for(x) is want and module.module_for(x=x) is want
        for got, expected in zip(module(x), session.run(None, {"x": x})):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"rows={n}")
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built  # nothing compiled
    assert module.profile(np.zeros((16, 8), np.float32), repeats=1, warmup=0).sites
    with pytest.raises(KernelCallError, match=r"'rows' is 65, outside the bounds"):
        module(np.zeros((65, 8), np.float32))


@pytest.mark.parametrize("dynamic, specialize, match", [
    ({"rows": (1, 64)}, {"cols": [4]}, "'cols', which dynamic= does not give bounds"),
    ({"rows": 8}, {"rows": [8]}, "'rows', which dynamic= does not give bounds"),
    ({"rows": (1, 64)}, {"rows": [65]}, "within its bounds 1 to 64"),
    ({"rows": (1, 64)}, {"rows": 16}, "expected a list of sizes"),
    ({"rows": (1, 64)}, {"rows": []}, "expected a list of sizes"),
])
def test_specialize_refuses_what_is_not_a_value_of_a_dynamic_dimension(pooled, dynamic, specialize, match):
    with pytest.raises(TilegradError, match=match):
        tilegrad.compile(pooled[0], dynamic=dynamic, specialize=specialize)


def test_a_target_that_compiles_fixed_shapes_refuses_dynamic(pooled):
    with pytest.raises(TilegradError, match="not available for the cuda target"):
        tilegrad.compile(pooled[0], dynamic={"rows": (1, 64)}, target="cuda")


def test_saved_with_its_fast_paths_and_loaded_without_compiling(pooled, tmp_path):
    path, session = pooled
    module = tilegrad.compile(path, dynamic={"rows": (1, 64)}, specialize={"rows": [16, 48]})
    module.save(tmp_path / "saved")
    built = metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"]
    back = tilegrad.load(tmp_path / "saved")
    assert set(back.paths) == {(16,), (48,)} and back.keys == module.keys
    assert metrics.counters["build.compiled"] + metrics.counters["build.cache_hit"] == built
    for n in (3, 16, 48):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        assert back.module_for(x) is (back.paths[(n,)] if n in (16, 48) else back.dynamic)
        np.testing.assert_allclose(back(x)[0], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    (tmp_path / "saved" / "fast_paths.json").write_text('{"format": 1, "keys": ["nope"], "paths": []}')
    with pytest.raises(TilegradError, match="names dimensions .'nope'. that the dynamic module"):
        tilegrad.load(tmp_path / "saved")


def test_the_shell_compiles_fast_paths_and_runs_them(pooled, tmp_path, capsys):
    from tilegrad.cli import main

    path, session = pooled
    out = tmp_path / "module"
    assert main(["compile", str(path), "-o", str(out), "--dynamic", "rows=1:64", "--specialize", "rows=16,48"]) == 0
    assert "fast paths rows=16; rows=48" in capsys.readouterr().out
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "y.npz")]) == 0
    got = np.load(tmp_path / "y.npz")
    np.testing.assert_allclose(got[got.files[0]], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert main(["compile", str(path), "-o", str(tmp_path / "other"), "--specialize", "rows=16"]) == 2
    assert "give --dynamic too" in capsys.readouterr().err
