"""The MLP cost model learns a ranking, fine-tunes deterministically, round-trips through a file and is
differentiable in its features; the dataset CLI generates records and trains on them.

The learning test reuses the analytical matmul machine of tests/tune/cost_model/test_cost_model.py.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from tilegrad.tools import dataset
from tilegrad.tune.cost_model import mlp as mlp_model
from tilegrad.tune.cost_model.mlp import NUM_FEATURES, MLPCostModel, normalised_throughput
from tilegrad.tune.features.extract import STORE_SLOTS, program_vector
from tilegrad.tune.cost_model.trees import pair_counts, ranking_accuracy


def _load_tree_tests():
    spec = importlib.util.spec_from_file_location("_tree_cost_model_tests", Path(__file__).with_name(
        "test_cost_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_benchmark = _load_tree_tests()._benchmark
WIDTH = 21  # the analytical machine's features


def _trained(rows_per_task: int, seed: int, epochs: int = 50) -> MLPCostModel:
    model = MLPCostModel(num_features=WIDTH, per_store=False)
    model.update(*_benchmark(rows_per_task, seed=seed), epochs=epochs)
    return model


def test_ranking_accuracy_rises_with_training_data():
    held_out = _benchmark(150, seed=1)
    few, some, many = (ranking_accuracy(_trained(n // 6, seed=n), *held_out) for n in (32, 128, 512))
    assert few < some < many
    assert many > 0.9
    assert few > 0.6


def test_labels_are_throughput_over_the_best_of_the_task():
    tp = np.array([1.0, 4.0, 2.0, np.inf, 0.0, 3.0, np.nan])
    got = normalised_throughput(tp, np.array([0, 0, 0, 0, 1, 1, 2]))
    np.testing.assert_allclose(got, [0.25, 1.0, 0.5, 0.0, 0.0, 1.0, 0.0])


def test_training_is_deterministic_and_update_fine_tunes():
    x, tp, groups = _benchmark(20, seed=3)
    a, b = _trained(20, seed=3, epochs=5), _trained(20, seed=3, epochs=5)
    np.testing.assert_array_equal(a.predict(x), b.predict(x))
    before = a.predict(x)
    a.update(x[::-1], tp[::-1], groups[::-1], epochs=2)
    assert not np.array_equal(a.predict(x), before)


def test_an_update_goes_over_its_new_rows_with_earlier_rows_replayed():
    groups = np.repeat(np.arange(8), 40)  # 8 tasks of 40 rows; the last 16 rows are an update's
    epoch = mlp_model._batches(groups, 304, np.random.default_rng(0))
    rows = np.concatenate(epoch)
    new, old = rows[rows >= 304], rows[rows < 304]
    assert sorted(new) == list(range(304, 320))  # every new row once
    assert mlp_model.REPLAY * 16 <= len(old) < (mlp_model.REPLAY + 4) * 16 and len(set(old)) == len(old)
    # Chunks keep one task's rows together, so replayed rows come with same-task pairs.
    assert np.bincount(groups[old])[np.unique(groups[old])].min() > 1
    first = np.concatenate(mlp_model._batches(groups, 0, np.random.default_rng(0)))
    assert sorted(first) == list(range(320))  # a first training goes over every row once per epoch


def test_torch_thread_count_is_restored():
    before = torch.get_num_threads()
    model = MLPCostModel(num_features=WIDTH, per_store=False, threads=max(1, before - 1) if before > 1 else 2)
    x, tp, groups = _benchmark(5, seed=4)
    model.update(x, tp, groups, epochs=1)
    model.predict(x)
    assert torch.get_num_threads() == before


def test_bad_input_says_what_is_wrong():
    model = MLPCostModel(num_features=3, per_store=False)
    with pytest.raises(ValueError, match="3 columns"):
        model.predict(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="21 is not"):
        MLPCostModel(num_features=21)
    with pytest.raises(ValueError, match="one of each"):
        model.update(np.zeros((2, 3)), [1.0], ["a", "a"])


def test_save_and_load_round_trip(tmp_path):
    x, tp, groups = _benchmark(20, seed=7)
    x[::5, 2] = np.nan  # non-finite features read as 0
    model = MLPCostModel(num_features=WIDTH, hidden=32, seed=5, per_store=False)
    model.update(x, tp, groups, epochs=3)
    model.save(tmp_path / "model.npz")
    loaded = MLPCostModel()
    loaded.load(tmp_path / "model.npz")
    assert (loaded.num_features, loaded.hidden, loaded.fitted, loaded.per_store) == (WIDTH, 32, True, False)
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert np.isfinite(loaded.predict(x)).all()

    np.savez(tmp_path / "other.npz", weights=np.zeros(3))
    with pytest.raises(ValueError, match="not a saved MLPCostModel"):
        loaded.load(tmp_path / "other.npz")


def test_score_and_gradient_are_the_nets_and_autograds():
    x = _benchmark(10, seed=8)[0]
    model = _trained(10, seed=8, epochs=3)
    scores, grad = model.score_and_gradient(x)
    np.testing.assert_allclose(scores, model.predict(x), rtol=1e-5)
    feats = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    model.net(feats).sum().backward()
    np.testing.assert_allclose(grad, feats.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert np.abs(grad).sum() > 0
    with_nan = np.where(np.arange(WIDTH) == 0, np.nan, x)
    scores, grad = model.score_and_gradient(with_nan)
    assert np.isfinite(scores).all() and np.isfinite(grad).all() and np.all(grad[:, 0] == 0)
    model.update(*_benchmark(10, seed=9), epochs=2)  # the weights move: the NumPy copies must follow
    np.testing.assert_allclose(model.score_and_gradient(x)[0], model.predict(x), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        model.net.layers[0].bias.add_(1.0)  # an in-place edit from outside counts too
    np.testing.assert_allclose(model.score_and_gradient(x)[0], model.predict(x), rtol=1e-5, atol=1e-6)


def _programs(count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Programs of two stores of 3 features, in twins: stores (a, b, e), (c, d, f) and (a, d, e), (c, b, f), whose
    sums and maxes over stores are the same. The speed is set by each store alone: 1 over the sum over stores of
    the product of its first two features."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count // 2):
        (a, b, e), (c, d, f) = rng.integers(1, 16, size=(2, 3)).astype(float)
        rows += [np.array([[a, b, e], [c, d, f]]), np.array([[a, d, e], [c, b, f]])]
    return rows, np.array([1.0 / (r[:, 0] * r[:, 1]).sum() for r in rows])


def _vectors(rows: list[np.ndarray]) -> np.ndarray:
    return np.stack([program_vector(r) for r in rows])


def test_a_per_store_model_ranks_what_the_sums_over_stores_lose():
    rows, speed = _programs(600, seed=0)
    held_rows, held_speed = _programs(300, seed=1)
    groups = [f"t{k // 2 % 6}" for k in range(len(rows))]  # twins in one task
    held_groups = [f"t{k // 2 % 6}" for k in range(len(held_rows))]
    accuracy = {}
    for per_store in (True, False):  # the second reads the vectors' aggregate part alone
        model = MLPCostModel(num_features=(2 + STORE_SLOTS) * 3 if per_store else 6, per_store=per_store, hidden=64)
        model.update(_vectors(rows), speed, groups, epochs=60)
        accuracy[per_store] = ranking_accuracy(model, _vectors(held_rows), held_speed, held_groups)
    assert accuracy[True] > 0.9 and accuracy[True] > accuracy[False] + 0.03, accuracy


def test_per_store_score_and_gradient_are_the_nets_and_autograds():
    rows, speed = _programs(40, seed=2)
    rows[0] = np.ones((STORE_SLOTS + 3, 3))  # more stores than slots: the last slot sums the rest
    rows[1] = rows[1][:1]
    x = _vectors(rows)
    model = MLPCostModel(num_features=x.shape[1], hidden=32, seed=1)
    model.update(x, speed, ["t"] * len(x), epochs=3)
    scores, grad = model.score_and_gradient(x)
    np.testing.assert_allclose(scores, model.predict(x), rtol=1e-5, atol=1e-6)
    feats = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    model.net(feats).sum().backward()
    expected = torch.nan_to_num(feats.grad).numpy()
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-6)
    assert np.isfinite(grad).all() and np.abs(grad[:, 6:]).sum() > 0
    assert np.all(grad[:, :6] == 0)  # the aggregate part is not read
    assert np.all(grad[1, 9:] == 0) and np.abs(grad[1, 6:9]).sum() > 0  # nor the slots of stores a program lacks


@pytest.mark.parametrize("path", sorted(mlp_model.PRETRAINED.parent.glob("*.npz")), ids=lambda p: p.name)
def test_pretrained_weights_load_with_their_provenance(path):
    model = MLPCostModel()
    model.load(path)
    assert model.fitted and model.hidden == 256
    x = np.random.default_rng(0).normal(size=(4, NUM_FEATURES))  # program vectors, whichever part the model reads
    x[0] = np.nan
    assert model.predict(x).shape == (4,) and np.isfinite(model.predict(x)).all()
    provenance = json.loads(path.with_suffix(".json").read_text())
    assert provenance["programs"] > 0 and provenance["validation"]["pairwise_accuracy"] > 0.5
    assert mlp_model.PRETRAINED.exists()  # the weights for CPUs without their own


def test_pretrained_weights_are_those_of_the_programs_isa_where_they_ship(tmp_path, monkeypatch):
    general = tmp_path / "mlp_cost_model.npz"
    monkeypatch.setattr(mlp_model, "PRETRAINED", general)
    MLPCostModel(seed=1).save(general)
    own = MLPCostModel(seed=2)
    own.update(np.random.default_rng(0).normal(size=(8, NUM_FEATURES)), np.linspace(0.1, 1, 8), ["t"] * 8, epochs=1)
    own.save(tmp_path / "mlp_cost_model.avx512.npz")
    assert mlp_model.pretrained_path("avx512") == tmp_path / "mlp_cost_model.avx512.npz"
    assert mlp_model.pretrained_path("avx2") == general
    assert MLPCostModel.pretrained("avx512").fitted and not MLPCostModel.pretrained("avx2").fitted


def test_missing_pretrained_weights_give_a_fresh_model(tmp_path, monkeypatch):
    monkeypatch.setattr(mlp_model, "PRETRAINED", tmp_path / "none.npz")
    with pytest.warns(UserWarning, match="no pretrained cost model"):
        model = MLPCostModel.pretrained()
    assert not model.fitted and model.predict(np.zeros((2, NUM_FEATURES))).shape == (2,)


def test_dataset_cli_generates_resumes_and_trains(tmp_path, capsys):
    db, out = tmp_path / "data.db", tmp_path / "model" / "mlp.npz"
    generate = ["generate", "--db", str(db), "--minutes", "1", "--per-task", "5", "--suite", "small",
                "--no-progress"]
    dataset.main(generate)
    with sqlite3.connect(db) as con:
        origins = [json.loads(o) for (o,) in con.execute("SELECT origin FROM records")]
    tasks = len(dataset.suite_tasks("small"))
    assert len(origins) == 5 * tasks
    assert sum(o["policy"] == "default" for o in origins) == tasks
    dataset.main(generate)  # every task already has its programs: nothing is measured again
    assert "measured 0 programs" in capsys.readouterr().out

    tasks_of_suite = dataset.suite_tasks("small")
    one, two = (dataset.load_dataset(db, tasks_of_suite, workers=w) for w in (1, 2))
    assert np.array_equal(one.x, two.x, equal_nan=True) and np.array_equal(one.throughput, two.throughput)
    assert list(one.groups) == list(two.groups) and one.without_features == two.without_features

    dataset.main(["train", "--db", str(db), "--out", str(out), "--epochs", "2", "--suite", "small"])
    provenance = json.loads(out.with_suffix(".json").read_text())
    assert provenance["programs"] == 5 * tasks and provenance["tasks"] == tasks
    # validated on a held-out model, none of whose tasks it trained on
    assert len(provenance["held_out_models"]) == 1 and provenance["validation_tasks"] >= 1
    assert provenance["train_programs"] + provenance["validation_programs"] == 5 * tasks
    assert set(provenance["validation"]) >= {"pairwise_accuracy", "top1_recall", "top5_recall"}
    model = MLPCostModel()
    model.load(out)
    assert model.fitted and model.num_features == NUM_FEATURES and model.per_store

    capsys.readouterr()
    dataset.main(["retest", "--db", str(db), "--suite", "small", "--tasks", "2"])
    again = json.loads(capsys.readouterr().out)
    # two tasks' recorded programs timed again, each task's pairs compared with the recorded order; a program
    # whose new timing failed (the machine's load, a worker killed) compares nothing and is counted by kind
    with dataset.Database(db) as records:  # each valid recorded program of the two tasks compared, or failed now
        valid = sum(r.valid for t in tasks_of_suite for r in records.records(t.key))
    assert again["tasks"] == 2 and valid >= 8, again
    assert again["programs"] + sum(again["failed"].values()) == valid, again
    assert len(again["failures"]) == min(5, sum(again["failed"].values()))
    if again["failed"]:  # shown in the run's warnings, so that what failed under the load of the day is known
        warnings.warn(f"retest: measurements failed: {again['failures']}")
    assert 0 < again["pairs"] <= 2 * math.comb(5, 2)
    assert 0 <= again["agreement"] <= 1 and sum(again["pairs_within_spread"].values()) == again["pairs"]
    assert again["ceiling"] >= again["agreement"]
    with sqlite3.connect(db) as con:  # nothing written
        assert con.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 5 * tasks
    with pytest.raises(ValueError, match="run `generate` first"):
        dataset.retest(tmp_path / "empty.db", suite="small")


def test_generate_keeps_to_the_models_named(tmp_path):
    db = tmp_path / "data.db"
    suite = dataset.load_suite("small")
    model = "dense_16x32x24"
    dataset.generate(db, 1, per_task=2, suite="small", progress=False, models={model})
    with dataset.Database(db) as records:
        measured = {t.key for t in suite.tasks if records.records(t.key)}
    assert measured and measured == {t.key for t in suite.tasks if model in suite.models[t.key]}
    with pytest.raises(ValueError, match=r"\['resnet'\] are not in the suite"):
        dataset.generate(db, 1, suite="small", progress=False, models={"resnet"})


def test_retest_record_times_the_programs_timed_once_and_keeps_the_least(tmp_path):
    db = tmp_path / "data.db"
    model = "dense_16x32x24"
    dataset.generate(db, 1, per_task=4, suite="small", progress=False, models={model})
    with dataset.Database(db) as records:
        before = {t.key: records.records(t.key) for t in dataset.load_suite("small").tasks}
    first = dataset.retest(db, suite="small", min_programs=2, models={model}, record=True)
    with dataset.Database(db) as records:
        after = {k: records.records(k) for k in before}
    timed = {k for k, recs in before.items() if sum(r.valid for r in recs) >= 2}
    assert timed and first["tasks"] == len(timed)
    for key, recs in after.items():  # each program of a retested task timed once more, tagged as a re-timing
        new = recs[len(before[key]):]
        assert len(new) == (sum(r.valid for r in before[key]) if key in timed else 0)
        assert all(json.loads(r.origin)["policy"] == "retest" for r in new)
    task = next(t for t in dataset.load_suite("small").tasks if t.key in timed)
    space = dataset.TaskSpace(task)
    least = dataset._recorded_latencies(space, after[task.key])
    for c, latency in least.items():  # the label is the least of the program's timings
        if math.isinf(latency):  # a failed program is not timed again
            continue
        mine = [r.latency for r in after[task.key] if space.from_origin(r.origin) == c]
        assert len(mine) == 2 and latency == min(mine)
    again = dataset.retest(db, suite="small", min_programs=2, models={model}, record=True)
    assert again["tasks"] == 0  # resumable: every program is timed twice now
    with pytest.raises(ValueError, match=r"\['resnet'\] are not in the suite"):
        dataset.retest(db, suite="small", models={"resnet"})


def test_the_ceiling_bounds_a_perfect_models_agreement_with_one_noisy_timing():
    rng = np.random.default_rng(0)
    for noise in (0.3, 1.0, 2.0):
        truth = rng.normal(size=400)  # a perfect model's scores; two timings of the same programs, noisy alike
        first, second = truth + noise * rng.normal(size=400), truth + noise * rng.normal(size=400)
        agreement = np.divide(*pair_counts(first, second))
        perfect = np.divide(*pair_counts(truth, first))
        assert agreement + 0.02 < perfect <= dataset.accuracy_ceiling(agreement)
    flips = rng.random((2, 20000)) < 0.1  # every pair equally hard: each timing flips a tenth of them
    agreement = np.mean(flips[0] == flips[1])
    assert dataset.accuracy_ceiling(agreement) == pytest.approx(0.9, abs=0.01)
    assert dataset.accuracy_ceiling(1.0) == 1.0 and dataset.accuracy_ceiling(0.5) == 0.5
    assert dataset.accuracy_ceiling(None) is None


def test_failed_measurements_are_counted_by_kind_with_the_first_errors():
    from tilegrad.tune.measure import MeasureResult

    task = dataset.suite_tasks("small")[0]
    failures = dataset._Failures()
    failures.note(task, [MeasureResult((1e-3,)), MeasureResult((), "timeout", "timeout after 10 s")])
    failures.note(task, [MeasureResult((), "crash", "worker crashed: SIGSEGV\n  tail")] * 6)
    assert failures.counts == {"timeout": 1, "crash": 6}
    assert len(failures.examples) == failures.EXAMPLES
    assert failures.examples[0] == f"{task.name}: timeout: timeout after 10 s"
    assert str(failures).splitlines()[0] == "failed measurements: 6 crash, 1 timeout"


def test_a_suite_keeps_its_tasks_without_their_large_weights():
    """A suite of whole models keeps one node per task and no large weight (zeros that take no memory); the
    task's workload, and so its key and computation, is the same."""
    suite = dataset.Suite([], {}, 0, {})
    module, inputs = dataset._dense(16, 256, 512).example()
    from tilegrad.tune.model import model_graph
    from tilegrad.tune.task import extract_tasks

    task = extract_tasks(model_graph(module, example_inputs=inputs))[0]
    slim = dataset._restored(dataset._slim(task))
    weights = [v for v in slim.node.inputs if v.data is not None and v.data.size > 1000]
    assert weights and all(v.data.strides == (0,) * v.data.ndim for v in weights)
    assert slim.key == task.key and [t.shape for t in slim.compute()[1]] == [t.shape for t in task.compute()[1]]
    assert suite.model_names() == set()


