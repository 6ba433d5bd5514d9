"""The tree cost model learns to rank a task's candidates, survives odd data and round-trips through a file.

The learning test uses an analytical machine instead of real measurements: the latency of a cache-tiled matmul
(tiles tm x tn x tk, a vector width, an unroll budget, which tile loops run in parallel) from a compute term
(vector lanes, unroll, parallel speed-up with load imbalance), a memory term (traffic set by the tile sizes,
bandwidth set by the tile footprint against L1/L2), loop overhead and 5 % log-normal noise. The features are what
`features.py` gives a real program, in miniature: log-scaled extents, trip counts, footprint and traffic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tilegrad.errors import TilegradError
from tilegrad.tune.cost_model import COST_MODELS, make_cost_model, register_cost_model
from tilegrad.tune.cost_model.model import throughput_of
from tilegrad.tune.cost_model.trees import RELEVANCE_LEVELS, TreeCostModel, ranking_accuracy, relevance, top_k_recall
from tilegrad.tune.features.extract import STORE_SLOTS

CORES, L1, L2, VECTOR = 8, 32 * 1024, 1024 * 1024, 8
PEAK = 2 * VECTOR * 2 * 3e9  # flop/s per core: 2 FMA units x 8 lanes x 2 flops x 3 GHz
SHAPES = [(256, 256, 256), (512, 128, 1024), (64, 1024, 512), (384, 768, 128), (1024, 64, 256), (128, 192, 2048)]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _candidates(shape, n: int, rng: np.random.Generator) -> list[dict]:
    m, nn, k = shape
    out = []
    for _ in range(n):
        tn = int(rng.choice(_divisors(nn)))
        out.append({
            "tm": int(rng.choice(_divisors(m))),
            "tn": tn,
            "tk": int(rng.choice(_divisors(k))),
            "vec": int(rng.choice([v for v in (1, 4, 8, 16) if tn % v == 0])),
            "unroll": int(rng.choice([0, 16, 64])),
            "par": int(rng.integers(0, 3)),  # parallel loops: none, the m tiles, the fused m and n tiles
        })
    return out


def _tiling(shape, c: dict) -> tuple[int, int, int, int, int, int]:
    m, n, k = shape
    tiles_m, tiles_n, tiles_k = m // c["tm"], n // c["tn"], k // c["tk"]
    parallel_tiles = (1, tiles_m, tiles_m * tiles_n)[c["par"]]
    footprint = 4 * (c["tm"] * c["tk"] + c["tk"] * c["tn"] + c["tm"] * c["tn"])
    traffic = 4 * (m * k * tiles_n + k * n * tiles_m + 2 * m * n * tiles_k)
    return tiles_m, tiles_n, tiles_k, parallel_tiles, footprint, traffic


def _latency(shape, c: dict, rng: np.random.Generator) -> float:
    tiles_m, tiles_n, tiles_k, parallel_tiles, footprint, traffic = _tiling(shape, c)
    lanes = min(c["vec"], VECTOR) / VECTOR * (0.85 if c["vec"] > VECTOR else 1.0)
    ilp = {0: 0.6, 16: 1.0, 64: 0.85}[c["unroll"]]
    threads = min(CORES, parallel_tiles)
    speedup = parallel_tiles / math.ceil(parallel_tiles / CORES)
    compute = 2 * math.prod(shape) / (PEAK * lanes * ilp * speedup)
    bandwidth = 100e9 if footprint <= L1 else 40e9 if footprint <= L2 else 12e9 * (L2 / footprint) ** 0.5
    memory = traffic / (bandwidth * min(threads, 4))
    overhead = 15e-9 * tiles_m * tiles_n * tiles_k / threads + (4e-6 if c["par"] else 0.0)
    return (max(compute, memory) + 0.3 * min(compute, memory) + overhead) * rng.lognormal(0.0, 0.05)


def _features(shape, c: dict) -> np.ndarray:
    m, n, k = shape
    tiles_m, tiles_n, tiles_k, parallel_tiles, footprint, traffic = _tiling(shape, c)
    flops = 2 * m * n * k
    raw = [m, n, k, flops, c["tm"], c["tn"], c["tk"], c["vec"], c["unroll"], c["par"] == 0, c["par"] == 1,
           c["par"] == 2, tiles_m, tiles_n, tiles_k, parallel_tiles, tiles_m * tiles_n * tiles_k, footprint,
           traffic, c["tn"] // c["vec"], flops / traffic]
    return np.log2(1.0 + np.asarray(raw, dtype=np.float64))


def _benchmark(rows_per_task: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(features, throughput in flop/s, task keys) of random candidates of every shape on the analytical machine."""
    rng = np.random.default_rng(seed)
    x, tp, groups = [], [], []
    for shape in SHAPES:
        for c in _candidates(shape, rows_per_task, rng):
            x.append(_features(shape, c))
            tp.append(2 * math.prod(shape) / _latency(shape, c, rng))
            groups.append("matmul_{}x{}x{}".format(*shape))
    return np.array(x), np.array(tp), groups


