"""Model arguments of the command line: `file.py:factory` and `package.module:factory` PyTorch specs (with
`--input-shape` for forward's parameters), ONNX files, the errors, and `tilegrad bench` / `compile` on a spec."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

from tilegrad.cli import main
from tilegrad.frontend.model_spec import ModelSpecError, is_torch_spec, load_model_spec

FACTORIES = textwrap.dedent('''
    import torch
    from torch import nn


    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.out = nn.Embedding(50, 8), nn.Linear(8, 3)

        def forward(self, ids, scale=1.0):
            return self.out(self.embed(ids)).mean(1) * scale


    def mlp():
        return nn.Sequential(nn.Linear(6, 4), nn.Dropout(0.5), nn.ReLU())


    def tagger():
        return Tagger(), (torch.randint(0, 50, (2, 7)),)


    def broken():
        raise ValueError("no weights here")


    def not_a_module():
        return 42
''')


@pytest.fixture
def factories(tmp_path):
    path = tmp_path / "nets.py"
    path.write_text(FACTORIES)
    return path


def test_spec_kinds(factories, tmp_path):
    assert is_torch_spec(f"{factories}:mlp") and is_torch_spec("some.package:make")
    assert not is_torch_spec("model.onnx") and not is_torch_spec(str(factories))


def test_module_with_shapes(factories):
    spec = load_model_spec(f"{factories}:mlp", {"input": (3, 6)})
    assert spec.kind == "torch" and spec.input_shapes is None
    assert not spec.model.training  # put in eval mode
    (x,) = spec.example_inputs
    assert x.shape == (3, 6) and x.dtype == torch.float32


def test_examples_from_the_factory_and_reshaped(factories):
    spec = load_model_spec(f"{factories}:tagger")
    assert spec.example_inputs[0].shape == (2, 7)
    (ids,) = load_model_spec(f"{factories}:tagger", {"ids": (4, 9)}).example_inputs
    assert ids.shape == (4, 9) and ids.dtype == torch.int64 and 0 <= int(ids.min()) and int(ids.max()) < 50


def test_importable_module(factories, monkeypatch):
    monkeypatch.syspath_prepend(str(factories.parent))
    assert load_model_spec("nets:tagger").kind == "torch"


@pytest.mark.parametrize("text, shapes, message", [
    ("missing.py:mlp", {}, "no Python file at missing.py"),
    ("{f}:absent", {}, "has no function 'absent'"),
    ("{f}:broken", {}, "calling the factory failed: ValueError: no weights here"),
    ("{f}:not_a_module", {}, "returned int; a factory returns a torch.nn.Module"),
    ("{f}:mlp", {}, "pass --input-shape input=D0,D1,..."),
    ("{f}:tagger", {"x": (2,)}, "names x, which Tagger.forward does not take; its inputs are ids, scale"),
    ("no_such_package_here:make", {}, "cannot import no_such_package_here"),
])
def test_errors(factories, text, shapes, message):
    with pytest.raises(ModelSpecError, match=message):
        load_model_spec(text.format(f=factories), shapes)


def test_onnx_file(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    path = tmp_path / "relu.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    spec = load_model_spec(str(path), {"x": (2, 4)})
    assert spec.kind == "onnx" and spec.example_inputs is None and spec.input_shapes == {"x": (2, 4)}


def test_cli_bench_and_compile(factories, tmp_path, capsys):
    spec = f"{factories}:tagger"
    assert main(["bench", spec, "--input-shape", "ids=3,5", "--against", "torch,onnxruntime", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "ids int64[3, 5]" in out and "skipped: a PyTorch model has no ONNX file" in out
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["tilegrad", "torch", "onnxruntime"]
    assert main(["compile", spec, "-o", str(tmp_path / "out")]) == 0
    assert main(["run", str(tmp_path / "out"), "--input", f"ids={_npy(tmp_path, np.zeros((2, 7), np.int64))}"]) == 0
    assert main(["bench", f"{factories}:mlp"]) == 2
    assert "--input-shape input=D0,D1" in capsys.readouterr().err


def _npy(tmp_path, array) -> str:
    path = tmp_path / "in.npy"
    np.save(path, array)
    return str(path)
