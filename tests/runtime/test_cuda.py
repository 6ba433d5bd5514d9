"""The CUDA runtime: the GPU target without a driver, the errors of the CUDA path, and (on a device) a module
that keeps its weights and one workspace allocation on the GPU and copies only inputs and outputs."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.errors import BuildError, KernelCallError, TilegradError
from tilegrad.runtime import cuda as cuda_runtime
from tilegrad.runtime.cuda import device_present
from tilegrad.target import GPUS, cuda

RNG = np.random.default_rng(0)
W = RNG.standard_normal((16, 8)).astype(np.float32)


def _model():
    """y = softmax(x @ W + 1) over rows: a matmul, an epilogue and a row-wise chain; x (4, 16)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "one"], ["a"]),
             helper.make_node("Softmax", ["a"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                              initializer=[numpy_helper.from_array(W, "w"),
                                           numpy_helper.from_array(np.ones(8, np.float32), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


def _reference(x):
    a = x @ W + 1
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_without_the_driver_the_target_is_the_sm_90_default(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails as where cuda-bindings is absent
    target = cuda.__wrapped__()
    assert target == GPUS["sm_90"] and target.kind == "cuda" and target.sm_count == 132
    assert "sm_90" in target.identity()


def test_compiling_for_cuda_without_a_device_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(cuda_runtime, "device_present", lambda: False)
    with pytest.raises(BuildError, match="no CUDA device.*compile to PTX without one"):
        tilegrad.compile(_model(), target="cuda")


def test_gpu_records_choose_the_cuda_kernels_and_cpu_records_do_not(tmp_path):
    """A GPU-sketch record of the gemm kernel (the first), fingerprinted for the GPU, is the schedule its CUDA kernel is
    rendered with; the same database's CPU records are not read."""
    import random

    from tilegrad.cuda_executor import render_graph
    from tilegrad.frontend.load import import_model
    from tilegrad.passes import optimize
    from tilegrad.tune.apply import BestRecords
    from tilegrad.tune.measure import MeasureInput, MeasureResult
    from tilegrad.tune.records import Database, Record, target_fingerprint
    from tilegrad.tune.search.space import TaskSpace
    from tilegrad.tune.task import extract_tasks

    h100 = GPUS["sm_90"]
    graph, _ = optimize(import_model(_model()), 2, target=h100)
    (task,) = [t for t in extract_tasks(graph, h100) if t.node.op == "gemm"]
    space, rng = TaskSpace(task), random.Random(0)
    tuned = next(c for c in iter(lambda: space.sample(rng), None)
                 if space.sketches[c.sketch].name == "gpu_tiling" and space.valid(c))
    threads = space.sketches[tuned.sketch].tiles.threads(tuned.values)
    db = tmp_path / "records.db"
    with Database(db) as cpu:  # a CPU record of the same workload: faster, and never a GPU kernel's schedule
        cpu.add(Record.from_measurement(MeasureInput(task, space.trace(space.default())), MeasureResult((1e-9,))))
    with Database(db, fingerprint=target_fingerprint(h100)) as gpu:
        gpu.add(Record.from_measurement(MeasureInput(task, space.trace(tuned)), MeasureResult((1e-6,))))
    default = render_graph(graph, target=h100)
    with BestRecords(db, fingerprint=target_fingerprint(h100)) as chooser:
        chosen = render_graph(graph, choose=chooser, target=h100)
        assert chooser.applied == 1
    (k,) = [i for i, c in enumerate(chosen.launches) if c.name.startswith("k0_")]
    assert chosen.launches[k].block[0] * chosen.launches[k].block[1] * chosen.launches[k].block[2] == threads
    assert chosen.source != default.source
    with pytest.raises(TilegradError, match="no tuning records database"):
        tilegrad.compile(_model(), target="cuda", db=tmp_path / "missing.db")


def test_cuda_source_compiles_a_model_to_ptx_without_a_device():
    source, ptx = tilegrad.api.cuda_source(_model())
    assert source.count('extern "C" __global__') == ptx.count(".entry ") >= 2


@pytest.mark.cuda
@pytest.mark.skipif(not device_present(), reason="needs a CUDA device")
def test_module_on_the_device_matches_numpy_and_keeps_its_memory():
    mod = tilegrad.compile(_model(), target="cuda")
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_allclose(mod(x), _reference(x), rtol=1e-4, atol=1e-5)
    allocations = list(mod._allocations)
    np.testing.assert_allclose(mod(x=x), _reference(x), rtol=1e-4, atol=1e-5)
    assert mod._allocations == allocations  # nothing allocated per call
    assert len(allocations) == len(mod.inputs) + len(mod.outputs) + len(mod._weights) + 1  # one workspace
    with pytest.raises(KernelCallError, match="input 'x': expected float32\\[4, 16\\]"):
        mod(x[:2])


@pytest.mark.cuda
@pytest.mark.skipif(not device_present(), reason="needs a CUDA device")
def test_kernel_times_give_each_launch_its_device_time():
    mod = tilegrad.compile(_model(), target="cuda")
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    times = mod.kernel_times(x, repeats=3)
    assert [name for name, _ in times] == [c.name for c in mod.launches]
    assert all(0 < t < 0.1 for _, t in times)
    np.testing.assert_allclose(mod(x), _reference(x), rtol=1e-4, atol=1e-5)  # the module still runs after
