"""Compiler driver and build cache: C source in, a shared library on disk out, each source compiled once.

A library lives at `cache_dir/<key[:2]>/<key>.so`, where the key hashes the source, the flags and the compiler's
identity (plus the host CPU when a flag says "native"), so a path always names the same bytes. Builds happen under
a per-key file lock and finish with an atomic rename, so concurrent builders and killed processes never leave a
partial library behind. The source is kept next to the library as `<key>.c` for debugging. The cache is kept
under `Config.cache_bytes`, least recently used entries first (`cache_bound.py`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import config, metrics
from ..config import Config
from ..errors import BuildError
from ..target import host
from . import cache_bound

_log = logging.getLogger(__name__)

_CANDIDATES = ("gcc", "clang", "cc")
_INSTALL_HINT = (
    "install gcc (Debian/Ubuntu: apt install gcc; Fedora: dnf install gcc; macOS: xcode-select --install) "
    "or clang, or set TILEGRAD_CC to the path of a C compiler"
)
_LIBS = ("-lm",)  # after the source: generated code may call expf, tanhf, erff, ...
_MAX_DIAGNOSTIC_CHARS = 4000


def find_compiler(cfg: Config | None = None) -> str:
    """The absolute path of the C compiler to use: `cfg.cc` if set, else the first of gcc, clang, cc on PATH."""
    cfg = cfg or config.get()
    if cfg.cc:
        path = shutil.which(cfg.cc)
        if path is None:
            raise BuildError(f"C compiler {cfg.cc!r} (config cc / TILEGRAD_CC) not found: {_INSTALL_HINT}")
        return path
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path is not None:
            return path
    raise BuildError(f"no C compiler found (looked for {', '.join(_CANDIDATES)} on PATH): {_INSTALL_HINT}")


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    """The first line of `cc --version`; part of the cache key, so upgrading the compiler rebuilds everything."""
    try:
        proc = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"cannot run C compiler {cc}: {e}; {_INSTALL_HINT}") from e
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise BuildError(f"{cc} --version failed (exit {proc.returncode}): {_trim(proc.stderr)}")
    return lines[0]


def _key(source: str, flags: Sequence[str], cc: str) -> str:
    h = hashlib.sha256()
    parts = [source, *flags, *_LIBS, compiler_identity(cc)]
    if any("native" in flag for flag in flags):
        parts.append(host().identity())
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def check_sanitizer_runtime(cfg: Config) -> None:
    """Refuse to build for a sanitizer whose runtime this process lacks: loading such a library would abort it."""
    if cfg.sanitize == "address" and not hasattr(ctypes.CDLL(None), "__asan_init"):
        raise BuildError("kernels built with sanitize='address' (TILEGRAD_SANITIZE) load only in a process started "
                         "with AddressSanitizer's runtime first: LD_PRELOAD=$(gcc -print-file-name=libasan.so) "
                         "ASAN_OPTIONS=detect_leaks=0 python ...; benchmarks/asan_check.py does this for you")


def build(source: str, *, cfg: Config | None = None) -> Path:
    """Compile C `source` into a shared library (or find it in the cache) and return the library's path."""
    cfg = cfg or config.get()
    check_sanitizer_runtime(cfg)
    cc = find_compiler(cfg)

    def produce(stem: Path, library: Path) -> None:
        c_file = stem.with_suffix(".c")
        c_file.write_text(source)
        _into_place(cc, cfg, [str(c_file)], library, str(c_file))

    return cached(_key(source, cfg.compile_flags, cc), cfg, produce)


def build_workers(cfg: Config | None = None) -> int:
    """How many C files `build_many` compiles at once."""
    return max(1, (cfg or config.get()).num_threads)


