"""tilegrad.compile end to end: ONNX models against ONNX Runtime, one native call per inference, save/load in a
fresh process, and the errors a user meets (missing input, wrong shape, tampered directory)."""

from __future__ import annotations

import io
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest

import tilegrad
from tilegrad.errors import KernelCallError, ModuleFormatError, ResourceLimitError, TilegradError


def _ort(model, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _export(module, *args, names=("x",)):
    torch = pytest.importorskip("torch")
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, f, dynamo=False, opset_version=17, input_names=list(names))
    return onnx.load_from_string(f.getvalue())


@pytest.fixture(scope="module")
def cnn():
    import torch

    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)
            self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.fc = torch.nn.Linear(8, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv1(x)))
            y = torch.nn.functional.max_pool2d(y + self.conv2(y), 2)
            return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))

    m = Block()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 16, 16)
    return _export(m, x), x.numpy()


def test_cnn_matches_onnxruntime(cnn):
    model, x = cnn
    mod = tilegrad.compile(model)
    assert mod.input_names == ["x"] and mod.input_shapes == {"x": (2, 3, 16, 16)}
    np.testing.assert_allclose(mod(x), _ort(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mod(x=x), mod(x))
    assert mod.benchmark(repeats=3, min_repeat_s=0.001) > 0


def test_save_and_load_in_a_fresh_process(cnn, tmp_path):
    model, x = cnn
    mod = tilegrad.compile(model)
    mod.save(tmp_path / "m")
    np.save(tmp_path / "x.npy", x)
    code = (f"import numpy as np, tilegrad; m = tilegrad.load({str(tmp_path / 'm')!r}); "
            f"np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r})))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), mod(x), rtol=1e-6)


def test_tampered_or_incomplete_directories_are_refused(cnn, tmp_path):
    model, _ = cnn
    out = tilegrad.compile(model).save(tmp_path / "m")
    weights = out / "weights.bin"
    weights.write_bytes(weights.read_bytes()[:-8] + b"tampered")
    with pytest.raises(ModuleFormatError, match="checksum"):
        tilegrad.load(out)
    weights.unlink()
    with pytest.raises(ModuleFormatError, match="weights.bin is missing"):
        tilegrad.load(out)


def test_call_errors_say_what_is_wrong(cnn):
    model, x = cnn
    mod = tilegrad.compile(model)
    with pytest.raises(KernelCallError, match="missing input"):
        mod()
    with pytest.raises(KernelCallError, match=r"input 'x' expects shape \(2, 3, 16, 16\), got \(1, 3, 16, 16\)"):
        mod(x[:1])
    with pytest.raises(KernelCallError, match="no input 'y'"):
        mod(y=x)
    with pytest.raises(TilegradError, match="target 'tpu' is not supported; available: cpu, cuda"):
        tilegrad.compile(model, target="tpu")


def test_a_model_without_nodes_compiles():
    """Outputs that are an input or a constant (everything folded) still come back, copied by the entry."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Shape", ["x"], ["s"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    mod = tilegrad.compile(helper.make_model(graph, ir_version=10))
    shape, same = mod(np.ones((2, 3), "float32"))
    assert shape.tolist() == [2, 3] and same.shape == (2, 3)


def test_outputs_no_kernel_writes_match_onnxruntime():
    """An initializer that a node also reads, a folded constant, Shape(x) and the input itself, beside a computed
    output; the heap is dirtied before each call, so an output left unwritten shows."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.full((2, 3), 5.0, "float32"), "w"),
             numpy_helper.from_array(np.array([1, 2], "int64"), "a"),
             numpy_helper.from_array(np.array([10, 20], "int64"), "b")]
    nodes = [helper.make_node("Add", ["x", "w"], ["y"]), helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Add", ["a", "b"], ["folded"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
               helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3]),
               helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
               helper.make_tensor_value_info("folded", TensorProto.INT64, [2]),
               helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], outputs,
                              initializer=inits)
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)])
    mod = tilegrad.compile(model)
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal((2, 3)).astype("float32")
        expected = _ort(model, {"x": x})
        for out in expected:
            junk = np.full_like(out, 7)
            del junk
        for got, want in zip(mod(x), expected):
            np.testing.assert_array_equal(got, want)


def test_a_model_too_large_for_memory_is_refused_not_crashed():
    """Expand to 2**64 elements: the byte count overflows int64, so it must be refused before anything runs."""
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([2**32, 2**32], "int64"), "shape")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["sum"], keepdims=0), helper.make_node("Relu", ["sum"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], initializer=[shape])
    with pytest.raises(ResourceLimitError, match=r"\[4294967296, 4294967296\]"):
        tilegrad.compile(helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 17])
def test_old_and_new_opsets(opset):
    """The same CNN exported at opsets from 7 on (attribute forms of Pad, Slice, Softmax... change over them)."""
    import torch

    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10), torch.nn.Softmax(1))
    x = torch.randn(2, 3, 8, 8)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m.eval(), (x,), f, dynamo=False, opset_version=opset, input_names=["x"])
    model = onnx.load_from_string(f.getvalue())
    np.testing.assert_allclose(tilegrad.compile(model)(x.numpy()), _ort(model, {"x": x.numpy()})[0],
                               rtol=1e-4, atol=1e-5)
