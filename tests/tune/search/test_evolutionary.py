"""The evolutionary search proposes valid, unmeasured candidates, and a round derives the features of at most
`new_structures` structures it has not seen (a LayerNorm kernel has thousands)."""

import torch
from torch import nn

from tilegrad.tune.cost_model.trees import TreeCostModel
from tilegrad.tune.model import model_graph
from tilegrad.tune.search.evolutionary import EvolutionaryPolicy, EvolutionarySearch
from tilegrad.tune.search.space import TaskSpace
from tilegrad.tune.task import extract_tasks


def _layer_norm_space() -> TaskSpace:
    model = nn.LayerNorm(768).eval()
    tasks = extract_tasks(model_graph(model, example_inputs=(torch.randn(4, 768),)))
    task = max(tasks, key=lambda t: t.flops)
    return TaskSpace(task)


def test_a_round_admits_a_bounded_number_of_new_structures():
    space = _layer_norm_space()
    options = EvolutionaryPolicy(population=128, generations=2, measure_per_round=8, new_structures=3)
    search = EvolutionarySearch(space, TreeCostModel(), options, seed=0)
    measured = set()
    for round_ in range(1, 3):
        batch = search.propose(measured, [], 8)
        assert batch and all(space.valid(c) for c in batch) and not set(batch) & measured
        measured |= set(batch)
        scored_structures = len(search.known)
        assert scored_structures <= 3 * round_ + 1, scored_structures  # and the default point's, always admitted
    # no random picks are needed to fill a batch this small: every candidate is of an admitted structure
    assert all(space.structure_key(c) in set(search.known) for c in batch)
