"""Matrix-product throughput by shape: the grid's rates come back at its points, interpolate between them and
clamp beyond them; the spill factor of a large operand multiplies them; a matmul's and a linear's products
(forward and both gradients) take their own shapes."""

import math

import pytest

from tilegrad.parallel import gemm
from tilegrad.parallel.gemm import GRID, GemmRates, products, training_seconds


def _rates(rate):
    return tuple(rate(m, k, n) for m in GRID for k in GRID for n in GRID)


FLAT_SPILL = (1.0,) * len(gemm.SPILL_COLUMNS)


def test_grid_points_come_back_and_between_them_the_rate_is_interpolated_in_log_space():
    rates = GemmRates(_rates(lambda m, k, n: 1e9 * m), FLAT_SPILL)
    assert rates.flops_per_second(64, 16, 16) == pytest.approx(64e9)
    assert rates.flops_per_second(128, 16, 16) == pytest.approx(128e9)  # halfway in log2 between 64 and 256
    assert rates.flops_per_second(4096, 16, 16) == pytest.approx(1024e9)  # clamped to the grid
    assert GemmRates(_rates(lambda m, k, n: 1e9), FLAT_SPILL, scale=0.5).flops_per_second(64, 64, 64) == pytest.approx(
        0.5e9)


def test_an_operand_beyond_the_measured_sizes_takes_the_spill_factor():
    rates = GemmRates(_rates(lambda m, k, n: 1e10), (1.0, 0.25, 0.25))
    assert rates.flops_per_second(32, 256, 1024) == pytest.approx(1e10)  # a 1 MiB operand: within the grid
    assert rates.flops_per_second(32, 256, 16384) == pytest.approx(2.5e9)  # a 16 MiB one: the second point's
    assert rates.flops_per_second(32, 256, 1 << 20) == pytest.approx(2.5e9)  # clamped beyond the last


def test_the_products_of_a_matmul_a_batch_matmul_and_a_linear():
    assert products("matmul", (8, 64, 256), (256, 1024)) == (1, 512, 256, 1024)  # shared weight: rows fold
    assert products("batch_matmul", (8, 64, 256), (8, 256, 64)) == (8, 64, 256, 64)
    assert products("linear", (32, 256), (1000, 256)) == (1, 32, 256, 1000)


def test_training_prices_the_input_gradient_and_the_weight_gradient_by_their_own_shapes():
    rates = GemmRates(_rates(lambda m, k, n: 1e9 * k), FLAT_SPILL)  # the inner dimension sets the rate
    forward, backward = training_seconds(rates, 1, 16, 256, 64)
    flops = 2 * 16 * 256 * 64
    assert forward == pytest.approx(flops / 256e9)
    assert backward == pytest.approx(flops / 64e9 + flops / 16e9)  # dA: inner n = 64; dB: inner m = 16


def test_rates_are_measured_on_this_machine():
    rates = gemm.measure_rates()
    assert len(rates.rates) == len(GRID) ** 3 and all(math.isfinite(r) and r > 0 for r in rates.rates)
    assert rates.spill[0] == 1.0
