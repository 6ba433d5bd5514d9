"""Optimizer-state sharding: Adam on each rank's slice of the flattened parameters takes the same steps as
torch.optim.Adam on one process, on 2 and 4 gloo processes, with 1/N of the optimizer state per rank."""

import pytest
import torch
from torch import nn

from tilegrad.errors import OptimizerError
from tilegrad.parallel.launch import run_workers
from tilegrad.parallel.zero import ShardedOptimizer, optimizer_state_bytes

STEPS = 4
BATCH = 16
ADAM = {"lr": 0.01, "betas": (0.8, 0.95), "weight_decay": 0.01}


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3))  # 103 parameters: padding is exercised


def _batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH, 6, generator=g), torch.randn(BATCH, 3, generator=g)


def _sharded_worker(rank, world_size):
    model = _model()
    opt = ShardedOptimizer(model.parameters(), torch.optim.Adam, **ADAM)
    per_rank = BATCH // world_size
    trajectory = []
    for step in range(STEPS):
        x, t = _batch(step)
        rows = slice(rank * per_rank, (rank + 1) * per_rank)
        opt.zero_grad()
        nn.functional.mse_loss(model(x[rows]), t[rows]).backward()
        opt.step()
        trajectory.append({n: p.detach().numpy().copy() for n, p in model.named_parameters()})
    return trajectory, opt.state_bytes(), opt.shard_numel


def _single_process():
    model = _model()
    opt = torch.optim.Adam(model.parameters(), **ADAM)
    trajectory = []
    for step in range(STEPS):
        x, t = _batch(step)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), t).backward()
        opt.step()
        trajectory.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return trajectory, optimizer_state_bytes(opt)


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed launch at a time under xdist
@pytest.mark.parametrize("world_size", [2, 4])
def test_sharded_adam_steps_like_torch_adam_with_a_slice_of_the_state(world_size):
    results = run_workers(_sharded_worker, world_size, timeout_s=120)
    ref_trajectory, ref_bytes = _single_process()
    numel = sum(p.numel() for p in _model().parameters())
    for trajectory, state_bytes, shard_numel in results:
        for step, (params, ref) in enumerate(zip(trajectory, ref_trajectory)):
            for n in ref:
                torch.testing.assert_close(torch.from_numpy(params[n]), ref[n], atol=1e-5, rtol=1e-5,
                                           msg=f"step {step}: {n}")
        assert shard_numel == -(-numel // world_size)
        assert state_bytes == 2 * 4 * shard_numel  # two float32 moments of the slice only
    assert ref_bytes == 2 * 4 * numel
    assert sum(r[1] for r in results) - ref_bytes < 2 * 4 * world_size  # only the padding is extra


def test_sharding_rejects_mixed_dtypes_and_no_trainable_parameters():
    # These checks come before any collective, so one process without a group makes them.
    params = [nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(2, dtype=torch.float64))]
    with pytest.raises(OptimizerError, match="several dtypes"):
        ShardedOptimizer(params)
    with pytest.raises(OptimizerError, match="no parameters"):
        ShardedOptimizer([nn.Parameter(torch.zeros(2), requires_grad=False)])
