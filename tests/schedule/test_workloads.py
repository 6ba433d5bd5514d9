"""Every workload of the catalogue, compiled under the default schedule and under the naive one, matches the
reference interpreter (itself checked against NumPy in tests/te)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad.kernel import build
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import Target
from tilegrad.te.interpret import interpret
from tilegrad.workloads import WORKLOADS


def _arrays(inputs, rng):
    out = []
    for t in inputs:
        if t.dtype == "int64":
            out.append(rng.integers(0, 7, size=t.shape).astype("int64"))
        else:
            out.append(rng.standard_normal(t.shape).astype(t.dtype))
    return out


def _run(name, make_schedule):
    inputs, output = WORKLOADS[name]()
    rng = np.random.default_rng(sum(map(ord, name)))
    arrays = _arrays(inputs, rng)
    sch = make_schedule(output)
    kern = build(sch, args=inputs + [sch.state.outputs[0]])
    got = kern.run(*arrays)
    want = interpret(output, {t.name: a for t, a in zip(inputs, arrays)})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"trace:\n{sch.trace}")


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_schedule(name):
    _run(name, default_schedule)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_schedule_avx512_rules(name):
    _run(name, lambda out: default_schedule(out, Target.with_lanes(16)))


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_naive_schedule(name):
    _run(name, Schedule)
