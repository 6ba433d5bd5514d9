"""The recompute pass: under a budget it chooses segments that lower the simulated peak activation memory, and the
rewritten model (segments through torch.utils.checkpoint) gives the same outputs and gradients."""

import pytest
import torch
from torch import nn

from tilegrad.errors import MemoryLimitError
from tilegrad.parallel.recompute import (
    apply_recompute,
    plan_recompute,
    profile,
    simulate_peak,
)


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(_Block() for _ in range(4))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(torch.relu(x))


def _traced():
    torch.manual_seed(0)
    return torch.fx.symbolic_trace(_Net())


def _inputs():
    return (torch.randn(32, 16, generator=torch.Generator().manual_seed(1)),)


def _outputs_and_grads(model, x):
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_()
    y = model(x)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return y.detach(), x.grad, {id(p): p.grad for p in model.parameters()}


def _saved_bytes(model, x):
    """Bytes autograd saves for the backward in one forward, parameters excluded: the memory recompute frees."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = set()

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            seen.add((t.data_ptr(), t.nbytes))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x.clone().requires_grad_())
    return sum(b for _, b in seen)


def test_profile_counts_bytes_and_flops_per_node():
    costs = {c.name: c for c in profile(_traced(), *_inputs())}
    fc1 = costs["blocks_0_fc1"]
    assert fc1.bytes == 32 * 64 * 4 and fc1.flops == 2 * 32 * 64 * 16
    assert costs["blocks_0_act"].flops == 32 * 64 and costs["blocks_0_act"].readers == ("blocks_0_fc2",)


def test_memory_model_keeps_what_leaves_a_segment_and_brings_a_segment_back_in_the_backward():
    costs = profile(_traced(), *_inputs())
    everything = simulate_peak(costs, ())
    assert everything == sum(c.bytes for c in costs) == 4 * (8192 + 8192 + 2048 + 2048) + 2048 + 512
    # fc1 and act of block 0: act's output is read by fc2, outside, so only fc1's output is dropped, and it comes
    # back while act's output is still alive.
    assert simulate_peak(costs, (("blocks_0_fc1", "blocks_0_act"),)) == everything - 8192
    # The whole first block: only its residual sum leaves it; when the backward recomputes it, only that sum is
    # kept before it, so the peak is the end of the forward.
    inside = 8192 + 8192 + 2048
    assert simulate_peak(costs, (("blocks_0_fc1", "blocks_0_act", "blocks_0_fc2", "add"),)) == everything - inside
    # The last block's recompute happens while the three blocks before it are kept: that is the peak.
    last = ("blocks_3_fc1", "blocks_3_act", "blocks_3_fc2", "add_3")
    assert simulate_peak(costs, (last,)) == 3 * 20480 + 2048 + inside


@pytest.mark.parametrize("fraction", [0.7, 0.5])
def test_plan_fits_the_budget_and_keeps_numerics(fraction):
    gm, x = _traced(), _inputs()[0]
    before = simulate_peak(profile(gm, x), ())
    budget = int(before * fraction)
    plan = plan_recompute(gm, (x,), budget)
    assert plan.peak_bytes_before == before and plan.peak_bytes_after <= budget
    assert plan.segments and plan.recomputed_flops > 0
    rewritten = apply_recompute(gm, plan)
    calls = [n for n in rewritten.graph.nodes if n.target is torch.utils.checkpoint.checkpoint]
    assert len(calls) == len(plan.segments)
    y0, gx0, grads0 = _outputs_and_grads(gm, x)
    y1, gx1, grads1 = _outputs_and_grads(rewritten, x)
    torch.testing.assert_close(y1, y0, rtol=0, atol=0)
    torch.testing.assert_close(gx1, gx0, rtol=1e-6, atol=1e-6)
    assert grads1.keys() == grads0.keys()  # the rewritten model trains the same parameter objects
    for key, grad in grads1.items():
        torch.testing.assert_close(grad, grads0[key], rtol=1e-6, atol=1e-6)
    assert _saved_bytes(rewritten, x) < _saved_bytes(gm, x)  # autograd really holds less


def test_a_budget_below_what_recompute_reaches_is_an_error():
    with pytest.raises(MemoryLimitError, match="over the budget of 100 bytes"):
        plan_recompute(_traced(), _inputs(), 100)