def build_many(sources: Sequence[str], *, cfg: Config | None = None) -> Path:
    """One shared library from several C translation units, compiled in parallel and linked (a whole model's
    kernels: one file per chunk keeps each gcc process small and uses every core)."""
    cfg = cfg or config.get()
    check_sanitizer_runtime(cfg)
    cc = find_compiler(cfg)

    def produce(stem: Path, library: Path) -> None:
        c_files = [stem.with_suffix(f".{i}.c") for i in range(len(sources))]
        for c_file, source in zip(c_files, sources):
            c_file.write_text(source)
        objects = [c.with_suffix(".o") for c in c_files]
        compile_flags = [flag for flag in cfg.compile_flags if flag != "-shared"]
        try:
            with ThreadPoolExecutor(max_workers=build_workers(cfg)) as pool:
                procs = list(pool.map(lambda co: _run([cc, *compile_flags, "-c", "-o", str(co[1]), str(co[0])], cfg),
                                      zip(c_files, objects)))
            for c_file, proc in zip(c_files, procs):
                if proc.returncode != 0:
                    raise BuildError(_failure(proc.args, proc, str(c_file)))
            _into_place(cc, cfg, [str(o) for o in objects], library, str(library))
        finally:
            for o in objects:
                with contextlib.suppress(FileNotFoundError):
                    o.unlink()

    return cached(_key("\0\0".join(sources) + f"\0{len(sources)} units", cfg.compile_flags, cc), cfg, produce)


def cached(key: str, cfg: Config, produce, suffix: str = ".so") -> Path:
    """The library (or other product named by `suffix`) for `key`: from the cache, or made by
    `produce(stem, library)` under the key's lock."""
    shard = Path(cfg.cache_dir) / key[:2]
    library = shard / f"{key}{suffix}"
    if library.exists():
        metrics.bump("build.cache_hit")
        cache_bound.touch(library)
        return library
    shard.mkdir(parents=True, exist_ok=True)
    with _locked(shard / f"{key}.lock"):
        if library.exists():  # another process finished it while we waited for the lock
            metrics.bump("build.cache_hit")
            return library
        produce(shard / key, library)
    metrics.bump("build.compiled")
    cache_bound.note_build(cfg)
    return library


def assemble(source: str, *, cfg: Config | None = None) -> str:
    """The assembly the compiler emits for `source` with the build flags; lets tests check vectorisation (zmm)."""
    cfg = cfg or config.get()
    cc = find_compiler(cfg)
    flags = [flag for flag in cfg.compile_flags if flag != "-shared"]
    cmd = [cc, *flags, "-S", "-o", "-", "-x", "c", "-"]
    proc = _run(cmd, cfg, stdin=source)
    if proc.returncode != 0:
        raise BuildError(_failure(cmd, proc, "<stdin>"))
    return proc.stdout


def _into_place(cc: str, cfg: Config, inputs: list[str], library: Path, what: str) -> None:
    """Compile or link `inputs` into a temporary file beside `library`, then rename it into place (atomic on
    POSIX), so no reader ever sees a partial library."""
    fd, tmp = tempfile.mkstemp(dir=library.parent, prefix=f"{library.stem}.", suffix=".tmp")
    os.close(fd)
    try:
        cmd = [cc, *cfg.compile_flags, "-o", tmp, *inputs, *_LIBS]
        proc = _run(cmd, cfg)
        if proc.returncode != 0:
            raise BuildError(_failure(cmd, proc, what))
        os.replace(tmp, library)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_into_place(text: str, path: Path) -> None:
    """Write `text` to a temporary file beside `path`, then rename it into place (atomic on POSIX)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _run(cmd: list[str], cfg: Config, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    if cfg.debug >= 4:
        _log.info("compile: %s", shlex.join(cmd))
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    except OSError as e:
        raise BuildError(f"cannot run C compiler {cmd[0]}: {e}; {_INSTALL_HINT}") from e


def _failure(cmd: list[str], proc: subprocess.CompletedProcess[str], source: str) -> str:
    return (
        f"C compiler failed (exit {proc.returncode}) on {source}\n"
        f"command: {shlex.join(cmd)}\n"
        f"{_trim(proc.stderr)}"
    )


def _trim(text: str) -> str:
    """Keep the head of compiler output: the first errors are the ones that explain the rest."""
    text = text.strip()
    if len(text) <= _MAX_DIAGNOSTIC_CHARS:
        return text
    rest = text[_MAX_DIAGNOSTIC_CHARS:].count("\n") + 1
    return f"{text[:_MAX_DIAGNOSTIC_CHARS]}\n... ({rest} more lines)"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path`; the OS releases it if the holder dies, so no stale locks."""
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
