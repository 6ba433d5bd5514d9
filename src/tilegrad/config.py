"""Configuration: one dataclass, overridable by TILEGRAD_* environment variables read here only."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilegrad"


@dataclasses.dataclass(frozen=True)
class Config:
    cc: str | None = None  # C compiler; None picks the first of gcc, clang, cc found on PATH
    cflags: tuple[str, ...] = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno",
                               "-fno-trapping-math", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
    cache_dir: Path = dataclasses.field(default_factory=_default_cache_dir)
    num_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    debug: int = 0


def _from_environment() -> Config:
    env = os.environ
    kwargs: dict = {}
    if env.get("TILEGRAD_CC"):
        kwargs["cc"] = env["TILEGRAD_CC"]
    if env.get("TILEGRAD_CFLAGS"):
        kwargs["cflags"] = tuple(env["TILEGRAD_CFLAGS"].split())
    if env.get("TILEGRAD_CACHE_DIR"):
        kwargs["cache_dir"] = Path(env["TILEGRAD_CACHE_DIR"])
    if env.get("TILEGRAD_NUM_THREADS"):
        kwargs["num_threads"] = int(env["TILEGRAD_NUM_THREADS"])
    if env.get("TILEGRAD_DEBUG"):
        kwargs["debug"] = int(env["TILEGRAD_DEBUG"])
    return Config(**kwargs)


_current = _from_environment()


def get() -> Config:
    """The active configuration."""
    return _current


@contextlib.contextmanager
def override(**changes):
    """Temporarily replace fields of the active configuration (tests: `with config.override(cc="clang")`)."""
    global _current
    saved = _current
    _current = dataclasses.replace(saved, **changes)
    try:
        yield _current
    finally:
        _current = saved
