"""Both search policies on a GPU task: the task space holds the GPU sketch, its features carry the GPU columns,
the gradient search proposes valid GPU candidates and Adam raises the model's score, as on the CPU."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from tilegrad.target import GPUS
from tilegrad.tune.cost_model.mlp import MLPCostModel
from tilegrad.tune.features.extract import aggregate_part, feature_count
from tilegrad.tune.model import model_graph
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy
from tilegrad.tune.search.gradient import GradientPolicy, GradientSearch
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.task import extract_tasks

H100 = GPUS["sm_90"]


@pytest.fixture(scope="module")
def gpu_matmul_space():
    class MatMul(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64, 48))

        def forward(self, x):
            return x @ self.w

    torch.manual_seed(0)
    graph = model_graph(MatMul().eval(), example_inputs=(torch.randn(32, 64),), target=H100)
    (task,) = extract_tasks(graph, H100)
    return TaskSpace(task)


def test_a_gpu_task_space_has_the_gpu_sketch_and_features(gpu_matmul_space):
    space = gpu_matmul_space
    assert [s.name for s in space.sketches] == ["default", "gpu_tiling"]
    rng = random.Random(0)
    candidates = [space.default()] + [space.sample(rng) for _ in range(8)]
    x = space.features(candidates)
    assert x.shape == (9, feature_count(True)) and np.isfinite(aggregate_part(x)).all()


def test_gradient_search_proposes_valid_gpu_candidates_and_raises_the_score(gpu_matmul_space):
    space = gpu_matmul_space
    model = MLPCostModel(num_features=space.num_features, seed=1)
    search = GradientSearch(space, model, GradientPolicy(seeds=6, steps=120, best_seeds=0, first_measure=8), seed=0)
    first = search.propose(set(), [], 8)  # from the hand-written point alone
    proposed = search.propose(set(first), first[:1], 8)  # and from random seeds of every sketch
    assert len(set(first)) == len(set(proposed)) == 8 and all(space.valid(c) for c in first + proposed)
    assert any(space.sketches[c.sketch].name == "gpu_tiling" for c in proposed)
    seeds = [s for s in search._sample_seeds(6) if space.sketches[s.sketch].name == "gpu_tiling"]
    assert seeds
    key = space.structure_key(seeds[0])
    group = [s for s in seeds if space.structure_key(s) == key]
    before = model.predict(space.features(group)).max()
    descended = search._descend({key: group})
    assert all(space.valid(c) for c in descended)
    assert model.predict(space.features(descended)).max() > before


def test_evolutionary_search_proposes_valid_gpu_candidates(gpu_matmul_space):
    space = gpu_matmul_space
    model = MLPCostModel(num_features=space.num_features, seed=1)
    search = EvolutionaryPolicy().for_task(space, model, 0)
    proposed = search.propose(set(), [], 8)
    assert proposed and all(space.valid(c) for c in proposed)


def test_the_box_penalises_points_past_the_targets_thread_limit(gpu_matmul_space):
    from tilegrad.tune.search.gradient import ParameterBox

    space = gpu_matmul_space
    index = [s.name for s in space.sketches].index("gpu_tiling")
    sketch = space.sketches[index]
    _, params_space = sketch.space({})
    names = tuple(v for t in params_space.tilings for v in t.vars) + tuple(c.var for c in params_space.choices)
    box = ParameterBox(params_space, names)
    assert params_space.limits and box._limit_rows.shape[0] == len(params_space.limits)
    inside = {v: 1 for v in names} | {c.var: c.values[0] for c in params_space.choices}
    value, _ = box.penalty(box.encode([inside]))
    assert value[0] == 0
    spatial = [t for t in params_space.tilings if len(t.vars) == 3]
    crowded = dict(inside) | {t.vars[0]: t.extent for t in spatial}  # every element its own thread
    small = dataclasses.replace(H100, max_threads_per_block=32)
    limited = TaskSpace(dataclasses.replace(space.task, target=small))
    _, limited_space = limited.sketches[index].space({})
    box = ParameterBox(limited_space, names)
    value, grad = box.penalty(box.encode([crowded]))
    assert value[0] > 0
    assert all(grad[0, names.index(t.vars[0])] > 0 for t in spatial)  # descent shrinks the thread tiles
