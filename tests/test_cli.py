"""The `tilegrad` command in-process (`main([...])`): every subcommand's report, and the user errors that must be
one line on stderr with exit status 2, never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tilegrad.cli import main
from tilegrad.errors import UnsupportedOpError
from tilegrad.passes import pass_names
from tilegrad.passes.pipeline import PIPELINE

RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)  # conv: 3 -> 4 channels, 3x3, pads 1
B = RNG.standard_normal(4).astype(np.float32)
M = RNG.standard_normal((256, 10)).astype(np.float32)  # matmul on the flattened (1, 4 * 8 * 8) features


def _save(tmp_path, nodes, inputs, outputs, initializers=(), name="model.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    path = tmp_path / name
    onnx.save(model, path)
    return str(path)


@pytest.fixture
def convnet(tmp_path):
    """x (N, 3, 8, 8) -> Conv(pads 1) -> Relu -> Reshape(N, 256) -> MatMul -> y (N, 10); N symbolic."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv_0", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu_0"),
             helper.make_node("Reshape", ["r", "shape"], ["f"], name="flatten_0"),
             helper.make_node("MatMul", ["f", "m"], ["y"], name="y")]  # graph outputs take their node's name
    inits = [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b"), numpy_helper.from_array(M, "m"),
             numpy_helper.from_array(np.array([-1, 256], np.int64), "shape")]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)


def _convnet_reference(x):
    n = x.shape[0]
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # (n, 3, 8, 8, 3, 3)
    c = np.einsum("nchwij,ocij->nohw", windows, W) + B[:, None, None]
    return np.maximum(c, 0).reshape(n, 256) @ M


@pytest.fixture
def adder(tmp_path):
    """z = x + y, both (2, 3) float32: two inputs, static shapes."""
    nodes = [helper.make_node("Add", ["x", "y"], ["z"], name="z")]  # (see convnet)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("x", "y")]
    return _save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])


@pytest.fixture
def unsupported(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_0"),
             helper.make_node("FrobnicateTensor", ["r"], ["y"], name="weird_0")]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])


def _npy(tmp_path, name, array):
    path = tmp_path / name
    np.save(path, array)
    return str(path)


