"""Redistribution on torch.distributed (gloo): sampled pairs of layouts on 2 and 4 processes give each rank its
serial block, and gradients through the collectives are the adjoints (the sum of every rank's gradient equals the
serial one)."""

import itertools

import numpy as np
import pytest
import torch

from tilegrad.parallel.collectives import Groups, redistribute
from tilegrad.parallel.launch import run_workers
from tilegrad.parallel.layout import Layout, all_layouts, shard
from tilegrad.parallel.redistribution import all_groups, plan

SHAPE = (4, 8, 4)


def _pairs(devices):
    layouts = all_layouts(SHAPE, devices)
    partial = [Layout(lay.device_matrix, lay.tensor_map, (a,)) for lay in layouts[:6]
               for a in range(len(lay.device_matrix)) if all(a not in ax for ax in lay.tensor_map)][:4]
    pairs = list(itertools.product(layouts + partial, layouts))
    rng = np.random.default_rng(devices)
    return [pairs[i] for i in rng.choice(len(pairs), size=min(40, len(pairs)), replace=False)]


def _redistribute_pairs(rank, world, pairs):
    x = torch.arange(float(np.prod(SHAPE))).reshape(SHAPE)
    weight = torch.linspace(-1, 1, x.numel()).reshape(SHAPE)
    out, made = [], {}
    for source, target in pairs:
        matrix = plan(source, target).device_matrix
        groups = made.setdefault(matrix, Groups(matrix))
        block = shard(x, Layout(source.device_matrix, source.tensor_map))[rank].clone()
        if source.partial:  # the first rank of each partial group holds the value, the others zeros
            lead = {g[0] for g in all_groups(source.canonical().device_matrix, source.canonical().partial)}
            block = block if rank in lead else torch.zeros_like(block)
        block.requires_grad_(True)
        got = redistribute(plan(source, target), block, groups)
        (got * shard(weight, target)[rank]).sum().backward()
        out.append((got.detach().numpy(), block.grad.numpy()))
    return out


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed launch at a time under xdist
@pytest.mark.parametrize("world", [2, 4])
def test_redistribution_on_gloo_matches_the_serial_blocks_and_its_adjoint(world):
    pairs = _pairs(world)
    results = run_workers(_redistribute_pairs, world, pairs, timeout_s=120)
    x = np.arange(float(np.prod(SHAPE))).reshape(SHAPE)
    weight = np.linspace(-1, 1, x.size).reshape(SHAPE)
    for i, (source, target) in enumerate(pairs):
        for rank in range(world):
            np.testing.assert_array_equal(results[rank][i][0], shard(x, target)[rank], err_msg=f"{source}->{target}")
        # the gradients of all copies of an element add up to d(sum of rank losses)/d(element): the weight,
        # counted once per target replica and, for partial sums, once per holder
        whole = Layout(source.device_matrix, source.tensor_map)
        total = np.zeros(SHAPE)
        for rank in range(world):
            total[whole.local_index(SHAPE, rank)] += results[rank][i][1]
        holders = np.prod([source.device_matrix[a] for a in source.partial])
        want = weight * target.replication * holders
        np.testing.assert_allclose(total, want, atol=1e-5, err_msg=f"grad {source}->{target}")
