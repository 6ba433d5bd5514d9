"""The search starts from the hand-written schedule and moves away from it: a task space's default is the default
sketch's default point (the trace default_schedule gives), records written before the default rules had
parameters still read as it, both policies seed from it and its neighbours, and a short tuning run of a packed
GEMM measures points of the default sketch other than the hand-written one."""

import json
import random
import sqlite3

import numpy as np

from tilegrad.schedule.space import Sketch
from tilegrad.tune.callbacks import default_callbacks
from tilegrad.tune.cost_model.mlp import MLPCostModel
from tilegrad.tune.cost_model.trees import TreeCostModel
from tilegrad.tune.features.extract import aggregate_part
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy, EvolutionarySearch
from tilegrad.tune.search.gradient import GradientPolicy, GradientSearch
from tilegrad.tune.search.space import Candidate, TaskSpace
from tilegrad.tune.tuner import tune_tasks
from tilegrad.tune.tuning_run import TuneOptions


def _default_sketch(space: TaskSpace) -> Sketch:
    return space.sketches[0]


def test_the_default_candidate_is_the_hand_written_schedule(matmul_task):
    task = matmul_task(40, 64, 48)
    space = TaskSpace(task)
    default = space.default()
    assert default.sketch == 0 and default.values == _default_sketch(space).default_params()
    assert {"gemm_mb", "gemm_grain", "gemm_order"} <= set(default.values)
    assert space.valid(default)
    assert space.trace(default).steps == task.default_trace().steps
    assert np.isfinite(aggregate_part(space.features([default]))).all()  # derived (empty slots are NaN)


def test_a_record_of_the_parameterless_default_sketch_reads_as_the_default_point(matmul_task):
    space = TaskSpace(matmul_task(40, 64, 48))
    old = json.dumps({"policy": "default", "sketch": "default", "params": {}})
    assert space.from_origin(old) == space.default()
    assert space.from_origin(space.origin(space.default(), "default")) == space.default()
    moved = space.origin(Candidate.of(0, {**space.default().values, "gemm_mb": 999}), "gradient")
    assert space.from_origin(moved) is None  # not a point of the space


def test_a_record_from_before_a_structural_choice_reads_with_the_choices_first_value(matmul_task):
    """Records of the packed GEMM written before it could read A in place measured A packed: they read with
    `gemm_apack_in_place` 0 (its first value), not the default 1."""
    space = TaskSpace(matmul_task(40, 64, 48))
    default = space.default().values
    assert default["gemm_apack_in_place"] == 1
    before = {k: v for k, v in default.items() if k != "gemm_apack_in_place"}
    read = space.from_origin(json.dumps({"policy": "default", "sketch": "default", "params": before}))
    assert read == Candidate.of(0, {**before, "gemm_apack_in_place": 0}) and space.valid(read)


def test_a_neighbour_of_the_default_changes_one_choice(matmul_task):
    space = TaskSpace(matmul_task(40, 64, 48))
    default = space.default().values
    rng = random.Random(0)
    changed = set()
    for _ in range(40):
        c = space.neighbour(space.default(), rng)
        assert space.valid(c)
        kept = set(default) & set(c.values)  # a structural choice may add or remove the choices after it
        diff = {k for k in kept if default[k] != c.values[k]}
        assert len(diff) <= 1, diff
        changed |= diff
    assert {"gemm_mb", "gemm_order"} <= changed


def test_both_searches_seed_from_the_default_point(matmul_task):
    space = TaskSpace(matmul_task(40, 64, 48))
    gradient = GradientSearch(space, MLPCostModel(), GradientPolicy(seeds=4, steps=5), seed=0)
    assert gradient._default_seeds()[0] == space.default()
    policy = EvolutionaryPolicy(population=40)
    evolutionary = EvolutionarySearch(space, TreeCostModel(), policy, seed=0)
    evolutionary._room = policy.new_structures  # as a round opens, before it seeds its population
    start = evolutionary._default_and_mutations(6)
    assert start[0] == space.default() and len(start) > 1
    assert all(c.sketch == 0 and space.valid(c) for c in start)


def test_a_short_tuning_run_moves_off_the_default_point(matmul_task, tmp_path):
    task = matmul_task(40, 64, 48)
    db = tmp_path / "moves.db"
    tune_tasks([task], db, GradientPolicy(seeds=4, steps=40, measure_per_round=8), TuneOptions(trials=8, confirm=0),
               callbacks=default_callbacks(progress=False))
    with sqlite3.connect(db) as con:
        origins = [json.loads(row[0]) for row in con.execute("SELECT origin FROM records")]
    default = TaskSpace(task).default().values
    searched = [o["params"] for o in origins if o["policy"] == "gradient" and o["sketch"] == "default"]
    assert any(p != default for p in searched), searched
    assert sum(o["policy"] == "default" for o in origins) == 1
