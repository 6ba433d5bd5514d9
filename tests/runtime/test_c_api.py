"""The C API (include/tilegrad.h): examples/c_api/run_model.c, built here, loads a saved module, derives its
weights and runs it without Python, and gives the Python module's outputs."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
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
