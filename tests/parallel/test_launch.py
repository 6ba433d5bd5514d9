"""The launcher: N gloo processes in one group, results by rank, a failing worker's error raised in the parent."""

import pytest
import torch
import torch.distributed as dist

from tilegrad.errors import TilegradError
from tilegrad.parallel.launch import run_workers

# Every test launches a torch.distributed group; one launch at a time under xdist.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("distributed")]


def _all_reduce_rank(rank, world_size, scale):
    t = torch.tensor([float(rank) * scale])
    dist.all_reduce(t)
    return rank, world_size, t.item()


def _tensor_of_rank(rank, world_size):
    return torch.full((3,), float(rank))


def _fail_on_one(rank, world_size):
    if rank == 1:
        raise ValueError("rank one refuses")
    return rank


def test_workers_join_one_group_and_return_by_rank():
    assert run_workers(_all_reduce_rank, 3, 2.0) == [(r, 3, 6.0) for r in range(3)]


def test_a_failing_worker_raises_in_the_parent_with_its_traceback():
    with pytest.raises(TilegradError, match="(?s)rank 1 of 2 failed.*rank one refuses"):
        run_workers(_fail_on_one, 2)


def test_tensors_returned_by_workers_outlive_them():
    got = run_workers(_tensor_of_rank, 2)
    assert [t.tolist() for t in got] == [[0.0] * 3, [1.0] * 3]
