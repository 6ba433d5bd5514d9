"""The build cache kept under `Config.cache_bytes`: least recently used entries go first.

Every shape a dynamic module meets, every candidate a tuning run builds and every model compiled leaves a library in
the cache (`build.py`), so without a bound it grows with everything ever compiled. An entry is the files of one key
(`<key>.so`, its sources, its lock); a cache hit touches the library, so its modification time says when it was last
used. Each process looks at the cache's size at its first build and every PRUNE_EVERY builds after; when the
entries exceed the bound, the least recently used are removed until they fill at most KEEP_FRACTION of it. An entry
used within MIN_AGE_S is never removed: another process may have found it and be about to load it (a library
already loaded stays mapped when its file goes).
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from ..config import Config

PRUNE_EVERY = 64  # builds between two looks at the cache's size
KEEP_FRACTION = 0.8  # a prune leaves the cache at most this share of its bound, so the next build does not prune
MIN_AGE_S = 3600.0

_log = logging.getLogger(__name__)
_builds = 0


def note_build(cfg: Config) -> None:
    """A library was built into the cache: look at its size at the first build of the process and every
    PRUNE_EVERY builds after."""
    global _builds
    _builds += 1
    if _builds % PRUNE_EVERY == 1:
        prune(cfg)


def touch(library: Path) -> None:
    """The library was used: it is the most recently used entry now."""
    with contextlib.suppress(OSError):
        library.touch(exist_ok=True)


def _is_shard(path: Path) -> bool:
    return path.is_dir() and len(path.name) == 2 and all(c in "0123456789abcdef" for c in path.name)


def prune(cfg: Config, now: float | None = None) -> int:
    """Remove the least recently used entries (none used within MIN_AGE_S) while the cache holds more than
    KEEP_FRACTION of `cfg.cache_bytes`, once it holds more than all of it. Returns the bytes removed."""
    entries: dict[tuple[Path, str], list] = {}  # (shard, key) -> [bytes, last used, files]
    for shard in Path(cfg.cache_dir).iterdir() if Path(cfg.cache_dir).is_dir() else ():
        if not _is_shard(shard):  # the machine's measured peaks and other files live beside the shards
            continue
        for f in shard.iterdir():
            with contextlib.suppress(OSError):
                stat = f.stat()
                entry = entries.setdefault((shard, f.name.split(".")[0]), [0, 0.0, []])
                entry[0] += stat.st_size
                entry[1] = max(entry[1], stat.st_mtime)
                entry[2].append(f)
    total = sum(e[0] for e in entries.values())
    if total <= cfg.cache_bytes:
        return 0
    now = time.time() if now is None else now
    removed = 0
    for size, used, files in sorted(entries.values(), key=lambda e: e[1]):
        if total - removed <= KEEP_FRACTION * cfg.cache_bytes or now - used < MIN_AGE_S:
            break
        for f in files:
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
        removed += size
    _log.info("build cache %s: removed %d of %d bytes (bound %d)", cfg.cache_dir, removed, total, cfg.cache_bytes)
    return removed
