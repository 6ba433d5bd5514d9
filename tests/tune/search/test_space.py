"""A task's search space scores real candidates: the features of every sketch of a convolution block's tasks are
derived (finite)."""

import random

import numpy as np
import torch
from torch import nn

from tilegrad.target import Target
from tilegrad.tune.features.extract import aggregate_part
from tilegrad.tune.model import model_graph
from tilegrad.tune.search.space import Candidate, TaskSpace
from tilegrad.tune.task import extract_tasks


def test_every_sketch_of_a_conv_block_has_finite_features():
    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 8 * 8, 10)).eval()
    tasks = extract_tasks(model_graph(block, example_inputs=(torch.randn(1, 16, 16, 16),)))
    rng = random.Random(0)
    for task in tasks:
        space = TaskSpace(task)
        cands = [Candidate.of(i, sk.sample(rng)) for i, sk in enumerate(space.sketches) for _ in range(2)]
        for c, f in zip(cands, space.features(cands)):
            derived = np.isfinite(aggregate_part(f)).all()  # (the slots of stores a program lacks are NaN)
            assert derived, f"{task.name}, sketch {space.sketches[c.sketch].name}: unknown features"


def test_a_pointwise_convolution_along_its_pixels_has_a_space():
    """With 16 vector registers (AVX2) a 1 x 1 convolution's tiles run along its pixels as one row, cut into rows
    of tiles whose count depends on the column tile, a parameter: the parallel grain reads that extent at the
    parameters' defaults (it asked for an integer, and every such task's space failed to build)."""
    target = Target(flags=frozenset({"avx2", "fma"}), cores=2)  # 8 lanes, 16 registers
    block = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 256, 1), nn.ReLU()).eval()
    graph = model_graph(block, example_inputs=(torch.randn(1, 64, 56, 56),), target=target)
    (task,) = [t for t in extract_tasks(graph, target) if t.name.startswith("conv_nchwc")]
    space = TaskSpace(task)
    default = dict(space.default().params)
    assert [v for k, v in default.items() if k.endswith("_flat")] == [1]
    rng = random.Random(0)
    cands = [space.default()] + [Candidate.of(0, space.sketches[0].sample(rng)) for _ in range(4)]
    assert all(np.isfinite(aggregate_part(f)).all() for f in space.features(cands))
