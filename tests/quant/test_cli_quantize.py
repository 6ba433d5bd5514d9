"""`tilegrad quantize`: a directory of calibration files in, a QDQ ONNX model or a module directory out."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import tilegrad
from tilegrad.cli import main
from tilegrad.quant.calibration_data import read_directory

from .conftest import BATCH, batched, to_onnx

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def files(trained, digits, tmp_path_factory):
    """The MLP as an .onnx file and a calibration directory of two .npy batches."""
    (x, _), _ = digits
    root = tmp_path_factory.mktemp("cli")
    model = root / "mlp.onnx"
    model.write_bytes(to_onnx(trained["mlp"], BATCH))
    calibration = root / "calibration"
    calibration.mkdir()
    for k, b in enumerate(batched(x[:2 * BATCH])):
        np.save(calibration / f"batch{k}.npy", b)
    return model, calibration


def test_quantize_writes_a_qdq_model_that_onnx_runtime_runs_and_prints_the_report(files, tmp_path, capsys):
    model, calibration = files
    out = tmp_path / "int8.onnx"
    assert main(["quantize", str(model), "--calibration", str(calibration), "-o", str(out), "--method", "max_min",
                 "--report"]) == 0
    printed = capsys.readouterr().out
    assert "QDQ ONNX model" in printed and "SQNR dB" in printed and "activation" in printed
    ops = {n.op_type for n in onnx.load(out).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    x = np.load(calibration / "batch0.npy")
    assert ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].shape == \
        (BATCH, 10)


def test_quantize_to_a_directory_saves_the_int8_module(files, tmp_path):
    model, calibration = files
    assert main(["quantize", str(model), "--calibration", str(calibration), "-o", str(tmp_path / "m"),
                 "--per-tensor"]) == 0
    assert tilegrad.load(tmp_path / "m")(np.load(calibration / "batch0.npy")).shape == (BATCH, 10)


def test_weight_only_needs_no_calibration_and_full_quantization_does(files, tmp_path, capsys):
    model, _ = files
    assert main(["quantize", str(model), "--weight-only", "-o", str(tmp_path / "w.onnx")]) == 0
    assert "QuantizeLinear" not in {n.op_type for n in onnx.load(tmp_path / "w.onnx").graph.node}
    capsys.readouterr()
    assert main(["quantize", str(model), "-o", str(tmp_path / "f.onnx")]) != 0
    assert "--calibration" in capsys.readouterr().err


def test_a_directory_of_npz_files_names_its_arrays_by_input(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.ones(2), y=np.zeros(3))
    np.savez(tmp_path / "b.npz", y=np.ones(3), x=np.zeros(2))
    batches = list(read_directory(tmp_path, ["x", "y"]))
    assert [b["x"].tolist() for b in batches] == [[1, 1], [0, 0]] and batches[1]["y"].tolist() == [1, 1, 1]
    with pytest.raises(tilegrad.errors.TilegradError, match="lacks input"):
        list(read_directory(tmp_path, ["x", "z"]))
