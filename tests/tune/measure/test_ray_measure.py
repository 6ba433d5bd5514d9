"""Measuring on a local Ray cluster of two devices (one core each) and two build workers: the same records as the
local runner, a device or build worker killed mid-tuning loses and doubles nothing, a hung candidate times out
as it does locally, `--ray auto` without devices makes this machine one, and the CLI registers devices and
tunes with --ray."""

import dataclasses
import io
import json
import os
import random
import re
import resource
import sqlite3
import threading
import warnings
from typing import ClassVar

import pytest
import ray
import torch
from torch import nn

from tilegrad import config
from tilegrad.cli import main
from tilegrad.errors import MeasureError
from tilegrad.ir.graph import GraphBuilder
from tilegrad.target import host
from tilegrad.tune.callbacks import default_callbacks
from tilegrad.tune.measure import MeasureInput, Measurer
from tilegrad.tune.measure.builder import LocalBuilder
from tilegrad.tune.measure.ray_cluster import (NAMESPACE, default_key, describe, devices, ray_measurer,
                                                 register_device)
from tilegrad.tune.measure.ray_runner import RayRunner
from tilegrad.tune.model import model_graph
from tilegrad.tune.records import machine_fingerprint
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.task import extract_tasks
from tilegrad.tune.tuner import tune_tasks
from tilegrad.tune.tuning_run import Callback, TuneOptions

# A local Ray cluster: devices and build workers are processes of their own; one cluster at a time under xdist.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]
QUIET = default_callbacks(progress=False)
TIMING = {"repeats": 2, "min_repeat_s": 0.001, "timeout_s": 5.0}
HANG = "void candidate(void **args) { volatile int spin = 1; while (spin) {} }"


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, namespace=NAMESPACE, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def cores():
    """Two cores, one per device (the same one twice on a one-core machine)."""
    mine = sorted(os.sched_getaffinity(0))
    return [[mine[0]], [mine[-1]]]


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    with config.override(cache_dir=tmp_path_factory.mktemp("cache")) as cfg:
        yield cfg


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 48), nn.ReLU(), nn.Linear(48, 16)).eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(8, 32),), buf, input_names=["x"], dynamo=False)
    path = tmp_path_factory.mktemp("model") / "mlp.onnx"
    path.write_bytes(buf.getvalue())
    return path


@pytest.fixture(scope="module")
def tasks(model):
    return extract_tasks(model_graph(str(model)))


@pytest.fixture(scope="module")
def two_devices(cores):
    """Two devices under the key "test-two", alive while referenced."""
    return [register_device("test-two", c, detached=False) for c in cores]


@pytest.fixture(scope="module")
def measurer(two_devices, cfg):
    """Two build workers, which take the cluster's two CPUs: a test that makes more runs before it is made."""
    with ray_measurer("auto", "test-two", cfg=cfg, builders=2, check_fraction=1.0, **TIMING) as m:
        yield m


@dataclasses.dataclass(frozen=True)
class _Sampled:
    """Random candidates whatever was measured: the same seed proposes the same ones on any runner."""

    name: ClassVar[str] = "sampled-test"
    cost_model: ClassVar[str] = "trees"
    measure_per_round: int = 4

    def for_task(self, space, model, seed):
        return _Sampler(space, random.Random(seed))


@dataclasses.dataclass
class _Sampler:
    space: TaskSpace
    rng: random.Random

    def propose(self, measured, best, n):
        return [self.space.sample(self.rng) for _ in range(n)]


OPTIONS = TuneOptions(trials=8, confirm=0, recheck=0, scheduler="round-robin")


def _records(db):
    """(task, trace, error kind) of each measured record, in order."""
    with sqlite3.connect(db) as con:
        return [(key, trace, kind) for key, trace, kind in
                con.execute("SELECT task_key, trace, error_kind FROM records ORDER BY id")]


def test_the_default_key_names_the_cpu_and_its_isa():
    key = default_key()
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key) and key.endswith("-" + host().isa)
    with pytest.raises(MeasureError, match="device key 'a:b'"):
        register_device("a:b")


