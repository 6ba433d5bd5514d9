"""Calibration: the alpha-beta fit recovers known figures, the figures are cached per machine and read back
without measuring again, and the matmul throughput is a plausible positive number."""

import numpy as np
import pytest

from tilegrad import config
from tilegrad.parallel import calibrate


def test_the_fit_recovers_alpha_and_beta():
    alpha, beta = 3e-5, 2e-9
    points = [(n, v, alpha * (n - 1) + beta * v) for n in (2, 4) for v in (1e3, 1e5, 1e7)]
    got = calibrate.fit_link(points)
    assert got == pytest.approx((alpha, beta), rel=1e-6)


def test_figures_are_measured_once_and_then_read_from_the_cache(tmp_path, monkeypatch):
    calls = []

    def fake_measure():
        calls.append(1)
        return {"flops": 1e10, "links": {k: [1e-5, 1e-9] for k in calibrate.KINDS}}

    monkeypatch.setattr(calibrate, "_measure", fake_measure)
    with config.override(cache_dir=tmp_path):
        first = calibrate.measured_machine()
        second = calibrate.measured_machine(memory_bytes=1e9)
        assert calibrate.cache_path().exists()
    assert len(calls) == 1
    assert first.flops == second.flops == 1e10 and second.memory_bytes == 1e9
    assert second.links["all_reduce"].seconds(4, 1e6) == pytest.approx(3e-5 + 1e-3)


def test_matmul_throughput_is_measured():
    flops = calibrate.matmul_flops(1, n=128)
    assert np.isfinite(flops) and flops > 1e7
