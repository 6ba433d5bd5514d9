"""Block splitting, the information loss L and the damped inverse by blocks, on matrices whose answers are known."""

import pytest
import torch

from tilegrad.errors import OptimizerError
from tilegrad.optim.blocks import damped_inverse, information_loss, split_blocks


def _spd(n: int, seed: int = 0) -> torch.Tensor:
    x = torch.randn(n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x @ x.T / n


def test_split_keeps_the_diagonal_blocks_and_the_short_last_one():
    m = torch.arange(25.0).reshape(5, 5)
    expected = torch.zeros(5, 5)
    expected[0:2, 0:2] = m[0:2, 0:2]
    expected[2:4, 2:4] = m[2:4, 2:4]
    expected[4:, 4:] = m[4:, 4:]
    assert torch.equal(split_blocks(m, 2), expected)
    assert torch.equal(split_blocks(m, 5), m) and torch.equal(split_blocks(m, None), m)


def test_information_loss_of_known_matrices():
    # [[2, 1], [1, 2]] has eigenvalues 3 and 1; split at 1 it is 2I: L = 1 - 2²/3² = 5/9
    assert information_loss(torch.tensor([[2.0, 1.0], [1.0, 2.0]]), 1) == pytest.approx(5 / 9)
    assert information_loss(torch.diag(torch.tensor([3.0, 1.0, 2.0])), 1) == pytest.approx(0.0)
    # two independent 2x2 blocks lose nothing at size 2, and something at size 1
    m = torch.block_diag(torch.tensor([[2.0, 1.0], [1.0, 2.0]]), torch.tensor([[1.0, 0.5], [0.5, 1.0]]))
    assert information_loss(m, 2) == pytest.approx(0.0, abs=1e-12)
    assert information_loss(m, 1) == pytest.approx(5 / 9)
    assert information_loss(m, 4) == 0.0


@pytest.mark.parametrize("size", [1, 3, 4, 7, None])
def test_damped_inverse_inverts_the_block_diagonal_matrix(size):
    m = _spd(7)
    expected = torch.linalg.inv(split_blocks(m, size) + 0.1 * torch.eye(7, dtype=m.dtype))
    torch.testing.assert_close(damped_inverse(m, 0.1, size), expected)


def test_a_diagonal_factor_is_inverted_elementwise():
    torch.testing.assert_close(damped_inverse(torch.tensor([1.0, 3.0]), 1.0, None), torch.tensor([0.5, 0.25]))


def test_a_factor_that_is_not_positive_definite_names_the_layer():
    with pytest.raises(OptimizerError, match="layer fc1.*not positive definite"):
        damped_inverse(-torch.eye(3), 0.5, None, "fc1")