def test_the_cli_tunes_on_the_devices_of_a_key(model, two_devices, tmp_path, capsys):
    db = tmp_path / "cli.db"
    assert main(["tune", str(model), "--db", str(db), "--trials", "4", "--measure-per-round", "4",
                 "--no-algorithms", "--recheck", "0", "--ray", "auto", "--ray-key", "test-two"]) == 0
    assert "estimated end-to-end" in capsys.readouterr().out
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM records WHERE error_kind IS NULL").fetchone()[0] >= 4
    assert main(["tune", str(model), "--db", str(db), "--trials", "4", "--ray-key", "test-two"]) == 2
    assert "--ray-key needs --ray" in capsys.readouterr().err
    assert main(["tune", str(model), "--db", str(db), "--trials", "4", "--ray", "auto", "--ray-key", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert "no device is registered under key 'nowhere'" in err and "test-two" in err


def test_auto_makes_this_machine_the_one_device_of_its_key(tasks, cfg):
    with ray_measurer("auto", cfg=cfg, builders=1, **TIMING) as m:
        (device,) = m.runner.devices
        assert describe(device)["cores"] == sorted(os.sched_getaffinity(0))  # the whole machine
        assert m.measure_one(tasks[0], tasks[0].default_trace()).valid


def test_the_cli_registers_and_lists_devices(cores, capsys):
    assert main(["ray-device", "--key", "test-cli", "--cores", f"{cores[0][0]}"]) == 0
    out = capsys.readouterr().out
    assert "device test-cli on " in out and f"cores {cores[0][0]}\n" in out and "--ray-key test-cli" in out
    assert main(["ray-device", "--list"]) == 0
    assert "test-cli: 1 devices" in capsys.readouterr().out
    (device,) = devices("test-cli")
    ray.kill(device)  # detached: it would outlive the test
    assert main(["ray-device", "--key", "test-cli", "--cores", "0-x"]) == 2
    assert "--cores '0-x': expected core numbers and ranges" in capsys.readouterr().err


def test_the_ray_runner_records_what_the_local_runner_does(tasks, measurer, cfg, tmp_path):
    local_db, ray_db = tmp_path / "local.db", tmp_path / "ray.db"
    with Measurer(builders=2, check_fraction=1.0, cfg=cfg, **TIMING) as local:
        tune_tasks(tasks, local_db, _Sampled(), OPTIONS, measurer=local, callbacks=QUIET)
    result = tune_tasks(tasks, ray_db, _Sampled(), OPTIONS, measurer=measurer, callbacks=QUIET)
    assert result.trials == 8
    here, there = _records(local_db), _records(ray_db)
    assert len(there) == 8 + len(tasks)  # the defaults, then every candidate once
    assert there == here  # the same candidates, each valid (its outputs checked) or failing the same way
    assert any(kind is None for _, _, kind in there)
    with sqlite3.connect(ray_db) as con:  # the devices' machine, timing on one core each
        assert {f for (f,) in con.execute("SELECT fingerprint FROM records")} == {
            measurer.fingerprint} == {machine_fingerprint(dataclasses.replace(cfg, num_threads=1))}



def test_a_device_killed_mid_batch_hands_its_candidates_to_another(tasks, cfg, cores):
    """Devices of their own, and a local builder: the cluster's CPUs are the module measurer's build workers'.
    Twelve candidates go out in batches of three at first, so the kill lands inside a batch."""
    pinned = [register_device("test-inflight", c, detached=False) for c in cores]
    runner = RayRunner(pinned, cfg, repeats=2, min_repeat_s=0.1, timeout_s=30.0)
    task = tasks[0]
    inputs = [MeasureInput(task, task.default_trace())] * 12
    builder = LocalBuilder(cfg, workers=1)
    try:
        built = builder.build(inputs[:1]) * 12
        timer = threading.Timer(1.5, ray.kill, [pinned[0]])
        timer.start()
        results = runner.run_all([(inp, b, False) for inp, b in zip(inputs, built)])
        timer.join()
    finally:
        builder.close()
    assert len(results) == 12 and all(r.valid for r in results)
    assert runner.devices == [pinned[1]]


def test_a_device_times_at_the_niceness_of_an_ordinary_process(two_devices):
    """Ray starts its workers at niceness 15; a device lowers its own to 0 where it may (root, or a raised
    RLIMIT_NICE), and stays at Ray's where it may not."""
    may_lower = os.geteuid() == 0 or resource.getrlimit(resource.RLIMIT_NICE)[0] >= 20
    assert [describe(d)["niceness"] for d in two_devices] == [0 if may_lower else 15] * 2


def test_a_hung_candidate_times_out_as_on_the_local_runner(measurer, cfg):
    b = GraphBuilder()
    (task,) = extract_tasks(b.build(b.op("relu", b.input("x", (8, 40)))))  # a task no tuning has limited
    hang = MeasureInput(task, task.default_trace(), source_override=HANG)
    with Measurer(builders=1, cfg=cfg, **TIMING) as local:
        want = local.measure([hang])[0]
    got = measurer.measure([hang, MeasureInput(task, task.default_trace())])
    assert want.error_kind == got[0].error_kind == "timeout"
    assert want.error.splitlines()[0] == got[0].error.splitlines()[0] == "timeout after 5 s"
    assert got[1].valid  # a device took the next candidate


class _KillMidTuning(Callback):
    """After the first round, kills a device and a build worker."""

    def __init__(self, measurer):
        self.measurer, self.killed = measurer, False

    def measured(self, run, st, batch, results):
        if not self.killed:
            ray.kill(self.measurer.runner.devices[0])
            ray.kill(self.measurer.builder.workers[0])
            self.killed = True


def test_a_device_and_a_build_worker_killed_mid_tuning_lose_and_double_nothing(tasks, measurer, tmp_path):
    """Last: it leaves the module's measurer one device."""
    db = tmp_path / "kill.db"
    killer = _KillMidTuning(measurer)
    result = tune_tasks(tasks, db, _Sampled(), OPTIONS, measurer=measurer, callbacks=[*QUIET, killer])
    assert killer.killed and len(measurer.runner.devices) == 1
    assert len(measurer.builder.workers) == 2  # the dead one replaced
    assert result.trials == 8
    with sqlite3.connect(db) as con:
        rows = list(con.execute("SELECT origin, trace, error FROM records"))
    measured = [(o, t) for o, t, _ in rows if json.loads(o)["policy"] == "sampled-test"]
    assert len(measured) == 8 == len(set(measured))  # every candidate recorded, once
    assert not [e for _, _, e in rows if e and "device" in e]  # none was given up for its device
