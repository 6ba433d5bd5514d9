"""Hypothesis profiles (`ci` keeps the default run fast, `long` runs before releases), --update-golden, and how
pytest-xdist shares the tests out."""

import os

import pytest
from hypothesis import settings

# Tests compile the same small models again and again, with passes and builders patched to observe them: each
# compile must really compile, so the module cache (module_cache.py) is off unless a test turns it on.
os.environ.setdefault("TILEGRAD_MODULE_CACHE", "0")

settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("long", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _peaks_without_measuring(request, monkeypatch):
    """The machine's peaks are measured only where a test measures them (`measures_peaks`): the suite runs two
    workers on two cores, and a measurement under that load is refused. Elsewhere, where none are cached, they are
    the ISA's rate at the reported clock (two FMAs a cycle), never written to the user's cache."""
    if request.node.get_closest_marker("measures_peaks"):
        return
    from tilegrad.runtime import peaks
    from tilegrad.target import host

    def theoretical(threads, duration_s, cfg):
        target = host()
        ghz = peaks.reported_ghz() or 3.0
        return peaks.MachinePeaks(target.model, peaks.isa_of(target), threads,
                                  threads * target.vector_lanes * 2 * 2 * ghz, 50.0, ghz, 2.0, "", "theoretical (tests)")

    monkeypatch.setattr(peaks, "_measure", theoretical)
    monkeypatch.setattr(peaks, "_write", lambda path, measured: None)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/ from the current codegen")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist's `--dist loadgroup`, a test without an `xdist_group` goes with its file, as under
    `--dist loadfile` (its module's fixtures are made once, its tests run in their order), and the tests of one
    group run on one worker, one after the other: those that start a Ray cluster or a torch.distributed group."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileOrGroup(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)  # the group's name, or the nodeid of a test in none
            return nodeid.split("::", 1)[0] if scope == nodeid else scope

    return FileOrGroup(config, log)
