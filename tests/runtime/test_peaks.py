"""Measured machine peaks: plausible figures from generated C, checked against the ISA's rate at the measured clock
(refused when far below it), cached per CPU, ISA and threads with when and how they were measured, measured again
on request or when the cache does not read."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tilegrad import machine
from tilegrad.errors import MeasureError
from tilegrad.runtime import peaks
from tilegrad.runtime.build import assemble
from tilegrad.target import Target

# The peaks are cached in a fresh directory: each test starts without them, and measures them for real (or fakes
# the measurement itself).
pytestmark = [pytest.mark.usefixtures("cache_dir"), pytest.mark.measures_peaks]
FAKE = machine.MachinePeaks("Test CPU", "avx2+fma", 2, 123.0, 4.5, 3.0, 1.0, "2026-01-01T00:00:00+00:00", "by hand")


def _fake_measure(result, calls):
    def measure(threads, duration_s, cfg):
        calls.append(threads)
        return result
    return measure


def test_the_measured_peaks_are_plausible_and_read_back_from_the_cache(monkeypatch):
    """On one thread: the suite runs in two processes, and two threads measured together need both cores free at
    once, which the other process's kernels seldom leave them (the measurement would rightly refuse)."""
    measured = machine.measured_peaks(threads=1, duration_s=0.05)
    assert measured.fma_gflops > 1.0 and measured.bandwidth_gbs > 0.5
    assert measured.threads == 1 and measured.cpu and measured.isa == peaks.isa_of(peaks.host())
    assert measured.clock_ghz > 0.3 and measured.measured_at and "ms chunk" in measured.how
    assert measured.fma_per_cycle >= peaks._MIN_FMA_PER_CYCLE or "fma" not in peaks.host().flags
    path = machine.cache_path(1)
    assert json.loads(path.read_text()) == dataclasses.asdict(measured)
    calls = []
    monkeypatch.setattr(peaks, "_measure", _fake_measure(FAKE, calls))
    assert machine.measured_peaks(threads=1) == measured
    assert calls == []


def test_remeasure_overwrites_the_cached_peaks(monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "_measure", _fake_measure(FAKE, calls))
    assert machine.measured_peaks(threads=2) == FAKE
    faster = dataclasses.replace(FAKE, fma_gflops=246.0, bandwidth_gbs=9.0)
    monkeypatch.setattr(peaks, "_measure", _fake_measure(faster, calls))
    assert machine.measured_peaks(threads=2) == FAKE  # cached
    assert machine.measured_peaks(threads=2, remeasure=True) == faster
    assert machine.measured_peaks(threads=2) == faster
    assert calls == [2, 2]


def test_each_thread_count_has_its_own_figures(monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "_measure", _fake_measure(FAKE, calls))
    assert machine.cache_path(1) != machine.cache_path(2)
    machine.measured_peaks(threads=1)
    machine.measured_peaks(threads=2)
    machine.measured_peaks(threads=1)
    assert calls == [1, 2]


def test_an_unreadable_cache_is_measured_again(monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "_measure", _fake_measure(FAKE, calls))
    path = machine.cache_path(2)
    path.parent.mkdir(parents=True)
    path.write_text('{"cpu": "half a file')
    assert machine.measured_peaks(threads=2) == FAKE
    assert calls == [2] and json.loads(path.read_text())["fma_gflops"] == 123.0


def test_a_cache_without_the_time_of_measuring_predates_the_checks_and_is_measured_again(monkeypatch):
    calls = []
    monkeypatch.setattr(peaks, "_measure", _fake_measure(FAKE, calls))
    path = machine.cache_path(2)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"cpu": "Test CPU", "isa": "avx2+fma", "threads": 2, "fma_gflops": 62.0,
                                "bandwidth_gbs": 4.5}))
    assert machine.measured_peaks(threads=2) == FAKE and calls == [2]


@pytest.mark.parametrize("per_cycle, ghz, reported, has_fma, reason", [
    (1.9, 3.0, 2.0, True, None), (1.0, 2.9, 3.0, True, None), (0.45, 3.0, 2.0, True, "vector FMAs per cycle"),
    (0.45, 3.0, 2.0, False, None), (1.9, 1.0, 3.0, True, "the threads ran at 1.00 GHz"), (1.9, 1.0, None, True, None)])
def test_a_rate_far_below_the_isas_at_the_measured_clock_is_implausible(per_cycle, ghz, reported, has_fma, reason):
    problem = peaks.implausible(per_cycle, ghz, reported, has_fma)
    assert problem is None if reason is None else reason in problem


def test_a_measurement_that_stays_implausible_is_refused_and_not_cached(monkeypatch):
    monkeypatch.setattr(peaks, "implausible", lambda *args: "0.40 vector FMAs per cycle")
    monkeypatch.setattr(peaks, "_RETRY_PAUSE_S", 0.0)
    monkeypatch.setattr(peaks, "_SPREAD_S", 0.0)
    with pytest.raises(MeasureError, match="far below what the ISA does.*--remeasure"):
        machine.measured_peaks(threads=1, duration_s=0.002)
    assert not machine.cache_path(1).exists()


@pytest.mark.parametrize("flags, isa", [({"avx512f", "avx2", "fma"}, "avx512f"), ({"avx2", "fma"}, "avx2+fma"),
                                        ({"avx2"}, "avx2"), ({"sse4_2"}, "sse4.2"), ({"asimd"}, "neon"),
                                        (set(), "scalar")])
def test_the_isa_is_the_widest_vector_extension(flags, isa):
    assert peaks.isa_of(Target(flags=frozenset(flags))) == isa


def test_the_fma_chains_compile_to_vector_instructions_as_wide_as_the_target():
    target = peaks.host()
    asm = assemble(peaks.measuring_source(target.vector_lanes))
    if "fma" in target.flags:  # x86: packed FMAs on the widest registers
        register = {16: "zmm", 8: "ymm"}.get(target.vector_lanes, "xmm")
        assert any("vfmadd" in line and f"ps\t%{register}" in line for line in asm.splitlines())
    elif {"neon", "asimd"} & target.flags:
        assert "fmla\tv" in asm
    else:
        assert "mulps" in asm
