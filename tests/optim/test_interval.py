"""SPNGD's adaptive interval: the three branches of the rule, and the refresh steps it gives THOR."""

import torch
import torch.nn.functional as F
from torch import nn

from tilegrad.optim import THOR
from tilegrad.optim.interval import next_interval, similar


def test_similarity_is_a_relative_frobenius_distance():
    y = torch.eye(2)
    assert similar(1.05 * y, y, 0.1) and not similar(1.2 * y, y, 0.1)


def test_the_three_branches():
    a, b, c = (torch.eye(2),), (2 * torch.eye(2),), (1.01 * torch.eye(2),)
    assert next_interval(8, [], a, 0.1) == 8                 # nothing to compare with yet
    assert next_interval(8, [a, b], a, 0.1) == 4             # moved since the last refresh: halve
    assert next_interval(1, [a, b], a, 0.1) == 1             # never below one step
    assert next_interval(8, [b, a], c, 0.1) == 8             # like the last, not the one before: keep
    assert next_interval(8, [a, a], c, 0.1) == 16            # like both: double
    assert next_interval(8, [a], c, 0.1) == 8                # like the only one: keep


def test_settled_layers_refresh_ever_more_rarely():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    opt = THOR(model, lr=1e-6, frequency=1, adaptive_interval=0.05)
    x, y = torch.randn(16, 5), torch.randint(0, 3, (16,))
    for _ in range(10):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    for layer in opt.layers:                                 # refreshes at steps 0, 1, 2, 4, 8
        state = opt.state[layer.weight]
        assert (state["decisions"], state["interval"], state["due"]) == (5, 8, 16)
