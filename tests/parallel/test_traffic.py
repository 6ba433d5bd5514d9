"""Bytes moved per operator (forward and backward, from local shapes) and per optimizer step, against counts
made by hand."""

import pytest

from tilegrad.errors import TilegradError
from tilegrad.parallel import ops
from tilegrad.parallel.traffic import (
    fresh_bytes,
    operator_bytes,
    optimizer_bytes,
    optimizer_fresh_bytes,
    optimizer_states,
)


def _local(op, strategy, devices):
    ins, out = op.layouts(strategy, devices)
    return tuple(lay.local_shape(s) for lay, s in zip(ins, op.shapes)), out.local_shape(op.output_shape)


def test_a_matmul_reads_its_operands_and_writes_its_product_and_backward_moves_twice_that():
    op = ops.matmul("fc", (64, 256), (256, 1024))
    forward = (64 * 256 + 256 * 1024 + 64 * 1024) * 4
    assert operator_bytes(op, *_local(op, ((1, 1), (1, 1)), 1), 4) == (forward, 2 * forward)
    half = (64 * 256 + 256 * 512 + 64 * 512) * 4  # the columns cut in two: each device holds half of W and Y
    assert operator_bytes(op, *_local(op, ((1, 1), (1, 2)), 2), 4) == (half, 2 * half)


def test_a_softmax_backward_reads_the_gradient_and_the_output_and_writes_the_input_gradient():
    op = ops.softmax("p", (8, 64, 64))
    n = 8 * 64 * 64
    assert operator_bytes(op, *_local(op, ((1, 1, 1),), 1), 4) == (2 * n * 4, 3 * n * 4)


def test_an_element_wise_backward_reads_the_gradient_and_operands_and_writes_their_gradients():
    op = ops.elementwise("bias_add", (32, 100), (100,))
    forward = (3200 + 100 + 3200) * 4
    backward = (3200 + 2 * (3200 + 100)) * 4
    assert operator_bytes(op, *_local(op, ((1, 1), (1,)), 1), 4) == (forward, backward)


def test_views_move_nothing_and_a_sum_s_gradient_is_a_broadcast():
    t = ops.transpose("kt", (4, 8, 16), (0, 2, 1))
    assert operator_bytes(t, *_local(t, ((1, 1, 1),), 1), 4) == (0, 0)
    s = ops.reduce_sum("norm", (64, 1000), (1,))
    assert operator_bytes(s, *_local(s, ((1, 1),), 1), 4) == ((64000 + 64) * 4, 64 * 4)


def test_optimizer_steps_move_their_passes_per_parameter_and_zero_shards_the_update():
    assert optimizer_bytes("adam", 1000, 4) == 18 * 1000 * 4
    assert optimizer_bytes("sgd", 1000, 4) == 3 * 1000 * 4
    assert optimizer_bytes("sgd_momentum", 1000, 4) == 8 * 1000 * 4
    assert optimizer_bytes("adam", 1001, 4, shards=4) == 18 * 251 * 4  # padded up, as ShardedOptimizer pads
    assert [optimizer_states(k) for k in ("sgd", "sgd_momentum", "adam")] == [0, 1, 2]


def test_an_unknown_optimizer_is_refused_naming_the_known_ones():
    with pytest.raises(TilegradError, match="optimizer 'lamb' has no update cost.*adam"):
        optimizer_bytes("lamb", 10, 4)


def test_fresh_tensors_beyond_the_mmap_threshold_are_counted_for_their_page_faults():
    big = ops.matmul("classifier", (64, 256), (256, 1 << 17))  # the weight and its gradient: 128 MiB
    ins, out = _local(big, ((1, 1), (1, 1)), 1)
    assert fresh_bytes(big, ins, out, 4) == (0, 256 * (1 << 17) * 4)  # the 32 MiB output stays in the heap
    small = ops.matmul("fc", (64, 256), (256, 1024))
    assert fresh_bytes(small, *_local(small, ((1, 1), (1, 1)), 1), 4) == (0, 0)
    assert optimizer_fresh_bytes("adam", 1 << 24, 4) == 2 * (64 << 20)  # sqrt and the division: 64 MiB each
    assert optimizer_fresh_bytes("adam", 1 << 24, 4, shards=4) == 0  # 16 MiB slices stay in the heap
    assert optimizer_fresh_bytes("sgd", 1 << 24, 4) == 0
