"""The trace rule's three branches, its presets, the frozen state, THOR_NT and the global frequency."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tilegrad.errors import OptimizerError
from tilegrad.optim import PRESETS, THOR
from tilegrad.optim.trace_rule import (
    Decision,
    damped_trace,
    decide,
    thresholds_of,
    trace_change,
)


def test_the_three_branches_and_their_boundaries():
    w = (0.01, 0.001)
    assert decide(0.5, w) is Decision.UPDATE
    assert decide(0.0100001, w) is Decision.UPDATE
    assert decide(0.01, w) is Decision.REUSE          # [w2, w1] is closed
    assert decide(0.001, w) is Decision.REUSE
    assert decide(0.0009, w) is Decision.FREEZE
    assert decide(0.0, (0.01, 0.0)) is Decision.REUSE  # THOR never freezes: [0, 0) is empty
    assert decide(1e-12, (0.0, 0.0)) is Decision.UPDATE


def test_presets_and_threshold_checks():
    assert PRESETS == {"THOR": (0.01, 0.0), "THOR_stop": (0.01, 0.001), "THOR_NT": (0.0, 0.0)}
    assert thresholds_of("THOR_stop") == (0.01, 0.001)
    with pytest.raises(OptimizerError, match="unknown THOR preset 'THOR_fast'"):
        thresholds_of("THOR_fast")
    with pytest.raises(OptimizerError, match="0 <= w2 <= w1"):
        thresholds_of((0.001, 0.01))


def test_delta_is_the_relative_change_of_the_damped_trace():
    a, g = torch.diag(torch.tensor([1.0, 2.0])), torch.tensor([[3.0]])
    assert damped_trace(a, g, 0.5) == pytest.approx((3.0 + 1.0) * 3.5)
    assert damped_trace(torch.tensor([1.0, 2.0]), g, 0.5) == damped_trace(a, g, 0.5)  # a diagonal A as a vector
    assert trace_change(11.0, 10.0) == pytest.approx(0.1)
    assert trace_change(9.0, 10.0) == pytest.approx(0.1)


def _train(thresholds, steps: int, frequency: int = 1, same_batch: bool = False, lr: float = 0.05) -> THOR:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = THOR(model, lr=lr, damping=0.1, frequency=frequency, thresholds=thresholds)
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    for step in range(steps):
        xb = x if same_batch else torch.randn(32, 6)
        opt.zero_grad()
        F.cross_entropy(model(xb), y).backward()
        opt.step()
    return opt


def test_thor_nt_updates_every_step():
    opt = _train("THOR_NT", steps=6)
    assert [opt.state[layer.weight]["updates"] for layer in opt.layers] == [6, 6]


def test_thor_reuses_inverses_while_the_trace_holds_still():
    # the same batch and a tiny learning rate: after the first update the trace barely moves, so THOR reuses
    opt = _train("THOR", steps=5, same_batch=True, lr=1e-6)
    assert [opt.state[layer.weight]["updates"] for layer in opt.layers] == [1, 1]
    assert [opt.state[layer.weight]["decisions"] for layer in opt.layers] == [5, 5]
    assert not any(opt.state[layer.weight].get("frozen") for layer in opt.layers)


def test_thor_stop_freezes_a_settled_layer_for_good():
    opt = _train("THOR_stop", steps=2, same_batch=True, lr=1e-6)
    states = [opt.state[layer.weight] for layer in opt.layers]
    assert all(s["frozen"] and s["updates"] == 1 and s["decisions"] == 2 for s in states)
    assert opt._collector.collecting == set()            # frozen layers gather no statistics any more
    inverses = [s["a_inv"].clone() for s in states]
    model_input = torch.randn(32, 6) * 10                # the curvature changes a lot, but nothing is refreshed
    model = opt.layers[0].module
    opt.zero_grad()
    nn.Sequential(model, nn.Tanh(), opt.layers[1].module)(model_input).sum().backward()
    opt.step()
    assert all(s["decisions"] == 2 for s in states)
    assert all(torch.equal(s["a_inv"], inv) for s, inv in zip(states, inverses))


def test_the_global_frequency_refreshes_only_every_few_steps():
    opt = _train("THOR_NT", steps=7, frequency=3)
    assert [opt.state[layer.weight]["decisions"] for layer in opt.layers] == [3, 3]   # steps 0, 3, 6
    assert opt._collector.collecting == set()            # step 7 is not a refresh