def _accuracy_after(rows: int, held_out) -> float:
    model = TreeCostModel()
    model.update(*_benchmark(rows // len(SHAPES), seed=rows))
    return ranking_accuracy(model, *held_out)


def test_ranking_accuracy_rises_with_training_data():
    held_out = _benchmark(150, seed=1)
    few, some, many = (_accuracy_after(n, held_out) for n in (32, 128, 512))
    assert few < some < many
    assert many > 0.9
    assert few > 0.6  # even 5 rows per task beat chance


class _Oracle:
    """A 'model' that knows the answer (or its reverse), to check the metrics."""

    def __init__(self, scores):
        self.scores = np.asarray(scores, dtype=np.float64)

    def predict(self, x):
        return self.scores


def test_ranking_accuracy_counts_pairs_within_tasks_only():
    tp = [1.0, 2.0, 3.0, 10.0, 10.0]
    groups = ["a", "a", "a", "b", "b"]  # b's pair has equal throughput: not counted
    x = np.zeros((5, 1))
    assert ranking_accuracy(_Oracle([1, 2, 3, 0, 9]), x, tp, groups) == 1.0
    assert ranking_accuracy(_Oracle([3, 2, 1, 0, 9]), x, tp, groups) == 0.0
    assert ranking_accuracy(_Oracle([1, 1, 3, 0, 0]), x, tp, groups) == pytest.approx(2.5 / 3)  # a tie is half
    assert math.isnan(ranking_accuracy(_Oracle([1, 2]), np.zeros((2, 1)), [5.0, 5.0], ["a", "b"]))


def test_top_k_recall():
    tp = np.array([1.0, 5.0, 3.0, 4.0, 2.0, 7.0])
    groups = ["a"] * 4 + ["b"] * 2
    x = np.zeros((6, 1))
    assert top_k_recall(_Oracle(tp), x, tp, groups, k=2) == 1.0
    assert top_k_recall(_Oracle(-tp), x, tp, groups, k=2) == pytest.approx((0 + 1) / 2)  # b has only 2 rows


def test_failed_measurements_have_zero_throughput():
    np.testing.assert_array_equal(throughput_of([2.0, math.inf, math.nan, 0.0], flops=10.0), [5.0, 0, 0, 0])
    np.testing.assert_array_equal(throughput_of([0.5]), [2.0])


@given(
    tp=st.lists(st.just(0.0) | st.floats(1e-200, 1e6), min_size=1, max_size=30),
    n_groups=st.integers(1, 4),
    scale=st.integers(-20, 20),
)
def test_relevance_is_per_task_and_scale_free(tp, n_groups, scale):
    tp = np.asarray(tp)
    groups = [f"t{i % n_groups}" for i in range(len(tp))]
    levels = relevance(tp, groups)
    assert levels.min() >= 0 and levels.max() <= RELEVANCE_LEVELS
    for key in set(groups):
        rows = np.asarray(groups) == key
        assert levels[rows].max() == (RELEVANCE_LEVELS if tp[rows].max() > 0 else 0)
        assert (levels[rows][tp[rows] == 0] == 0).all()
    scaled = tp * np.where(np.asarray(groups) == "t0", 2.0**scale, 1.0)  # exact: a power of two
    np.testing.assert_array_equal(relevance(scaled, groups), levels)


def test_untrained_model_scores_at_random():
    x = np.random.default_rng(0).normal(size=(50, 7))
    model = TreeCostModel(rng=np.random.default_rng(3))
    scores = model.predict(x)
    assert scores.shape == (50,) and np.isfinite(scores).all() and len(set(scores)) == 50
    assert not model.trained
    np.testing.assert_array_equal(TreeCostModel(rng=np.random.default_rng(3)).predict(x), scores)


def test_update_trains_on_everything_seen():
    x, tp, groups = _benchmark(20, seed=5)
    once = TreeCostModel()
    once.update(x, tp, groups)
    twice = TreeCostModel()
    twice.update(x[:50], tp[:50], groups[:50])
    twice.update(x[50:], tp[50:], groups[50:])
    assert twice.num_rows == len(tp)
    np.testing.assert_array_equal(twice.predict(x), once.predict(x))


def test_odd_data_trains_and_predicts():
    rng = np.random.default_rng(0)
    model = TreeCostModel(num_rounds=20)
    # one row per task, constant features, all-failed tasks: nothing to rank yet, scores stay random
    model.update(np.ones((4, 3)), [1.0, 0.0, 0.0, 2.0], ["a", "b", "b", "c"])
    assert not model.trained
    # a task with two levels, constant and non-finite feature columns, inf/nan throughputs
    x = np.column_stack([np.ones(30), rng.normal(size=30), np.full(30, np.inf)])
    x[::7, 1] = np.nan
    tp = rng.lognormal(size=30)
    tp[::5] = np.inf
    tp[1::5] = np.nan
    model.update(x, tp, ["d"] * 30)
    assert model.trained and model.num_rows == 34
    scores = model.predict(x)
    assert scores.shape == (30,) and np.isfinite(scores).all()


def test_bad_input_says_what_is_wrong():
    model = TreeCostModel()
    model.update(np.zeros((2, 3)), [1.0, 2.0], ["a", "a"])
    with pytest.raises(ValueError, match="3"):
        model.predict(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="one of each"):
        model.update(np.zeros((2, 3)), [1.0], ["a", "a"])


def test_trees_read_the_columns_they_are_given():
    x, tp, groups = _benchmark(20, seed=0)
    wide = np.concatenate([x, np.full((len(x), 5), np.nan)], axis=1)
    model = TreeCostModel(read=lambda m: m[:, :x.shape[1]])
    model.update(wide, tp, groups)
    plain = TreeCostModel()
    plain.update(x, tp, groups)
    assert model.num_features == x.shape[1]
    np.testing.assert_array_equal(model.predict(wide), plain.predict(x))
    program_vectors = make_cost_model("trees")  # the search's trees: the sums and maxes of program vectors
    program_vectors.update(np.ones((2, (2 + STORE_SLOTS) * 4)), [1.0, 2.0], ["a", "a"])
    assert program_vectors.num_features == 8


def test_save_and_load_round_trip(tmp_path):
    x, tp, groups = _benchmark(20, seed=7)
    model = TreeCostModel(num_rounds=50, params={"num_leaves": 15})
    model.update(x, tp, groups)
    model.save(tmp_path / "model.json")
    loaded = TreeCostModel()
    loaded.load(tmp_path / "model.json")
    np.testing.assert_array_equal(loaded.predict(x), model.predict(x))
    assert loaded.num_rounds == 50 and loaded.params["num_leaves"] == 15

    TreeCostModel().save(tmp_path / "untrained.json")
    loaded.load(tmp_path / "untrained.json")
    assert not loaded.trained and loaded.predict(x).shape == (len(x),)

    (tmp_path / "other.json").write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="not a saved TreeCostModel"):
        loaded.load(tmp_path / "other.json")


def test_cost_models_are_made_by_name_and_new_ones_register():
    assert isinstance(make_cost_model("trees"), TreeCostModel)
    model = TreeCostModel(num_rounds=3)
    assert make_cost_model(model) is model
    register_cost_model("tiny-trees", lambda: TreeCostModel(num_rounds=3))
    try:
        assert make_cost_model("tiny-trees").num_rounds == 3
    finally:
        del COST_MODELS["tiny-trees"]
    with pytest.raises(TilegradError, match="unknown cost model 'forest'; available: trees, mlp"):
        make_cost_model("forest")
