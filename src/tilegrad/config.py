"""Configuration: one dataclass, overridable by TILEGRAD_* environment variables read here only."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilegrad"


# Compiler flags per sanitizer (`Config.sanitize`). Reports do not stop the process (-fsanitize-recover), so one
# run counts them all; libasan must be loaded first: benchmarks/asan_check.py re-executes itself with it preloaded.
SANITIZER_FLAGS = {"address": ("-fsanitize=address", "-fsanitize-recover=address", "-fno-omit-frame-pointer", "-g")}


def _quarter_of_memory() -> int:
    """A quarter of the machine's physical memory in bytes (1 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


@dataclasses.dataclass(frozen=True)
class Config:
    cc: str | None = None  # C compiler; None picks the first of gcc, clang, cc found on PATH
    cflags: tuple[str, ...] = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno",
                               "-fno-trapping-math", "-fopenmp", "-fPIC", "-shared", "-std=gnu11")
    extra_cflags: tuple[str, ...] = ()  # added after `cflags` (and a sanitizer's flags), where cflags replace them
    sanitize: str | None = None  # a key of SANITIZER_FLAGS: build every kernel with that sanitizer
    cache_dir: Path = dataclasses.field(default_factory=_default_cache_dir)
    cache_bytes: int = 4 << 30  # the build cache's bound: least recently used libraries go beyond it
    module_cache: bool = True  # keep whole compiled modules, so compiling a model again loads it (module_cache.py)
    num_threads: int = dataclasses.field(default_factory=lambda: usable_cpus())
    # How long an idle OpenMP thread spins before it sleeps, in microseconds (as GOMP_SPINCOUNT, set when the first
    # kernel loads unless the environment sets OMP_WAIT_POLICY or GOMP_SPINCOUNT). 0: it sleeps at once. A thread
    # that spins between calls stays runnable, so on a core another process holds it waits out that process's
    # time slice (40x slower); a sleeping one is woken promptly (docs/benchmarks.md, busy core). Within one call
    # a model's kernels share one region and wait at their own barrier (codegen/team.py), whatever this is.
    spin_us: int = 0
    # Whether kernels treat denormal floats (below 1.2e-38) as zero, as operands and as results (x86's FTZ and DAZ,
    # set on each thread for the call and restored after it, codegen/team.py). An Intel core takes a hundred cycles
    # and more per operation on a denormal, so a network whose activations decay into them runs many times slower
    # (docs/benchmarks.md, machine E). XLA and TensorFlow flush them too; off (TILEGRAD_FLUSH_DENORMALS=0) keeps
    # IEEE gradual underflow, as NumPy does.
    flush_denormals: bool = True
    # The largest constant the import computes (a ConstantOfShape, a Range, a folded node), in bytes: enough for
    # any real weight (VGG's 400 MB classifier), not enough for a hostile model to exhaust the machine.
    constant_bytes: int = dataclasses.field(default_factory=_quarter_of_memory)
    debug: int = 0

    def __post_init__(self) -> None:
        if self.sanitize is not None and self.sanitize not in SANITIZER_FLAGS:
            raise ValueError(f"sanitize={self.sanitize!r} (TILEGRAD_SANITIZE) is not one of "
                             f"{', '.join(SANITIZER_FLAGS)}; leave it unset for a normal build")

    @property
    def compile_flags(self) -> tuple[str, ...]:
        """What every build passes to the compiler: `cflags`, the sanitizer's flags, then `extra_cflags` (and the
        define that keeps denormals, where they are not flushed)."""
        keep = () if self.flush_denormals else ("-DTG_KEEP_DENORMALS",)
        return self.cflags + SANITIZER_FLAGS.get(self.sanitize, ()) + self.extra_cflags + keep


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (`taskset`), within its cgroup's CPU quota (a container's
    `--cpus`), as torch and ONNX Runtime count them; `os.cpu_count()` would start threads that only take turns."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cpus, quota) if quota else cpus)


def _cgroup_quota() -> int | None:
    """The CPUs a cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us`) quota allows, rounded up; None without one."""
    root = Path("/sys/fs/cgroup")
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota == "max":
            return None
        return -(-int(quota) // int(period))
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return -(-quota // period) if quota > 0 and period > 0 else None


def _from_environment() -> Config:
    env = os.environ
    kwargs: dict = {}
    if env.get("TILEGRAD_CC"):
        kwargs["cc"] = env["TILEGRAD_CC"]
    if env.get("TILEGRAD_CFLAGS"):
        kwargs["cflags"] = tuple(env["TILEGRAD_CFLAGS"].split())
    if env.get("TILEGRAD_EXTRA_CFLAGS"):
        kwargs["extra_cflags"] = tuple(env["TILEGRAD_EXTRA_CFLAGS"].split())
    if env.get("TILEGRAD_SANITIZE"):
        kwargs["sanitize"] = env["TILEGRAD_SANITIZE"]
    if env.get("TILEGRAD_CACHE_DIR"):
        kwargs["cache_dir"] = Path(env["TILEGRAD_CACHE_DIR"])
    if env.get("TILEGRAD_CACHE_BYTES"):
        kwargs["cache_bytes"] = int(env["TILEGRAD_CACHE_BYTES"])
    if env.get("TILEGRAD_MODULE_CACHE"):
        kwargs["module_cache"] = env["TILEGRAD_MODULE_CACHE"] not in ("0", "false", "no", "off")
    if env.get("TILEGRAD_NUM_THREADS"):
        kwargs["num_threads"] = int(env["TILEGRAD_NUM_THREADS"])
    if env.get("TILEGRAD_SPIN_US"):
        kwargs["spin_us"] = int(env["TILEGRAD_SPIN_US"])
    if env.get("TILEGRAD_FLUSH_DENORMALS"):
        kwargs["flush_denormals"] = env["TILEGRAD_FLUSH_DENORMALS"] not in ("0", "false", "no", "off")
    if env.get("TILEGRAD_CONSTANT_BYTES"):
        kwargs["constant_bytes"] = int(env["TILEGRAD_CONSTANT_BYTES"])
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
