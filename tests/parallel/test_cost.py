"""The step's compute terms on cases counted by hand: an operator takes its FLOPs' time plus its bytes' time
per pass plus a fixed overhead, and the optimizer's update of each parameter block is priced by its bytes,
sharded over the replicas under ZeRO."""

import pytest

from tilegrad.parallel import ops
from tilegrad.parallel.cost import (
    Link,
    Machine,
    node_cost,
    operator_seconds,
    optimizer_seconds,
)
from tilegrad.parallel.gemm import GRID, SPILL_COLUMNS, GemmRates

LINKS = {k: Link(1e-5, 1e-9) for k in ("all_gather", "all_to_all", "reduce_scatter", "all_reduce")}


def test_element_wise_work_is_priced_by_its_bytes():
    machine = Machine(1e12, LINKS, bandwidth=1e9, op_seconds=1e-4)
    op = ops.elementwise("exp", (1000, 1000), flops_per_element=4.0)
    forward = 2e6 * 4 / 1e9  # read x, write y
    backward = 3e6 * 4 / 1e9  # read dy and x, write dx
    arithmetic = 3 * 4e6 / 1e12
    assert operator_seconds(machine, op, ((1, 1),), 1) == pytest.approx(forward + backward + arithmetic + 1e-4)


def test_a_matmul_is_priced_by_its_flops_and_a_cut_divides_them():
    machine = Machine(1e11, LINKS)
    op = ops.matmul("fc", (512, 512), (512, 512))
    flops = 2 * 512 ** 3
    assert operator_seconds(machine, op, ((1, 1), (1, 1)), 1) == pytest.approx(3 * flops / 1e11)
    assert operator_seconds(machine, op, ((2, 1), (1, 1)), 2) == pytest.approx(1.5 * flops / 1e11)


def test_a_skinny_matmul_over_a_huge_weight_adds_the_time_to_stream_it():
    machine = Machine(1e11, LINKS, bandwidth=1e9)
    op = ops.matmul("classifier", (8, 256), (256, 1 << 16))
    forward = (8 * 256 + 256 * (1 << 16) + 8 * (1 << 16)) * 4
    flops = 2 * 8 * 256 * (1 << 16)
    assert operator_seconds(machine, op, ((1, 1), (1, 1)), 1) == pytest.approx(3 * forward / 1e9 + 3 * flops / 1e11)


def test_the_optimizer_update_costs_each_replica_the_whole_block_unless_zero_shards_it():
    op = ops.matmul("fc", (64, 256), (256, 1024))
    strategy = ((2, 1), (1, 1))  # data parallel on 2 devices: the weight replicated
    weight = 256 * 1024
    plain, zero = (Machine(1e30, LINKS, bandwidth=1e9, shard_optimizer=s) for s in (False, True))
    base = operator_seconds(plain, op, strategy, 2)
    assert node_cost(plain, op, strategy, 2, (1,)).compute - base == pytest.approx(18 * weight * 4 / 1e9)
    assert node_cost(zero, op, strategy, 2, (1,)).compute - base == pytest.approx(18 * weight * 4 / 2 / 1e9)
    assert node_cost(plain, op, strategy, 2, (1,)).parameter_bytes == weight * 4 * (2 + 2)
    assert node_cost(zero, op, strategy, 2, (1,)).parameter_bytes == weight * 4 * (2 + 1)
    sgd = Machine(1e30, LINKS, bandwidth=1e9, optimizer="sgd")
    assert node_cost(sgd, op, strategy, 2, (1,)).parameter_bytes == weight * 4 * 2


def test_without_a_bandwidth_only_the_flops_count():
    op = ops.softmax("p", (64, 1000))
    assert operator_seconds(Machine(1e9, LINKS), op, ((1, 1),), 1) == pytest.approx(3 * 5 * 64000 / 1e9)


def test_measured_matrix_product_rates_price_each_product_by_its_shape():
    rates = GemmRates(tuple(1e9 * k for m in GRID for k in GRID for n in GRID), (1.0,) * len(SPILL_COLUMNS))
    machine = Machine(1e15, LINKS, gemm=rates)  # the flat figure would price it at nothing
    op = ops.linear("fc", (16, 256), (64, 256))
    flops = 2 * 16 * 256 * 64
    assert operator_seconds(machine, op, ((1, 1), (1, 1)), 1) == pytest.approx(
        flops / 256e9 + flops / 64e9 + flops / 16e9)


def test_fresh_large_tensors_add_their_page_faults():
    machine = Machine(1e30, LINKS, bandwidth=1e30, fresh_seconds_per_byte=1e-9)
    op = ops.elementwise("exp", (64, 1 << 18))  # 64 MiB: its output forward, its input's gradient backward
    assert operator_seconds(machine, op, ((1, 1),), 1) == pytest.approx(2 * (64 << 20) * 1e-9)
    assert optimizer_seconds(machine, 1 << 24, 1) == pytest.approx(2 * (64 << 20) * 1e-9)  # Adam's temporaries
