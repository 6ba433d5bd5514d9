"""The kernels' thread count: by default the CPUs this process may use (its affinity mask within its cgroup's
quota, not every CPU of the machine), and `threads=` on compile and load, `--threads` on the command line; the
version as `tilegrad.__version__` and `tilegrad --version`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import tilegrad
from tilegrad import config
from tilegrad.cli import main
from tilegrad.errors import TilegradError

SRC = Path(__file__).resolve().parents[1] / "src"


def _model():
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 8]) for n in ("x", "y"))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_default_is_the_affinity_mask_within_the_cgroup_quota(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(config, "_cgroup_quota", lambda: None)
    assert config.usable_cpus() == 4
    monkeypatch.setattr(config, "_cgroup_quota", lambda: 3)
    assert config.usable_cpus() == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5})
    assert config.usable_cpus() == 1


def test_a_process_pinned_to_one_cpu_runs_one_thread():
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("TILEGRAD_NUM_THREADS", None)
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from tilegrad import config; print(config.Config().num_threads)")
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip() == "1"


def test_compile_and_load_take_a_thread_count(tmp_path):
    m = tilegrad.compile(_model(), threads=1)
    assert m._kernel.num_threads == 1
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(4, 8)
    np.testing.assert_array_equal(m(x), np.maximum(x, 0))
    m.save(tmp_path / "m")
    assert tilegrad.load(tmp_path / "m", threads=2)._kernel.num_threads == 2
    for bad in (0, -1, 1.5):
        with pytest.raises(TilegradError, match="threads must be a positive integer"):
            tilegrad.compile(_model(), threads=bad)
    with pytest.raises(TilegradError, match="threads must be a positive integer"):
        tilegrad.load(tmp_path / "m", threads=0)


def test_the_command_line_takes_threads_and_says_its_version(tmp_path, capsys, monkeypatch):
    path = tmp_path / "m.onnx"
    path.write_bytes(_model().SerializeToString())
    monkeypatch.delenv("TILEGRAD_NUM_THREADS", raising=False)
    assert main(["--threads", "1", "compile", str(path), "-o", str(tmp_path / "out")]) == 0
    assert "TILEGRAD_NUM_THREADS" not in os.environ  # set for the command's workers only, then restored
    capsys.readouterr()
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"tilegrad {tilegrad.__version__}"
    assert main(["--threads", "0", "info", str(path)]) == 2
