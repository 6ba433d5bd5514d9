"""Every runtime test builds into its own cache directory and starts with zeroed counters."""

import pytest

from tilegrad import config, metrics


@pytest.fixture(autouse=True)
def cache_dir(tmp_path):
    with config.override(cache_dir=tmp_path / "cache"):
        metrics.reset()
        yield tmp_path / "cache"
