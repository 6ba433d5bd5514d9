"""Redistribution between any two layouts gives each device exactly its block of the serial tensor: every pair on
2 and 4 devices, sampled pairs on 8, partial sums as sources, and the collectives chosen."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad.errors import TilegradError
from tilegrad.parallel.layout import Layout, all_layouts, shard
from tilegrad.parallel.redistribution import all_groups, plan, simulate

SHAPES = [(8, 8), (4, 8, 8)]


def _check(x, source, target, source_shards=None):
    got = simulate(plan(source, target), source_shards if source_shards is not None else shard(x, source))
    for rank, (g, want) in enumerate(zip(got, shard(x, target))):
        assert np.array_equal(g, want), f"rank {rank}: {source} -> {target}: {plan(source, target).steps}"


def _partial_shards(x, layout, rng):
    """Shards whose sums over the partial axes' groups give the layout's blocks."""
    shards = [s.copy() for s in shard(x, Layout(layout.device_matrix, layout.tensor_map))]
    for g in all_groups(layout.device_matrix, layout.partial):
        noise = [rng.integers(-4, 4, shards[g[0]].shape).astype(float) for _ in g[1:]]
        shards[g[0]] = shards[g[0]] - sum(noise)
        for q, n in zip(g[1:], noise):
            shards[q] = n
    return shards


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_pair_of_layouts_gives_the_serial_blocks(shape, devices):
    x = np.arange(np.prod(shape), dtype=float).reshape(shape)
    layouts = all_layouts(shape, devices)
    for source, target in itertools.product(layouts, layouts):
        _check(x, source, target)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_sampled_pairs_on_eight_devices_give_the_serial_blocks(data):
    shape = data.draw(st.sampled_from(SHAPES))
    layouts = all_layouts(shape, 8)
    source, target = data.draw(st.sampled_from(layouts)), data.draw(st.sampled_from(layouts))
    _check(np.arange(np.prod(shape), dtype=float).reshape(shape), source, target)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_partial_sums_reduce_to_the_serial_blocks(data):
    devices = data.draw(st.sampled_from([2, 4, 8]))
    shape = data.draw(st.sampled_from(SHAPES))
    layouts = all_layouts(shape, devices)
    source = data.draw(st.sampled_from(layouts))
    free = [a for a in range(len(source.device_matrix)) if all(a not in axes for axes in source.tensor_map)]
    partial = tuple(data.draw(st.lists(st.sampled_from(free), unique=True, min_size=1))) if free else ()
    source = Layout(source.device_matrix, source.tensor_map, partial)
    target = data.draw(st.sampled_from(layouts))
    x = np.arange(np.prod(shape), dtype=float).reshape(shape)
    _check(x, source, target, _partial_shards(x, source, np.random.default_rng(0)))


def test_row_split_to_replicated_is_one_all_gather():
    steps = plan(Layout.from_slices((4, 1), 4), Layout.replicated(2, 4)).steps
    assert [s.kind for s in steps] == ["all_gather"] and steps[0].dim == 0


def test_moving_a_split_between_dimensions_is_an_all_to_all():
    steps = plan(Layout.from_slices((2, 1), 2), Layout.from_slices((1, 2), 2)).steps
    assert [s.kind for s in steps] == ["all_to_all"]


def test_partial_sums_into_a_split_are_a_reduce_scatter():
    source = Layout.of((2,), (-1, -1), partial=(0,))
    assert [s.kind for s in plan(source, Layout.of((2,), (0, -1))).steps] == ["reduce_scatter"]
    assert [s.kind for s in plan(source, Layout.of((2,), (-1, -1))).steps] == ["all_reduce"]


def test_replicated_to_split_is_local():
    steps = plan(Layout.replicated(2, 8), Layout.of((2, 2, 2), ((0, 1), 2))).steps
    assert all(s.kind == "split" for s in steps)


def test_mismatched_layouts_are_refused_with_a_reason():
    with pytest.raises(TilegradError, match="2 devices.*4 devices"):
        plan(Layout.replicated(2, 2), Layout.replicated(2, 4))
    with pytest.raises(TilegradError, match="partial sums"):
        plan(Layout.replicated(2, 2), Layout.of((2,), (-1, -1), partial=(0,)))


SEED_FOUR = {"row+column": Layout.of((2, 2), (0, 1)), "replicated": Layout.of((2, 2), (-1, -1)),
             "row+replicas": Layout.of((2, 2), (0, -1)), "column+replicas": Layout.of((2, 2), (-1, 1))}
SEED_STEPS = {("row+column", "row+replicas"): ["all_gather"], ("row+column", "replicated"): ["all_gather",
              "all_gather"], ("row+replicas", "column+replicas"): ["all_gather",
              "split"],
              ("replicated", "row+column"): ["split", "split"], ("column+replicas", "row+column"): ["split"]}


def test_the_seeds_four_layouts_on_four_devices_convert_into_each_other():
    x = np.arange(64.0).reshape(8, 8)
    for (a, source), (b, target) in itertools.product(SEED_FOUR.items(), SEED_FOUR.items()):
        _check(x, source, target)
        if (a, b) in SEED_STEPS:
            assert [s.kind for s in plan(source, target).steps] == SEED_STEPS[a, b], (a, b)
    # rows to columns over the same device axis: one AllToAll
    columns_by_axis_0 = Layout.of((2, 2), (-1, 0))
    assert [s.kind for s in plan(SEED_FOUR["row+replicas"], columns_by_axis_0).steps] == ["all_to_all"]
    _check(x, SEED_FOUR["row+replicas"], columns_by_axis_0)
