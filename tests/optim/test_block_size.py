"""The block-size chooser: its candidates, both curves, their crossing, and what it prints."""

import io

import torch
from torch import nn

from tilegrad.optim import choose_thor_block_size
from tilegrad.optim.block_size import _crossing, candidate_sizes


def test_candidates_follow_the_seed():
    assert candidate_sizes(2048) == [1, 16, 32, 64, 128, 256, 512, 1024, 2048]
    assert candidate_sizes(40) == [1, 16, 32, 40]


def test_the_crossing_is_interpolated_between_candidates():
    # rising 0 -> 1, falling 1 -> 0 over sizes 0 and 100: they cross half way
    assert _crossing([0, 100], [0.0, 1.0], [1.0, 0.0]) == 50.0
    assert _crossing([16, 32, 64], [0.2, 0.4, 0.9], [1.0, 0.8, 0.5]) == 48.0   # gaps -0.4 then +0.4
    assert _crossing([1, 16], [1.0, 1.0], [1.0, 0.5]) == 1.0     # the score already meets the speed


def test_block_size_chooser_prints_and_returns_both_curves():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(40, 20), nn.Tanh(), nn.Linear(20, 5))
    out = io.StringIO()
    choice = choose_thor_block_size(model, torch.randn(64, 40), repeats=2, out=out)
    assert choice.candidates == (1, 16, 32, 40)               # 1, 16, 32, ... below the largest dimension, then it
    assert choice.loss_score[-1] == 1.0                       # unsplit factors lose nothing
    assert list(choice.loss_score) == sorted(choice.loss_score)
    assert choice.speed[0] == 1.0 and all(s > 0 for s in choice.speed)
    assert choice.block_size in choice.candidates
    assert min(choice.candidates) <= choice.crossing <= max(choice.candidates)
    assert "loss score" in out.getvalue() and f"block size {choice.block_size}" in out.getvalue()
    assert all(p.grad is None for p in model.parameters())   # the measurement leaves no gradients behind
