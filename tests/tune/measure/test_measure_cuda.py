"""The CUDA measurer: the builder compiles GPU candidates to PTX without a device, failures are values; tuning
for CUDA fails first where no device is present; GPU records carry their own fingerprint. Timing with CUDA
events and the L2 flush need a device (marked cuda)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

import tilegrad
from tilegrad.cli import main
from tilegrad.errors import MeasureError
from tilegrad.runtime import cuda as cuda_runtime
from tilegrad.runtime.cuda import device_present
from tilegrad.schedule.trace import Trace
from tilegrad.target import GPUS
from tilegrad.tune.measure import MeasureInput
from tilegrad.tune.measure.cuda import CudaBuilder, CudaRunner
from tilegrad.tune.model import model_graph
from tilegrad.tune.records import machine_fingerprint, target_fingerprint
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.task import extract_tasks

H100 = GPUS["sm_90"]


class _MatMul(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64, 48))

    def forward(self, x):
        return torch.relu(x @ self.w)


def _gpu_task(target=H100):
    torch.manual_seed(0)
    graph = model_graph(_MatMul().eval(), example_inputs=(torch.randn(32, 64),), target=target)
    (task,) = extract_tasks(graph, target)
    return task


def _candidates(space: TaskSpace, n: int):
    rng, out = random.Random(0), [space.default()]
    while len(out) < n:
        c = space.sample(rng)
        if space.valid(c) and space.sketches[c.sketch].name == "gpu_tiling":
            out.append(c)
    return out


def test_the_builder_compiles_gpu_candidates_to_ptx_without_a_device():
    task = _gpu_task()
    space = TaskSpace(task)
    builder = CudaBuilder(H100)
    try:
        inputs = [MeasureInput(task, space.trace(c)) for c in _candidates(space, 3)]
        built = builder.build(inputs)
        for b, c in zip(built, _candidates(space, 3)):
            ptx = Path(b.library).read_text()
            assert ".entry candidate" in ptx and b.build_s > 0
            _, block = b.launch
            if space.sketches[c.sketch].name == "gpu_tiling":
                assert np.prod(block) == space.sketches[c.sketch].tiles.threads(c.values)
            assert len(b.params) == len(task.node.inputs) + len(task.node.outputs)
        again = builder.build(inputs[:1])[0]
        assert again.library == built[0].library and again.build_s == 0.0  # built once
        broken = Trace.from_json('[{"kind": "split", "stage": "nope", "loop": "i", "factor": 2}]')
        (failed,) = builder.build([MeasureInput(task, broken)])
        assert failed.error_kind == "lower" and "nope" in failed.error
        bad_source = MeasureInput(task, space.trace(space.default()), source_override="this is not CUDA")
        (failed,) = builder.build([bad_source])
        assert failed.error_kind == "build"
    finally:
        builder.close()


def test_gpu_records_carry_their_own_fingerprint():
    gpu = target_fingerprint(H100)
    assert gpu.startswith("cuda; NVIDIA H100; sm_90; nvrtc ")
    assert target_fingerprint(None) == machine_fingerprint() != gpu
    assert target_fingerprint(GPUS["sm_80"]) != gpu


def _no_device(monkeypatch):
    monkeypatch.setattr(cuda_runtime, "device_present", lambda: False)


def test_tuning_for_cuda_without_a_device_fails_first(monkeypatch, tmp_path):
    _no_device(monkeypatch)
    with pytest.raises(MeasureError, match="no CUDA device: "):
        CudaRunner()
    with pytest.raises(MeasureError, match="no CUDA device: "):
        tilegrad.tune(_MatMul().eval(), example_inputs=(torch.randn(4, 64),), db=tmp_path / "t.db", trials=2,
                      target="cuda")
    assert not (tmp_path / "t.db").exists()  # nothing was started


def test_cli_tune_target_cuda_without_a_device_is_one_clear_error(monkeypatch, tmp_path, capsys):
    _no_device(monkeypatch)
    script = tmp_path / "model.py"
    script.write_text("import torch\n\ndef model():\n    return torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),)\n")
    code = main(["tune", f"{script}:model", "--target", "cuda", "--db", str(tmp_path / "t.db"), "--trials", "2"])
    assert code != 0
    assert "no CUDA device: " in capsys.readouterr().err


@pytest.mark.cuda
@pytest.mark.skipif(not device_present(), reason="needs a CUDA device")
def test_the_runner_times_gpu_candidates_with_events_and_checks_them():
    import tilegrad.target as target_module

    task = _gpu_task(target_module.cuda())
    space = TaskSpace(task)
    builder, runner = CudaBuilder(task.target), CudaRunner(repeats=3)
    try:
        assert runner._device.flush_bytes >= 2 * runner._device.l2_bytes > 0
        for c in _candidates(space, 4):
            inp = MeasureInput(task, space.trace(c))
            (b,) = builder.build([inp])
            result = runner.run(inp, b, check=True)
            assert result.valid and result.checked, result.error
            assert len(result.costs) == 3 and all(0 < t < 1 for t in result.costs)
    finally:
        builder.close()
        runner.close()


@pytest.mark.cuda
@pytest.mark.skipif(not device_present(), reason="needs a CUDA device")
def test_tune_for_cuda_writes_gpu_records(tmp_path):
    db = tmp_path / "gpu.db"
    result = tilegrad.tune(_MatMul().eval(), example_inputs=(torch.randn(32, 64),), db=db, trials=8,
                           measure_per_round=4, target="cuda", progress=False)
    assert result.trials == 8
    with sqlite3.connect(db) as con:
        prints = {row[0] for row in con.execute("SELECT DISTINCT fingerprint FROM records")}
    assert prints == {target_fingerprint(tilegrad.target.cuda())}
