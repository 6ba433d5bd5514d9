"""The small models of the common families (conftest.MODELS: the six of benchmarks/models.py at small sizes and a
PyTorch encoder) for the CUDA target without a GPU: every kernel compiles to PTX with NVRTC, and the same loop IR
rendered serially as C (each bound loop a plain loop, barriers dropped) gives PyTorch's numbers. With a device,
`tilegrad.compile(..., target="cuda")` runs them there."""

from __future__ import annotations

import numpy as np
import pytest

import tilegrad
from tilegrad.cuda_executor import render_graph
from tilegrad.executor import compile_graph
from tilegrad.frontend.load import import_model
from tilegrad.passes import optimize
from tilegrad.runtime.cuda import device_present
from tilegrad.runtime.nvrtc import compile_ptx
from tilegrad.target import GPUS

torch = pytest.importorskip("torch")

H100 = GPUS["sm_90"]


def _want(module, args):
    with torch.no_grad():
        out = module(*args)
    return (out[0] if isinstance(out, tuple) else out).numpy()


@pytest.mark.slow
def test_every_kernel_compiles_to_ptx_and_the_gpu_schedules_give_pytorchs_numbers(torch_model):
    module, args = torch_model
    g, _ = optimize(import_model(module, args), 2, target=H100)
    program = render_graph(g, target=H100)
    ptx = compile_ptx(program.source, H100.arch, name="model.cu")
    for launch in program.launches:
        assert f".entry {launch.name}(" in ptx, launch.name
        assert launch.block[0] * launch.block[1] * launch.block[2] <= H100.max_threads_per_block
    assert "__shared__" in program.source or not any(n.op in ("conv2d", "matmul", "dense") for n in g.nodes)
    serial = compile_graph(g, target=H100)
    got = serial(*[a.numpy() for a in args])
    np.testing.assert_allclose(got[0] if isinstance(got, list) else got, _want(module, args), rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.skipif(not device_present(), reason="needs a CUDA device")
def test_compiled_for_cuda_runs_on_the_device(torch_model):
    module, args = torch_model
    mod = tilegrad.compile(module, args, target="cuda")
    got = mod(*[a.numpy() for a in args])
    np.testing.assert_allclose(got[0] if isinstance(got, list) else got, _want(module, args), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("cin, cout, size, kernel, stride, pad", [
    (256, 1024, 14, 1, 1, 0),  # a block's 64 columns cross rows of 14, and each thread's 4 of them do too
    (512, 1024, 28, 1, 2, 0),  # strided: rows of the input twice as far apart
    (32, 16, 112, 1, 1, 0),    # wide rows: the whole map no longer fits the shared memory
    (64, 12, 33, 2, 1, 1),     # DCGAN's last phase convolution: a window over odd rows
])
def test_full_size_convolutions_fetch_one_block_wide_region_and_give_numpys_numbers(cin, cout, size, kernel,
                                                                                      stride, pad):
    """The shared tile of a block is the same for all its threads (a region that varied with the thread gave each
    thread its own fetch into one buffer: wrong numbers on the GPU, none on the serial reading), and it fits."""
    module = torch.nn.Conv2d(cin, cout, kernel, stride, pad, bias=False).eval()
    args = (torch.randn(1, cin, size, size),)
    g, _ = optimize(import_model(module, args), 2, target=H100)
    program = render_graph(g, target=H100)
    compile_ptx(program.source, H100.arch, name="conv.cu")
    assert "__shared__" in program.source  # tiled; lowering refuses a shared region that varies with a thread
    got = compile_graph(g, target=H100)(args[0].numpy())
    np.testing.assert_allclose(got, _want(module, args), rtol=1e-4, atol=1e-4)
