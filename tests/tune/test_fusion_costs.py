"""The stitching explorer's measured figures (tune/fusion_costs.py), cached per machine, and the stitched fusion
plan as a tuning choice (tune/algorithms.py, `fusion_plans`)."""

from __future__ import annotations

import json

import pytest

from tilegrad import config
from tilegrad.ir.graph import GraphBuilder
from tilegrad.passes.stitch_cost import FusionCosts
from tilegrad.tune import algorithms, fusion_costs
from tilegrad.tune.task import kernels


@pytest.fixture
def fixed_measurements(monkeypatch, tmp_path):
    """Measurements that count their calls and return fixed figures, into a fresh cache directory."""
    calls = []
    for name, value in (("_seconds_per_byte", 1e-10), ("_call_seconds", 3e-6), ("_op_seconds", 2e-10)):
        monkeypatch.setattr(fusion_costs, name, lambda value=value, name=name: calls.append(name) or value)
    with config.override(cache_dir=tmp_path):
        yield calls


def test_the_costs_are_measured_once_then_read_from_the_cache(fixed_measurements):
    first = fusion_costs.measured_fusion_costs()
    assert first == FusionCosts(1e-10, 3e-6, 2e-10) and len(fixed_measurements) == 3
    assert json.loads(fusion_costs.cache_path().read_text()) == first.to_json()
    assert fusion_costs.measured_fusion_costs() == first and len(fixed_measurements) == 3
    fusion_costs.measured_fusion_costs(remeasure=True)
    assert len(fixed_measurements) == 6


def test_an_unreadable_cache_is_measured_again(fixed_measurements):
    path = fusion_costs.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert fusion_costs.measured_fusion_costs().call_seconds == 3e-6 and len(fixed_measurements) == 3


@pytest.mark.slow
def test_the_measured_figures_are_positive_and_ordered(tmp_path):
    with config.override(cache_dir=tmp_path):
        costs = fusion_costs.measured_fusion_costs()
    assert 0 < costs.seconds_per_byte < 1e-8  # more than 100 MB/s
    assert 0 < costs.op_seconds < costs.call_seconds  # one op on one element against a whole call


def _independent_chains():
    b = GraphBuilder()
    x, y, z = b.input("x", (4, 8)), b.input("y", (8, 4)), b.input("z", (96, 96))
    return b.build([b.op("exp", b.op("relu", x)), b.op("tanh", b.op("neg", z)), b.op("sigmoid", b.op("abs", y))])


def test_the_stitched_plan_is_a_variant_that_the_records_choose_when_faster(fixed_measurements, monkeypatch):
    from tilegrad.passes.memory_plan import kernel_count

    monkeypatch.setattr(algorithms, "measured_latencies", lambda graphs: [kernel_count(x) for x in graphs])
    g = _independent_chains()
    assert len(algorithms.variants(g)) == 1
    default, stitched = algorithms.variants(g, fusion_plans=True)
    assert stitched.algorithm == algorithms.STITCH and stitched.report.decisions["stitch"]
    assert len(list(kernels(stitched.graph))) < len(list(kernels(default.graph)))
    stitched_keys = {key for *_, key in kernels(stitched.graph)} - {key for *_, key in kernels(default.graph)}
    assert algorithms.choose(g, lambda key: 1e-6, fusion_plans=True).algorithm == algorithms.STITCH
    slow = algorithms.choose(g, lambda key: 1.0 if key in stitched_keys else 1e-6, fusion_plans=True)
    assert slow.algorithm is None  # the rule-based graph, the default


def test_measured_latencies_time_each_distinct_kernel_once(monkeypatch):
    from tilegrad.tune import fusion_plans

    timed = []
    real = fusion_plans.time_kernel

    def counting(kernel, arrays, **options):
        timed.append(kernel.params[0].shape)
        return real(kernel, arrays, **options)

    monkeypatch.setattr(fusion_plans, "time_kernel", counting)

    def chain(n):
        b = GraphBuilder()
        return b.build(b.op("exp", b.input("x", (n, 256))))

    small, again, large = fusion_plans.measured_latencies([chain(4), chain(4), chain(4096)])
    assert timed == [(4, 256), (4096, 256)]  # the second small graph's kernel is the first one's
    assert small == again and small > 0 and large > 0