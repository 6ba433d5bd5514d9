"""A task's search space scores real candidates: the features of every sketch of a convolution block's tasks are
derived (finite)."""

import random

import numpy as np
import torch
from torch import nn

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
            assert np.isfinite(f).all(), f"{task.name}, sketch {space.sketches[c.sketch].name}: unknown features"
