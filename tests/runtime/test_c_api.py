"""The C API (include/tilegrad.h): examples/c_api/run_model.c, built here, loads a saved module, derives its
weights and runs it without Python, and gives the Python module's outputs; a module with a dynamic dimension runs
each value given within its bounds, and refuses one outside them."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

import tilegrad
from tilegrad.runtime.build import find_compiler

pytestmark = pytest.mark.slow  # builds and runs a C program

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "c_api" / "run_model.c"


class TwoInputs(nn.Module):
    """A Winograd convolution (a weight the library derives at load), a GEMM, and two inputs and outputs."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x, bias):
        y = torch.relu(self.conv(x))
        return self.fc(y.flatten(1)) + bias, y.mean(dim=(2, 3))


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("c_api") / "run_model"
    subprocess.run([find_compiler(), "-O2", "-std=c11", "-Wall", "-Werror", f"-I{tilegrad.c_include_dir()}",
                    str(EXAMPLE), "-o", str(exe), "-ldl"], check=True, capture_output=True, text=True)
    return exe


def test_the_c_example_runs_a_saved_module_as_python_does(program, tmp_path):
    torch.manual_seed(0)
    net = TwoInputs().eval()
    x, bias = torch.randn(2, 16, 8, 8), torch.randn(2, 10)
    module = tilegrad.compile(net, (x, bias))
    saved = module.save(tmp_path / "m")
    assert tilegrad.load(saved).spec.derived
    want = module(x.numpy(), bias.numpy())
    (tmp_path / "in.bin").write_bytes(x.numpy().tobytes() + bias.numpy().tobytes())
    run = subprocess.run([str(program), str(saved), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].startswith("input ") and "float32[2, 16, 8, 8]" in run.stdout
    raw = np.frombuffer((tmp_path / "out.bin").read_bytes(), "float32")
    got = [raw[:20].reshape(2, 10), raw[20:].reshape(2, 16)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


UNLOAD = r"""
#include "tilegrad.h"
int main(int argc, char** argv) {
  char error[512];
  tg_model* model = tg_model_load(argv[1], 0, error, sizeof error);
  if (!model) return 2;
  tg_model_free(model);
  return dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD) ? 0 : 1;  /* its idle threads still wait in its code */
}
"""


def test_freeing_a_model_keeps_the_openmp_runtime_its_threads_wait_in(tmp_path):
    (tmp_path / "unload.c").write_text(UNLOAD)
    subprocess.run([find_compiler(), "-O2", "-std=c11", f"-I{tilegrad.c_include_dir()}", str(tmp_path / "unload.c"),
                    "-o", str(tmp_path / "unload"), "-ldl"], check=True, capture_output=True, text=True)
    x = torch.randn(2, 16, 8, 8)
    saved = tilegrad.compile(TwoInputs().eval(), (x, torch.randn(2, 10))).save(tmp_path / "m")
    assert subprocess.run([str(tmp_path / "unload"), str(saved)], timeout=60).returncode == 0


def test_the_c_api_names_what_it_cannot_load(program, tmp_path):
    run = subprocess.run([str(program), str(tmp_path / "nothing"), "in.bin", "out.bin"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and "cannot load" in run.stderr and "model.so" in run.stderr


def _rows_model():
    """x[N, 8] -> relu(x @ w + b) as y[N, 16], and concat(x, x) as z[2N, 8]: shapes that are formulas of N."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Concat", ["x", "x"], ["z"], axis=0)]
    graph = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_c_example_runs_a_dynamic_module_at_each_value_as_python_does(program, tmp_path):
    module = tilegrad.compile(_rows_model(), dynamic={"N": (1, 64)})
    saved = module.save(tmp_path / "m")
    for n in (1, 5, 17, 64):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        (tmp_path / "in.bin").write_bytes(x.tobytes())
        run = subprocess.run([str(program), str(saved), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"),
                              f"N={n}"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert f"input x float32[{n}, 8]" in run.stdout and f"output z float32[{2 * n}, 8]" in run.stdout
        raw = np.frombuffer((tmp_path / "out.bin").read_bytes(), "float32")
        want = module(x)
        np.testing.assert_allclose(raw[:n * 16].reshape(n, 16), want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(raw[n * 16:].reshape(2 * n, 8), want[1])
    run = subprocess.run([str(program), str(saved), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"), "N=65"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "'N' is 65, outside the bounds the module was compiled for: 1 to 64" in run.stderr
    run = subprocess.run([str(program), str(saved), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "give the dynamic dimension 'N' (1 to 64) as N=VALUE" in run.stderr