def _user_error(capsys, argv, *fragments):
    """Run argv, expect exit 2 and one `tilegrad: error:` line on stderr containing every fragment."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tilegrad: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


def test_help_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "tilegrad", "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    for command in ("compile", "run", "bench", "info"):
        assert command in done.stdout


def test_compile_saves_into_a_new_directory_then_run_writes_npz(convnet, tmp_path, capsys):
    out = tmp_path / "not" / "yet" / "there"
    assert main(["compile", convnet, "-o", str(out), "--input-shape", "x=2,3,8,8"]) == 0
    report = capsys.readouterr().out
    assert (out / "manifest.json").is_file()
    assert "inputs     1: x float32[2, 3, 8, 8]" in report and "outputs    1: y float32[2, 10]" in report
    assert "weights    3" in report and "workspace" in report and "without reuse" in report

    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    result = tmp_path / "results" / "y.npz"
    assert main(["run", str(out), "--input", "x=" + _npy(tmp_path, "x.npy", x), "-o", str(result)]) == 0
    assert "wrote 1 output(s)" in capsys.readouterr().out
    with np.load(result) as saved:
        assert list(saved) == ["y"]
        np.testing.assert_allclose(saved["y"], _convnet_reference(x), rtol=1e-4, atol=1e-4)


def test_run_compiles_an_onnx_file_and_prints_statistics(adder, tmp_path, capsys):
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    argv = ["run", adder, "--input", "x=" + _npy(tmp_path, "x.npy", x), "--input", "y=" + _npy(tmp_path, "y.npy", y)]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == "z: float32[2, 3]  min 3  max 3  mean 3  std 0"


def test_run_takes_an_unnamed_input_for_a_one_input_model(convnet, tmp_path, capsys):
    x = np.zeros((1, 3, 8, 8), np.float32)
    assert main(["run", convnet, "--input-shape", "x=1,3,8,8", "--input", _npy(tmp_path, "x.npy", x)]) == 0
    assert capsys.readouterr().out.startswith("y: float32[1, 10]")


@pytest.mark.parametrize("case", ["missing file", "unknown name", "wrong shape", "wrong dtype", "missing input",
                                  "unnamed", "not npy"])
def test_run_input_errors_name_the_input(adder, tmp_path, capsys, case):
    good = _npy(tmp_path, "good.npy", np.zeros((2, 3), np.float32))
    given, fragments = {
        "missing file": (["x=" + str(tmp_path / "nope.npy"), "y=" + good], ["input 'x'", "no file at", "nope.npy"]),
        "unknown name": (["x=" + good, "w=" + good], ["no input 'w'", "its inputs are x, y"]),
        "wrong shape": (["x=" + _npy(tmp_path, "b.npy", np.zeros((3, 2), np.float32)), "y=" + good],
                        ["input 'x'", "expected float32[2, 3], got float32[3, 2]"]),
        "wrong dtype": (["x=" + good, "y=" + _npy(tmp_path, "d.npy", np.zeros((2, 3)))],
                        ["input 'y'", "expected float32[2, 3], got float64[2, 3]"]),
        "missing input": (["x=" + good], ["missing input(s): y float32[2, 3]"]),
        "unnamed": ([good], ["has no name", "NAME=FILE.npy"]),
        "not npy": (["x=" + good, "y=" + _save(tmp_path, [], [], [], name="y.onnx")], ["input 'y'", "not a readable"]),
    }[case]
    _user_error(capsys, ["run", adder, *[a for g in given for a in ("--input", g)]], *fragments)


def test_unsupported_op_names_the_op_and_the_node(unsupported, tmp_path, capsys):
    _user_error(capsys, ["compile", unsupported, "-o", str(tmp_path / "out")], "FrobnicateTensor", "weird_0")
    assert not (tmp_path / "out").exists()
    with pytest.raises(UnsupportedOpError):
        main(["--debug", "compile", unsupported, "-o", str(tmp_path / "out")])


def test_malformed_and_missing_models_are_user_errors(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07 this is not a protobuf \xff\xff")
    for command in (["compile", str(bad), "-o", str(tmp_path / "o")], ["info", str(bad)], ["bench", str(bad)],
                    ["run", str(bad)]):
        _user_error(capsys, command, "bad.onnx", "not")
    _user_error(capsys, ["compile", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o")], "no ONNX file at",
                "missing.onnx")
    for command in ("run", "profile", "bench", "info"):  # these take a saved module directory too, and say so
        _user_error(capsys, [command, str(tmp_path / "out" / "missing")], "no ONNX file or saved module directory")
    _user_error(capsys, ["run", str(tmp_path), "--input-shape", "x=1"], "--input-shape applies only")
    _user_error(capsys, ["run", str(tmp_path)], "not a complete tilegrad module")


def test_symbolic_dimensions_need_an_input_shape_to_bench_or_explain(convnet, tmp_path, capsys):
    _user_error(capsys, ["bench", convnet], "input x float32[N, 3, 8, 8] has symbolic dimensions",
                "--input-shape x=<N>,3,8,8")
    _user_error(capsys, ["compile", convnet, "-o", str(tmp_path / "o"), "--explain"], "--explain reports one",
                "x float32[N, 3, 8, 8]")
    _user_error(capsys, ["compile", convnet, "-o", str(tmp_path / "o"), "--input-shape", "x=1,three"],
                "x=1,three", "positive integer")
    _user_error(capsys, ["info", convnet, "--input-shape", "z=1"], "names 'z'", "its inputs are x")
    assert main(["compile"]) == 2 and "required" in capsys.readouterr().err  # argparse's own usage error


def test_compile_without_input_shapes_saves_a_module_that_specialises_when_run(convnet, tmp_path, capsys):
    out = tmp_path / "dynamic"
    assert main(["compile", convnet, "-o", str(out)]) == 0
    report = capsys.readouterr().out
    assert "compiles its first call's shapes" in report and "inputs     x float32[N, 3, 8, 8]" in report
    for n in (1, 3):
        x = RNG.standard_normal((n, 3, 8, 8)).astype(np.float32)
        result = tmp_path / f"y{n}.npz"
        assert main(["run", str(out), "--input", "x=" + _npy(tmp_path, f"x{n}.npy", x), "-o", str(result)]) == 0
        with np.load(result) as saved:
            np.testing.assert_allclose(saved["y"], _convnet_reference(x), rtol=1e-4, atol=1e-4)
    capsys.readouterr()
    bad = _npy(tmp_path, "bad.npy", np.zeros((2, 4, 8, 8), np.float32))
    _user_error(capsys, ["run", str(out), "--input", "x=" + bad], "expected float32[N, 3, 8, 8], got float32[2, 4, 8, 8]")


def test_a_value_input_is_shown_by_info_and_run_by_run(tmp_path, capsys):
    nodes = [helper.make_node("Tile", ["x", "repeats"], ["y"], name="tile_0")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
              helper.make_tensor_value_info("repeats", TensorProto.INT64, [2])]
    path = _save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                 name="tile.onnx")
    assert main(["info", path]) == 0
    assert "value inputs (each distinct value compiles once): repeats int64[2] (value input) reaches Tile " \
           "(node 'tile_0') input 1" in capsys.readouterr().out
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    argv = ["run", path, "--input", "x=" + _npy(tmp_path, "x.npy", x),
            "--input", "repeats=" + _npy(tmp_path, "r.npy", np.array([2, 1], np.int64)), "-o", str(tmp_path / "y.npz")]
    assert main(argv) == 0
    with np.load(tmp_path / "y.npz") as saved:
        np.testing.assert_array_equal(saved["y"], np.tile(x, (2, 1)))


def test_info_reports_types_ops_and_flops(convnet, capsys):
    assert main(["info", convnet, "--input-shape", "x=1,3,8,8"]) == 0
    out = capsys.readouterr().out
    assert "opset 17, 4 nodes" in out and "inputs:  x float32[1, 3, 8, 8]" in out
    assert "ops:     Conv 1, Relu 1, Reshape 1, MatMul 1" in out and "unsupported: none" in out
    conv, relu, matmul = 2 * (4 * 8 * 8) * (3 * 3 * 3), 4 * 8 * 8, 2 * 10 * 256
    assert f"FLOPs:   {conv + relu + matmul:,} " in out


def test_info_without_shapes_shows_declared_types_and_why_flops_are_missing(convnet, capsys):
    assert main(["info", convnet]) == 0
    out = capsys.readouterr().out
    assert "inputs:  x float32[N, 3, 8, 8]" in out and "outputs: y float32[N, 10]" in out
    assert "FLOPs:   unavailable" in out and "--input-shape x=<N>,3,8,8" in out


def test_info_lists_unsupported_ops_instead_of_failing(unsupported, capsys):
    assert main(["info", unsupported]) == 0
    out = capsys.readouterr().out
    assert "unsupported: 1 node(s)" in out and "FrobnicateTensor: node 'weird_0'" in out


def test_bench_against_peers(adder, capsys, monkeypatch):
    assert main(["bench", adder, "--against", "onnxruntime,torch", "--repeats", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[2:]}
    assert rows["tilegrad"].endswith("1.00x") and rows["onnxruntime"].endswith("x")
    assert "skipped" in rows["torch"]

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if it were not installed
    assert main(["bench", adder, "--against", "onnxruntime", "--repeats", "1"]) == 0
    assert "unavailable: onnxruntime is not installed" in capsys.readouterr().out
    _user_error(capsys, ["bench", adder, "--against", "tvm"], "unknown runtime(s) tvm")


# ---- --explain, --opt-level, --disable-pass ----

PASS_LINE = re.compile(r"^  (\w+): \d+ -> \d+ nodes")  # a pass's line in the --explain report


@pytest.fixture
def normalized(tmp_path):
    """x (4, 16) -> LayerNormalization -> MatMul -> Softmax -> y (4, 8): two composites for the expand pass."""
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["l"], name="ln_0"),
             helper.make_node("MatMul", ["l", "m"], ["h"], name="mm_0"),
             helper.make_node("Softmax", ["h"], ["y"], name="y")]
    inits = [numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("s", (16,)), ("b", (16,)), ("m", (16, 8)))]
    return _save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits)


def _explained_passes(out: str) -> list[str]:
    return [m.group(1) for m in map(PASS_LINE.match, out.splitlines()) if m]


def test_explain_with_the_stitch_strategy_lists_the_plans_their_scores_and_the_refusals(normalized, tmp_path,
                                                                                        capsys):
    assert main(["compile", normalized, "-o", str(tmp_path / "out"), "--fusion", "stitch", "--explain"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"plan 1( \(chosen\))?: score [-\d.]+us, model latency [\d.]+us", out) and "(chosen)" in out
    assert "(block composition, sub-roots" in out and "f=+" in out
    assert re.search(r"refused at '[^']+': \S+: .+", out)


def test_explain_prints_each_pass_the_kernels_and_the_intermediates(normalized, tmp_path, capsys):
    assert main(["compile", normalized, "-o", str(tmp_path / "out"), "--explain"]) == 0
    out = capsys.readouterr().out
    ran = [p.name for p in PIPELINE if p.level <= 2]
    assert out.startswith("passes (opt-level 2):\n") and _explained_passes(out) == ran
    expand_line = next(line for line in out.splitlines() if line.startswith("  expand: "))
    assert "layer_norm -1" in expand_line and "softmax -1" in expand_line
    assert "    expanded layer_norm x1, softmax x1" in out
    assert re.search(r"^kernels: \d+$", out, re.M)
    assert re.search(r"^intermediates: \d.* planned with reuse \(\d.* without\)$", out, re.M)
    assert "compiled " in out  # the command's own report follows


def test_opt_level_0_runs_no_pass_and_makes_one_kernel_per_op(normalized, tmp_path, capsys):
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    assert main(["run", normalized, "--input", _npy(tmp_path, "x.npy", x), "--explain", "--opt-level", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("passes (opt-level 0): none\nkernels: 3\nintermediates: ")
    assert _explained_passes(out) == []
    assert "y: float32[4, 8]" in out


def test_disable_pass_skips_it_and_is_repeatable(normalized, capsys):
    everything = [a for name in pass_names() for a in ("--disable-pass", name)]
    assert main(["bench", normalized, "--repeats", "1", "--explain", *everything]) == 0
    out = capsys.readouterr().out
    assert out.startswith("passes (opt-level 2): none\nkernels: 3\n") and "tilegrad" in out
    assert main(["bench", normalized, "--repeats", "1", "--explain", "--disable-pass", "expand"]) == 0
    assert "expand" not in _explained_passes(capsys.readouterr().out)


def test_unknown_pass_or_pass_flags_on_a_compiled_module_are_user_errors(normalized, tmp_path, capsys):
    _user_error(capsys, ["compile", normalized, "-o", str(tmp_path / "o"), "--disable-pass", "fold_everything"],
                "--disable-pass 'fold_everything'", "no such pass", "expand")
    assert not (tmp_path / "o").exists()
    _user_error(capsys, ["run", str(tmp_path), "--explain"], "--explain, --opt-level and --disable-pass apply only")
    assert main(["compile", normalized, "-o", str(tmp_path / "o"), "--opt-level", "4"]) == 2
    assert "invalid choice" in capsys.readouterr().err  # argparse's own usage error


def test_info_lists_what_compile_would_refuse_besides_unsupported_ops(tmp_path, capsys):
    nodes = [helper.make_node("LpNormalization", ["x"], ["g"], name="lp_0", p=3),
             helper.make_node("Mod", ["seven", "three"], ["m"], name="const_mod", fmod=1),
             helper.make_node("Add", ["g", "m"], ["y"], name="y")]
    inits = [numpy_helper.from_array(np.array(7.0, np.float32), "seven"),
             numpy_helper.from_array(np.array(3.0, np.float32), "three")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], inits)
    path = tmp_path / "gelu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10), path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "unsupported: none" in out and "problems: 1" in out and "'lp_0'" in out and "p=3" in out
    assert "FLOPs:   unavailable" in out and "const_mod" not in out  # a constant Mod folds
    _user_error(capsys, ["compile", str(path), "-o", str(tmp_path / "o")], "lp_0", "p=3")


def test_info_names_the_symbolic_dimensions(convnet, capsys):
    assert main(["info", convnet]) == 0
    out = capsys.readouterr().out
    assert "symbolic: input x float32[N, 3, 8, 8] has symbolic dimensions (0: N)" in out


def _external(directory):
    directory.mkdir()
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "m"], ["y"], name="y")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                              [numpy_helper.from_array(M, "m")])
    path = directory / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10), path,
              save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    return path


def test_external_data_loads_from_any_working_directory(tmp_path, capsys, monkeypatch):
    path = _external(tmp_path / "models")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["info", str(path)]) == 0
    assert "2,560 parameters" in capsys.readouterr().out
    assert main(["compile", str(path), "-o", "out"]) == 0
    x = RNG.standard_normal((1, 256)).astype(np.float32)
    assert main(["run", "out", "--input", _npy(tmp_path, "x.npy", x), "-o", "y.npz"]) == 0
    np.testing.assert_allclose(np.load("y.npz")["y"], x @ M, rtol=1e-4, atol=1e-5)


def test_hostile_models_are_one_line_errors(tmp_path, capsys):
    path = _external(tmp_path / "models")
    model = onnx.load(path, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../model.onnx.data"
    (tmp_path / "model.onnx.data").write_bytes((tmp_path / "models" / "model.onnx.data").read_bytes())
    path.write_bytes(model.SerializeToString())
    _user_error(capsys, ["info", str(path)], "'m'", "outside the model's directory")
    _user_error(capsys, ["compile", str(path), "-o", str(tmp_path / "o")], "'m'", "outside the model's directory")
    bad = _save(tmp_path, [helper.make_node("Softmax", ["x"], ["y"], name="sm", axis="one")],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], name="bad.onnx")
    _user_error(capsys, ["compile", bad, "-o", str(tmp_path / "o")], "Softmax", "'sm'", "attribute 'axis'")


def test_an_internal_error_is_one_line_with_status_1(convnet, capsys, monkeypatch):
    import tilegrad.frontend.onnx as frontend

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(frontend, "read_onnx", broken)
    assert main(["info", convnet, "--input-shape", "x=1,3,8,8"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tilegrad: internal error: ValueError: boom") and "Traceback" not in err
    with pytest.raises(ValueError):
        main(["--debug", "info", convnet, "--input-shape", "x=1,3,8,8"])


@pytest.fixture
def fake_peaks(tmp_path, monkeypatch):
    """Peaks cached in a fresh directory and measured as fixed figures, so no test waits for a measurement."""
    from tilegrad import config
    from tilegrad.machine import MachinePeaks
    from tilegrad.runtime import peaks

    measured = []
    figures = MachinePeaks("Test CPU", "avx2+fma", 2, 123.4, 5.6, 3.1, 1.0, "2026-01-01T00:00:00+00:00", "by hand")
    monkeypatch.setattr(peaks, "_measure", lambda threads, duration_s, cfg: measured.append(threads) or figures)
    with config.override(cache_dir=tmp_path / "cache"):
        yield measured


@pytest.mark.measures_peaks  # fakes the measurement itself, and reads what it cached
def test_info_machine_measures_once_then_reads_the_cache(fake_peaks, capsys):
    assert main(["info", "--machine"]) == 0
    out = capsys.readouterr().out
    for fragment in ("machine:   Test CPU", "isa        avx2+fma", "threads    2", "FMA peak   123.4 GFLOP/s",
                     "bandwidth  5.6 GB/s", "clock      3.10 GHz measured; 1.00 vector FMAs per cycle",
                     "measured   2026-01-01T00:00:00+00:00: by hand", "peaks-", "(measured now)"):
        assert fragment in out, out
    assert main(["info", "--machine"]) == 0
    assert "cached; --remeasure measures again" in capsys.readouterr().out
    assert main(["info", "--remeasure"]) == 0
    assert "(measured now)" in capsys.readouterr().out
    assert len(fake_peaks) == 2


def test_info_machine_with_a_model_describes_both(fake_peaks, convnet, capsys):
    assert main(["info", "--machine", convnet, "--input-shape", "x=2,3,8,8"]) == 0
    out = capsys.readouterr().out
    assert "FMA peak   123.4 GFLOP/s" in out and "FLOPs:" in out


def test_info_without_a_model_or_machine_is_a_usage_error(capsys):
    _user_error(capsys, ["info"], "info needs a model", "--machine")


def test_profile_prints_the_table_of_kernels(fake_peaks, convnet, capsys):
    assert main(["profile", convnet, "--input-shape", "x=2,3,8,8", "--opt-level", "0", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{convnet}: x float32[2, 3, 8, 8]; 3 kernels; median of 3 runs")
    for fragment in ("Test CPU, avx2+fma, 2 threads; FMA peak 123.4 GFLOP/s", "un-instrumented", "conv[2x4x8x8 r27]",
                     "relu[2x4x8x8]", "matmul[2x10 r256]", "kernel label", "GFLOP/s", "%peak", "%bw"):
        assert fragment in out, out
    assert main(["profile", convnet, "--input-shape", "x=2,3,8,8", "--opt-level", "0", "--top", "1"]) == 0
    assert "(2 more kernels" in capsys.readouterr().out


def test_profile_json_parses(fake_peaks, convnet, capsys):
    import json

    assert main(["profile", convnet, "--input-shape", "x=2,3,8,8", "--opt-level", "0", "--repeats", "3",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [k["label"] for k in data["kernels"]] == ["conv[2x4x8x8 r27]", "relu[2x4x8x8]", "matmul[2x10 r256]"]
    assert data["machine"]["fma_gflops"] == 123.4 and data["repeats"] == 3
    between = (data["profiled_s"] - data["kernels_s"]) / data["profiled_s"]  # the shares add up to the run
    assert between >= 0 and sum(k["share"] for k in data["kernels"]) + between == pytest.approx(1.0)
    assert all(k["seconds"] > 0 for k in data["kernels"])


def test_profile_a_saved_module(fake_peaks, convnet, tmp_path, capsys):
    out = tmp_path / "module"
    assert main(["compile", convnet, "-o", str(out), "--input-shape", "x=2,3,8,8"]) == 0
    capsys.readouterr()
    assert main(["profile", str(out), "--repeats", "3"]) == 0
    assert "blocked_conv+relu[2x4x8x8 r27]" in capsys.readouterr().out
    _user_error(capsys, ["profile", str(out), "--opt-level", "0"], "apply only when compiling")


def test_profile_refuses_what_it_cannot_profile(fake_peaks, convnet, tmp_path, capsys):
    _user_error(capsys, ["profile", convnet], "symbolic dimensions", "--input-shape x=<N>,3,8,8")
    _user_error(capsys, ["profile", convnet, "--input-shape", "x=2,3,8,8", "--repeats", "0"], "--repeats")
    dynamic = tmp_path / "dynamic"
    assert main(["compile", convnet, "-o", str(dynamic)]) == 0
    capsys.readouterr()
    _user_error(capsys, ["profile", str(dynamic)], "compiles per call", "--input-shape")


def test_compile_for_cuda_writes_the_source_and_ptx_without_a_gpu(convnet, tmp_path, capsys):
    out = tmp_path / "cuda"
    assert main(["compile", convnet, "--target", "cuda", "-o", str(out), "--input-shape", "x=2,3,8,8"]) == 0
    report = capsys.readouterr().out
    source, ptx = (out / "kernels.cu").read_text(), (out / "kernels.ptx").read_text()
    kernels = source.count('extern "C" __global__')
    assert kernels >= 2 and ptx.count(".entry ") == kernels
    assert f"{kernels} kernels" in report and "__shared__" in source  # the conv and matmul tile in shared memory


def test_bench_interleaves_the_contenders_and_reports_their_spread(monkeypatch):
    from tilegrad.cli import bench

    monkeypatch.setattr(bench, "PAUSE_S", 0.0)
    order = []

    def contender(name, seconds):
        def run(specs):
            order.append(name)
            return seconds.pop(0), ""
        return run

    times = bench._rounds({"a": contender("a", [1.0, 1.0, 1.0]), "b": contender("b", [2.0, 4.0, 2.0]),
                           "c": lambda specs: (None, "skipped: why")}, [], rounds=3)
    assert order == ["a", "b", "b", "a", "a", "b"]  # each round starts one contender later; c failed at once
    assert times["a"] == ([1.0, 1.0, 1.0], "") and times["c"] == ([], "skipped: why")
    assert bench.spread(times["a"][0]) == 0.0 and bench.spread(times["b"][0]) == pytest.approx(0.8)
    assert bench.spread([3.0]) == 0.0


def test_bench_warns_on_stderr_when_the_rounds_spread(adder, capsys, monkeypatch):
    from tilegrad.cli import bench

    monkeypatch.setattr(bench, "spread", lambda seconds: 0.5)  # as a busy machine makes them
    assert main(["bench", adder, "--repeats", "2"]) == 0
    captured = capsys.readouterr()
    assert "warning: the rounds of tilegrad spread by more than 10%" in captured.err
    assert "warning" not in captured.out and "50.0%" in captured.out


def test_bench_and_info_take_a_saved_module_directory(adder, tmp_path, capsys):
    assert main(["compile", adder, "-o", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert main(["info", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "a saved module" in out and "inputs:" in out and "weights:" in out and "GFLOP per call" in out
    assert main(["bench", str(tmp_path / "out"), "--against", "onnxruntime", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "loaded" in out and "skipped: a saved module carries no model" in out
    _user_error(capsys, ["bench", str(tmp_path / "out"), "--input-shape", "x=1,2"], "applies only when compiling")
