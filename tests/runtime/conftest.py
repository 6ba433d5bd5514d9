"""Every runtime test starts with zeroed counters and builds into a cache directory of this folder's tests: one
shared by them all (a library is keyed by its source, flags and compiler, so one test's library is the one another
would build), or, for a test that takes `cache_dir`, one of its own, which it may look into."""

import pytest

from tilegrad import config, metrics


@pytest.fixture(scope="session")
def _shared_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("runtime-cache")


@pytest.fixture(autouse=True)
def _zeroed_counters_and_shared_cache(_shared_cache):
    with config.override(cache_dir=_shared_cache):
        metrics.reset()
        yield


@pytest.fixture
def cache_dir(tmp_path, _zeroed_counters_and_shared_cache):
    """This test's own cache directory, empty at the start (tmp_path / "cache")."""
    with config.override(cache_dir=tmp_path / "cache"):
        yield tmp_path / "cache"
