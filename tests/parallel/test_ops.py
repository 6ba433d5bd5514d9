"""Output layouts per operator kind: shard the inputs by a strategy's input layouts, run the operator on each
device's blocks with NumPy, and the blocks (partial sums reduced) are the serial output's blocks under the derived
output layout; every strategy of each operator on 4 devices."""

import numpy as np
import pytest

from tilegrad.errors import ShapeError, TilegradError
from tilegrad.parallel import ops
from tilegrad.parallel.layout import Layout, shard
from tilegrad.parallel.redistribution import plan, simulate

RNG = np.random.default_rng(0)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layer_norm(x, w, b):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b


def _conv(x, w):
    k = w.shape[2]
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w)


def _lookup(rank, layout, ids, table):
    rows = table.shape[0]
    start = layout.block(rank)[0] * rows
    local = ids - start
    hit = (local >= 0) & (local < rows)
    return np.where(hit[..., None], table[np.clip(local, 0, rows - 1)], 0.0)


CASES = [
    (ops.matmul("mm", (8, 4), (4, 8)), lambda r, lay, a, b: a @ b, None),
    (ops.matmul("bmm", (4, 8, 4), (4, 4, 8)), lambda r, lay, a, b: a @ b, None),
    (ops.elementwise("add", (4, 8), (8,)), lambda r, lay, a, b: a + b, None),
    (ops.elementwise("mul", (4, 8), (4, 1)), lambda r, lay, a, b: a * b, None),
    (ops.reduce_sum("sum", (4, 8, 4), (1,)), lambda r, lay, a: a.sum(1), None),
    (ops.softmax("softmax", (4, 8)), lambda r, lay, a: _softmax(a), None),
    (ops.layer_norm("ln", (4, 4, 8), (8,), (8,)), lambda r, lay, a, w, b: _layer_norm(a, w, b), None),
    (ops.embedding("embed", (4, 4), (8, 4)), lambda r, lay, i, t: _lookup(r, lay[1], i, t), "ids"),
    (ops.conv2d("conv", (4, 4, 6, 6), (4, 4, 3, 3), (4, 4)), lambda r, lay, x, w: _conv(x, w), None),
    (ops.transpose("t", (4, 8, 2), (2, 0, 1)), lambda r, lay, a: a.transpose(2, 0, 1), None),
]


def _serial_inputs(op, ids):
    if ids:
        return [RNG.integers(0, op.shapes[1][0], op.shapes[0]), RNG.standard_normal(op.shapes[1])]
    return [RNG.integers(-3, 4, s).astype(float) for s in op.shapes]


@pytest.mark.parametrize("op, local, ids", CASES, ids=[c[0].name for c in CASES])
def test_each_strategy_gives_the_serial_output_under_the_derived_layout(op, local, ids):
    inputs = _serial_inputs(op, ids)
    want = local(0, None, *inputs) if not ids else inputs[1][inputs[0]]
    assert want.shape == op.output_shape
    strategies = op.strategies(4, use_all=False)
    assert len(strategies) > 1
    for strategy in strategies:
        in_layouts, out_layout = op.layouts(strategy, 4)
        blocks = [shard(x, lay) for x, lay in zip(inputs, in_layouts)]
        got = [local(r, in_layouts, *(b[r] for b in blocks)) for r in range(4)]
        whole = Layout(out_layout.device_matrix, out_layout.tensor_map)
        got = simulate(plan(out_layout, whole), got)
        for r, (g, w) in enumerate(zip(got, shard(want, whole))):
            np.testing.assert_allclose(g, w, atol=1e-9, err_msg=f"{op.name} {strategy} rank {r}")


def test_the_inner_dimension_of_matmul_leaves_partial_sums():
    _, out = ops.matmul("mm", (8, 4), (4, 8)).layouts(((1, 2), (2, 2)), 4)
    assert out.partial == (2,) and out.slices(0) == 1 and out.slices(1) == 2


def test_invalid_strategies_name_the_operator_and_the_reason():
    mm = ops.matmul("proj", (8, 4), (4, 8))
    with pytest.raises(TilegradError, match="matmul 'proj'.*cut 2 ways in one input and 1"):
        mm.layouts(((1, 2), (1, 2)), 4)
    with pytest.raises(TilegradError, match="matmul 'proj'.*size 8 cannot be cut into 3"):
        mm.layouts(((3, 1), (1, 1)), 3)
    with pytest.raises(TilegradError, match="cuts 8 ways, which does not divide 4 devices"):
        mm.layouts(((8, 1), (1, 1)), 4)
    with pytest.raises(TilegradError, match="one tuple of slice counts per input"):
        mm.layouts(((2, 1),), 4)
    with pytest.raises(TilegradError, match="softmax 'sm'.*cannot be split"):
        ops.softmax("sm", (4, 8)).layouts(((1, 2),), 2)
    with pytest.raises(ShapeError, match="inner dimensions differ"):
        ops.matmul("bad", (8, 4), (5, 8))
