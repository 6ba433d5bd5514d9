"""Calibration: the alpha-beta fit recovers known figures, the figures are cached per machine and read back
without measuring again, one process's figures follow its share of the cores (4 processes on 2 cores get half
a core each and the links fitted at 4), and the triad and the overhead are measured."""

import numpy as np
import pytest

from tilegrad import config
from tilegrad.parallel import calibrate
from tilegrad.parallel.gemm import GRID, SPILL_COLUMNS
from tilegrad.parallel.launch import run_workers

FIGURES = {"cores": 2, "gemm_rates": [8e10] * len(GRID) ** 3, "gemm_spill": [1.0] * len(SPILL_COLUMNS),
           "bandwidth": 14e9, "fresh_seconds_per_byte": 2e-9, "op_seconds": 5e-5,
           "links": {"2": {k: [1e-5, 1e-9] for k in calibrate.KINDS},
                     "4": {k: [3e-5, 2e-9] for k in calibrate.KINDS},
                     "pooled": {k: [2e-5, 1.5e-9] for k in calibrate.KINDS}}}


def test_the_fit_recovers_alpha_and_beta():
    alpha, beta = 3e-5, 2e-9
    points = [(n, v, alpha * (n - 1) + beta * v) for n in (2, 4) for v in (1e3, 1e5, 1e7)]
    got = calibrate.fit_link(points)
    assert got == pytest.approx((alpha, beta), rel=1e-6)


def test_figures_are_measured_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    calls = []

    def fake_measure():
        calls.append(1)
        return FIGURES

    monkeypatch.setattr(calibrate, "_measure", fake_measure)
    with config.override(cache_dir=tmp_path):
        first = calibrate.measured_machine()
        second = calibrate.measured_machine(memory_bytes=1e9, processes=4)
        assert calibrate.cache_path().exists()
    assert len(calls) == 1
    assert first.flops == 8e10 and second.flops == 4e10 and second.memory_bytes == 1e9
    assert second.links["all_reduce"].seconds(4, 1e6) == pytest.approx(3 * 3e-5 + 2e-3)


def test_processes_that_fit_the_cores_split_the_bandwidth_and_more_time_slice():
    two = calibrate.machine_for(FIGURES, 2)
    assert (two.flops, two.bandwidth, two.op_seconds, two.fresh_seconds_per_byte) == pytest.approx(
        (8e10, 7e9, 5e-5, 2e-9))
    four = calibrate.machine_for(FIGURES, 4)
    assert (four.flops, four.bandwidth, four.op_seconds, four.fresh_seconds_per_byte) == pytest.approx(
        (4e10, 3.5e9, 1e-4, 4e-9))
    assert four.gemm.flops_per_second(64, 64, 64) == pytest.approx(4e10)
    one = calibrate.machine_for(FIGURES, 1)  # alone, with both cores' threads
    assert (one.flops, one.bandwidth) == pytest.approx((16e10, 14e9))
    assert calibrate.machine_for(FIGURES, 3).links["all_reduce"].alpha == 2e-5  # not measured at 3: pooled


def test_the_triad_is_timed_into_a_kept_and_a_fresh_tensor():
    kept, fresh = calibrate.triad_seconds(1 << 20)
    assert 0 < kept < 1 and 0 < fresh < 1 and np.isfinite(kept + fresh)


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")  # one torch.distributed launch at a time under xdist
def test_the_overhead_per_operator_is_a_small_positive_time():
    seconds = run_workers(calibrate._time_overhead, 1)[0]
    assert 1e-7 < seconds < 1e-2
