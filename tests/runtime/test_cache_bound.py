"""The build cache stays under its bound: the least recently used entries go first, never one used within the
hour, and a build touches the libraries it finds so that what is used stays."""

import os

from tilegrad import config
from tilegrad.runtime import cache_bound
from tilegrad.runtime.build import build

NOW = 1_000_000_000.0
HOUR = 3600.0


def _entry(cache, key: str, size: int, used: float) -> list:
    shard = cache / key[:2]
    shard.mkdir(parents=True, exist_ok=True)
    files = [shard / f"{key}.so", shard / f"{key}.c", shard / f"{key}.lock"]
    files[0].write_bytes(b"\0" * size)
    files[1].write_text("int f;")
    files[2].touch()
    for f in files:
        os.utime(f, (used, used))
    return files


def test_the_least_recently_used_entries_go_until_the_cache_fits_its_bound(tmp_path):
    old = _entry(tmp_path, "aa01", 4000, NOW - 5 * HOUR)
    older = _entry(tmp_path, "bb02", 4000, NOW - 9 * HOUR)
    recent = _entry(tmp_path, "cc03", 4000, NOW - 2 * HOUR)
    with config.override(cache_dir=tmp_path, cache_bytes=10_000) as cfg:
        removed = cache_bound.prune(cfg, now=NOW)
    assert removed > 4000 and not any(f.exists() for f in older + old)  # 12 kB > 10 kB: down to 8 kB at most
    assert all(f.exists() for f in recent)
    with config.override(cache_dir=tmp_path, cache_bytes=10_000) as cfg:
        assert cache_bound.prune(cfg, now=NOW) == 0  # under the bound: nothing to do


def test_files_beside_the_shards_are_not_entries(tmp_path):
    (tmp_path / "machine").mkdir()
    peaks = tmp_path / "machine" / "peaks.json"
    peaks.write_bytes(b"{}" * 5000)
    os.utime(peaks, (NOW - 9 * HOUR, NOW - 9 * HOUR))
    _entry(tmp_path, "ff06", 8000, NOW - 3 * HOUR)
    with config.override(cache_dir=tmp_path, cache_bytes=1000) as cfg:
        cache_bound.prune(cfg, now=NOW)
    assert peaks.exists()


def test_an_entry_used_within_the_hour_stays_whatever_the_bound(tmp_path):
    fresh = _entry(tmp_path, "dd04", 8000, NOW - 0.5 * HOUR)
    stale = _entry(tmp_path, "ee05", 8000, NOW - 3 * HOUR)
    with config.override(cache_dir=tmp_path, cache_bytes=1000) as cfg:
        cache_bound.prune(cfg, now=NOW)
    assert all(f.exists() for f in fresh) and not any(f.exists() for f in stale)


def test_a_cache_hit_makes_the_library_the_most_recently_used(tmp_path):
    source = "int tg_cache_bound_probe(void) { return 7; }\n"
    with config.override(cache_dir=tmp_path):
        library = build(source)
        os.utime(library, (NOW, NOW))
        assert build(source) == library
    assert library.stat().st_mtime > NOW + HOUR