def test_held_out_models_are_seeded_and_take_every_task_of_theirs():
    suite = dataset.Suite([], {"a": {"m1"}, "b": {"m1", "m2"}, "c": {"m3"}}, 3, {})
    assert dataset.held_out_models(suite, 0.3, seed=1) == dataset.held_out_models(suite, 0.3, seed=1)
    assert len(dataset.held_out_models(suite, 0.3)) == 1 and len(dataset.held_out_models(suite, 0.9)) == 3


def test_zoo_inputs_at_their_second_shape():
    ids, image = torch.zeros(1, 128, dtype=torch.long), torch.zeros(1, 3, 8, 8)
    assert dataset._resized((ids,))[0].shape == (1, dataset.ZOO_SEQUENCE)
    assert dataset._resized((image,))[0].shape == (dataset.ZOO_BATCH, 3, 8, 8)
    assert dataset._resized((ids[:, :8],)) is None  # already short: no second shape


def test_roofline_labels_are_the_speeds_given_and_survive_saving(tmp_path):
    """A "roofline" model learns the speeds it is given (fractions of the roofline, comparable across tasks),
    not each task's speeds over its best: two tasks at different fractions keep their difference."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 320))
    speed = np.where(x[:, 0] > 0, 0.8, 0.1)  # task "a" near the roofline, task "b" far from it
    groups = np.where(x[:, 0] > 0, "a", "b")
    model = MLPCostModel(label="roofline", num_features=320, per_store=False)
    model.update(x, speed, groups, epochs=60)
    scores = model.predict(x)
    assert scores[groups == "a"].mean() > scores[groups == "b"].mean() + 0.3
    model.save(tmp_path / "m.npz")
    again = MLPCostModel()
    again.load(tmp_path / "m.npz")
    assert again.label == "roofline"
    np.testing.assert_allclose(again.predict(x), scores, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="label must be one of task, roofline"):
        MLPCostModel(label="other")


def test_a_tasks_roofline_is_its_flops_or_its_bytes_at_the_peaks():
    module, inputs = dataset._dense(64, 256, 512).example()
    from tilegrad.tune.model import model_graph
    from tilegrad.tune.task import extract_tasks

    (task,) = extract_tasks(model_graph(module, example_inputs=inputs))
    bytes_ = 4 * (64 * 256 + 256 * 512 + 512 + 64 * 512)  # input, weight, bias, output
    assert task.min_bytes == bytes_ and task.flops >= 2 * 64 * 256 * 512
    assert task.roofline_s(1.0, 1e9) == pytest.approx(task.flops / 1e9)  # a slow FMA unit: compute bound
    assert task.roofline_s(1e9, 1.0) == pytest.approx(bytes_ / 1e9)  # a slow memory: bandwidth bound


@pytest.mark.measures_peaks  # fakes the measurement itself, and reads what it cached
def test_tuning_labels_need_no_measurement_of_the_machine(tmp_path, monkeypatch):
    """Without cached peaks, a model ranking within tasks learns from FLOP/s and nothing is measured (a busy
    machine refuses the measurement: CI's first tuning test once failed on it); a "roofline" model measures them,
    and cached peaks turn every label into a fraction of the roofline."""
    from tilegrad import config
    from tilegrad.runtime import peaks as peaks_module
    from tilegrad.tune.cost_model.model import labelling_peaks, speed_of

    module, inputs = dataset._dense(64, 256, 512).example()
    from tilegrad.tune.model import model_graph
    from tilegrad.tune.task import extract_tasks

    (task,) = extract_tasks(model_graph(module, example_inputs=inputs))
    fake = peaks_module.MachinePeaks("cpu", "isa", 1, 100.0, 10.0, 3.0, 2.0, "now", "test")
    measured = []
    monkeypatch.setattr(peaks_module, "_measure", lambda *a: measured.append(a) or fake)
    with config.override(cache_dir=tmp_path):
        assert labelling_peaks(MLPCostModel()) is None and not measured
        assert speed_of(task, np.array([1e-3]))[0] == pytest.approx(task.flops / 1e-3)
        assert labelling_peaks(MLPCostModel(label="roofline")) == fake and len(measured) == 1
        assert labelling_peaks(MLPCostModel()) == fake and len(measured) == 1  # cached by then
    assert speed_of(task, np.array([1e-3, np.inf]), fake).tolist() == [task.roofline_s(100.0, 10.0) / 1e-3, 0.0]
