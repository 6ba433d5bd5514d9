"""Simulated clusters: the GPT-3 mapping on a two-level topology (8..1024 devices), the bubble formula, 1F1B's
memory below GPipe's, links chosen by how far a group reaches, and the wide classifier's searched plan at 64
devices at most half data parallel's step time and within a memory cap data parallel exceeds."""

import math

import pytest

from tilegrad.errors import TilegradError
from tilegrad.parallel import models
from tilegrad.parallel.cost import Link, span
from tilegrad.parallel.search import Problem, data_parallel, search
from tilegrad.parallel.topology import (
    Topology,
    bubble_fraction,
    plan_cluster,
    uniform_links,
)

TOPOLOGY = Topology(1e14, uniform_links(5e-6, 1 / 200e9), uniform_links(1e-5, 1 / 25e9),
                    uniform_links(2e-5, 1 / 12.5e9), memory_bytes=32e9)


def _gpt(batch):
    return models.gpt(2, batch, 256, 512, 4096)


@pytest.mark.parametrize("devices, stages, micro", [(8, 1, 1), (64, 4, 8), (512, 4, 16), (1024, 8, 32)])
def test_the_gpt3_mapping_covers_8_to_1024_devices(devices, stages, micro):
    plan = plan_cluster(_gpt, 1024, devices, TOPOLOGY, stages, micro)
    assert plan.data_parallel * plan.pipeline_stages * plan.operator_parallel == devices
    assert plan.operator_parallel == 8
    assert plan.bubble_fraction == pytest.approx((stages - 1) / (micro + stages - 1))
    assert plan.step_seconds > 0 and plan.memory_bytes > 0


def test_more_devices_predict_a_shorter_step_and_less_memory_per_device():
    small = plan_cluster(_gpt, 1024, 64, TOPOLOGY, 4, 8)
    large = plan_cluster(_gpt, 1024, 512, TOPOLOGY, 4, 8)
    assert large.step_seconds < small.step_seconds and large.memory_bytes < small.memory_bytes


def test_one_f_one_b_keeps_fewer_activations_than_gpipe_at_the_same_step_time():
    gpipe = plan_cluster(_gpt, 1024, 64, TOPOLOGY, 4, 16, schedule="gpipe")
    ofob = plan_cluster(_gpt, 1024, 64, TOPOLOGY, 4, 16, schedule="1f1b")
    assert ofob.memory_bytes < gpipe.memory_bytes
    assert ofob.step_seconds == pytest.approx(gpipe.step_seconds)
    assert bubble_fraction(4, 16) == pytest.approx(3 / 19)


def test_a_group_across_servers_uses_the_slower_links():
    machine = TOPOLOGY.machine()
    matrix = (2,) * 6  # 64 devices: the last three axes stay inside a server of 8
    assert span(matrix, (5,)) == 2 and span(matrix, (2,)) == 16
    inside = machine.collective_seconds("all_reduce", 2, 1e6, span(matrix, (5,)))
    across = machine.collective_seconds("all_reduce", 2, 1e6, span(matrix, (2,)))
    assert across > 4 * inside


@pytest.mark.parametrize("bandwidth", [math.inf, 2e12])
def test_the_wide_classifier_at_64_devices_beats_data_parallel_by_half_and_fits_the_cap(bandwidth):
    g = models.wide_classifier(512, 512, 512, 1 << 20)
    cap = 2e9
    machine = Topology(1e14, TOPOLOGY.server, TOPOLOGY.rack, TOPOLOGY.core, memory_bytes=cap,
                       bandwidth=bandwidth).machine()
    problem = Problem(g, 64, machine)
    best, dp = search(problem), data_parallel(problem)
    assert best.step_seconds <= 0.5 * dp.step_seconds
    assert best.fits and not dp.fits


def test_impossible_mappings_are_refused_with_a_reason():
    with pytest.raises(TilegradError, match="3 pipeline stages do not divide 64"):
        plan_cluster(_gpt, 1024, 64, TOPOLOGY, 3, 4)
    with pytest.raises(TilegradError, match="schedule 'zigzag'"):
        plan_cluster(_gpt, 1024, 64, TOPOLOGY, 4, 4, schedule="zigzag")
    assert Link(1.0, 0.0).seconds(4, 123.0) == 3.0
