"""Mixture of experts: top-1/top-2 routing with capacity, and experts one per gloo process behind two AllToAlls
giving the single-process MoE's outputs and gradients on 2 and 4 processes."""

import pytest
import torch
from torch import nn

from tilegrad.errors import TilegradError
from tilegrad.parallel.launch import run_workers
from tilegrad.parallel.moe import DistributedMoE, MoE, route

FEATURES, TOKENS, CAPACITY = 5, 6, 2


def test_top1_routing_seats_tokens_in_order_and_drops_past_capacity():
    logits = torch.tensor([[2.0, 0.0], [3.0, 0.0], [4.0, 0.0], [0.0, 1.0]])
    r = route(logits, k=1, capacity=2)
    assert r.dispatch[:, 0].tolist() == [[1, 0], [0, 1], [0, 0], [0, 0]]  # token 2 finds expert 0 full
    assert r.dispatch[:, 1].tolist() == [[0, 0], [0, 0], [0, 0], [1, 0]]
    torch.testing.assert_close(r.combine.sum(dim=(1, 2)), logits.softmax(-1).max(-1).values * torch.tensor(
        [1.0, 1.0, 0.0, 1.0]))


def test_top2_routing_seats_first_choices_before_second_choices_with_normalised_weights():
    logits = torch.tensor([[3.0, 2.0, 0.0], [2.0, 3.0, 0.0], [0.0, 2.0, 3.0]])
    r = route(logits, k=2, capacity=2)
    # First choices seat tokens 0, 1, 2 on experts 0, 1, 2; then second choices: token 0 takes expert 1's second
    # slot, token 1 expert 0's, and token 2 finds expert 1 full.
    assert r.dispatch[:, 1].tolist() == [[0, 1], [1, 0], [0, 0]]
    assert r.dispatch[:, 0].tolist() == [[1, 0], [0, 1], [0, 0]]
    assert r.dispatch[:, 2].tolist() == [[0, 0], [0, 0], [1, 0]]
    torch.testing.assert_close(r.combine.sum(dim=(1, 2))[:2], torch.ones(2))  # both choices kept: weights sum to 1
    assert r.combine[2].sum() < 1  # token 2 lost its second expert


def test_routing_rejects_bad_k_and_capacity():
    with pytest.raises(TilegradError, match="k=3"):
        route(torch.zeros(4, 4), k=3, capacity=2)
    with pytest.raises(TilegradError, match="capacity=0"):
        route(torch.zeros(4, 4), k=1, capacity=0)


def _parts(num_experts):
    torch.manual_seed(0)
    gate = nn.Linear(FEATURES, num_experts)
    experts = [nn.Sequential(nn.Linear(FEATURES, 8), nn.Tanh(), nn.Linear(8, FEATURES)) for _ in range(num_experts)]
    g = torch.Generator().manual_seed(3)
    tokens = torch.randn(num_experts, TOKENS, FEATURES, generator=g)  # rank r's tokens are tokens[r]
    weights = torch.randn(num_experts, TOKENS, FEATURES, generator=g)  # loss = sum(out * weights)
    return gate, experts, tokens, weights


def _moe_worker(rank, world_size):
    out = {}
    for k in (1, 2):
        gate, experts, tokens, weights = _parts(world_size)
        moe = DistributedMoE(gate, experts[rank], k=k, capacity=CAPACITY)
        x = tokens[rank].clone().requires_grad_()
        y = moe(x)
        (y * weights[rank]).sum().backward()
        out[k] = {"y": y.detach().numpy(), "x.grad": x.grad.numpy(),
                  **{f"gate.{n}": p.grad.numpy() for n, p in gate.named_parameters()},
                  **{f"experts.{rank}.{n}": p.grad.numpy() for n, p in experts[rank].named_parameters()}}
    return out  # NumPy, not tensors: a tensor crosses the result queue by shared memory its exiting sender frees


def _single_process(world_size, k):
    gate, experts, tokens, weights = _parts(world_size)
    moe = MoE(gate, experts, k=k, capacity=CAPACITY)
    x = tokens.clone().requires_grad_()
    ys = [moe(x[r]) for r in range(world_size)]  # capacity is per expert per rank: route each rank's tokens alone
    sum((y * w).sum() for y, w in zip(ys, weights)).backward()
    return ys, x.grad, dict(moe.named_parameters())


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed launch at a time under xdist
@pytest.mark.parametrize("world_size", [2, 4])
def test_distributed_moe_matches_single_process_outputs_and_gradients(world_size):
    results = run_workers(_moe_worker, world_size, timeout_s=120)
    for k in (1, 2):
        ys, x_grad, params = _single_process(world_size, k)
        close = {"atol": 1e-5, "rtol": 1e-5}
        for rank, r in enumerate(results):
            torch.testing.assert_close(torch.from_numpy(r[k]["y"]), ys[rank].detach(), **close)
            torch.testing.assert_close(torch.from_numpy(r[k]["x.grad"]), x_grad[rank], **close)
            for n, p in params.items():
                if n.startswith(f"experts.{rank}."):
                    torch.testing.assert_close(torch.from_numpy(r[k][n]), p.grad, **close, msg=f"k={k}: {n}")
        for n in ("gate.weight", "gate.bias"):  # replicated: each rank's share from its tokens adds up
            summed = sum(torch.from_numpy(r[k][n]) for r in results)
            torch.testing.assert_close(summed, params[n].grad, **close, msg=f"k={k}: {n}")
            assert params[n].grad.abs().sum() > 0

