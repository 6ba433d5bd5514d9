"""Compiled modules kept by what they were compiled from: compiling a model again loads it.

A warm compile used to redo everything but the C compiler (import, passes, lowering, rendering) to find its
libraries in the build cache: seconds for a ResNet-50. Here the whole module is kept under a key of everything
that decides it: the model's bytes (its file, or the bytes given, and any external data), the input shapes and
compile options given, the records database when one is read (its path, size and modification time: a tuning run
that adds records changes it), the configuration (compiler, flags, threads...), this machine's CPU and ISA, the
versions of NumPy and onnx, and tilegrad itself (a digest of its package's files, so a changed compiler never
serves a module the old one built). An entry is a saved module directory (`Module.save`, written whole by a
rename) under `<cache_dir>/compiled/<key>`; a hit loads it (`module.load`, its weights mapped, not read) and
marks it used. The entries are kept under a quarter of the build cache's bound, least recently used going first.
A model file's digest is remembered under `<cache_dir>/model_digests/` with the identity (inode, size,
modification and change times) of the file and of its external data, so that compiling an unchanged file again
reads and parses none of it (`quick_key`). `TILEGRAD_MODULE_CACHE=0` (or `Config.module_cache`) turns it off.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

from . import config as _config
from .backend import backend_for

SHARE_OF_CACHE = 0.25  # of `Config.cache_bytes`, for whole modules
_CHUNK = 1 << 24

_log = logging.getLogger(__name__)


def module_key(model, proto, input_shapes, options) -> str | None:
    """The key of compiling ONNX model `model` (loaded as `proto`) with `input_shapes` and `options`, or None
    where the module cache is off or does not apply (a target whose modules are not saved whole: a GPU's). A
    model file's digest is remembered (`quick_key`)."""
    if not _applies(options):
        return None
    files = None
    if isinstance(model, (str, Path)):  # as they are before they are read: one changed meanwhile is read again
        files = _identities([Path(model), *(Path(location) for location, _, _ in _distinct(proto))])
    h = hashlib.sha256()
    _model_bytes(h, model, proto)
    if files is not None:
        _remember(files, h.hexdigest())
    return _key(h.hexdigest(), input_shapes, options)


def quick_key(model, input_shapes, options) -> str | None:
    """`module_key` without reading or parsing the model: for a model file whose digest was remembered when it
    was last compiled, where neither it nor its external data files changed since (the same device, inode, size,
    modification and change times: a write changes the change time, which no tool sets back). Else None."""
    if not isinstance(model, (str, Path)) or not _applies(options):
        return None
    digest = _remembered(Path(model))
    return None if digest is None else _key(digest, input_shapes, options)


def _applies(options) -> bool:
    from .target import TARGETS

    return _config.get().module_cache and backend_for(TARGETS[options.target]()).saves_module


def _key(model_digest: str, input_shapes, options) -> str:
    from .target import host

    import numpy
    import onnx

    cfg = _config.get()
    h = hashlib.sha256()
    for part in (_package_digest(), numpy.__version__, onnx.__version__, host().identity(),
                 repr(dataclasses.replace(cfg, cache_dir=Path("."))), repr(sorted((input_shapes or {}).items())),
                 repr(options), _database_identity(options.db), model_digest):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:32]


def cached_module(key: str):
    """The module kept under `key`, loaded, or None."""
    from .runtime.module import load

    directory = _root() / key
    if not (directory / "manifest.json").exists():
        return None
    try:
        module = load(directory, mapped=True)
    except Exception as exc:  # noqa: BLE001 - a damaged entry is compiled again, and replaced
        _log.warning("module cache entry %s unreadable (%s); compiling again", directory, exc)
        return None
    os.utime(directory)
    return module


def keep_module(key: str, module) -> None:
    """Keep `module` under `key` (a failure to write is logged: the compile itself succeeded)."""
    try:
        module.save(_root() / key)
    except Exception as exc:  # noqa: BLE001
        _log.warning("module not kept in the cache (%s)", exc)
        return
    _prune(_config.get())


def _root() -> Path:
    return _config.get().cache_dir / "compiled"


@functools.cache
def _package_digest() -> str:
    """A digest of every file of the installed tilegrad package (its code and its C headers)."""
    package = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".h", ".c", ".json", ".npz"):
            h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _database_identity(db) -> str:
    if db is None:
        return "no records"
    path = Path(db)
    try:
        stat = path.stat()
    except OSError:
        return f"{path} missing"
    return f"{path.resolve()} {stat.st_size} {stat.st_mtime_ns}"


def _model_bytes(h, model, proto) -> None:
    """Feed `h` the model as given: a file's bytes (read in chunks), bytes, or a ModelProto's serialization; and
    the bytes of its external data, tensor by tensor."""
    from .frontend.onnx_file import external_references

    if isinstance(model, (str, Path)):
        _file_bytes(h, Path(model), 0, None)
    elif isinstance(model, (bytes, bytearray)):
        h.update(model)
    else:
        h.update(model.SerializeToString())
    for location, offset, length in external_references(proto):
        _file_bytes(h, Path(location), offset, length)


def _distinct(proto) -> list[tuple]:
    from .frontend.onnx_file import external_references

    return list({location: (location, offset, length) for location, offset, length in
                 external_references(proto)}.values())


def _identity(path: Path) -> list[int]:
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _memo_path(path: Path) -> Path:
    name = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    return _config.get().cache_dir / "model_digests" / f"{name}.json"


def _identities(paths: list[Path]) -> list | None:
    """[resolved path, identity] of each file (the model first, then its external data), or None if one is gone."""
    try:
        return [[str(p.resolve()), _identity(p)] for p in paths]
    except OSError:
        return None


def _remember(files: list | None, digest: str) -> None:
    """Record `digest` for the model file and external data files `files` (`_identities`, taken before the digest
    read them)."""
    if files is None:
        return
    try:
        memo = {"path": files[0][0], "identity": files[0][1], "digest": digest, "external": files[1:]}
        out = _memo_path(Path(files[0][0]))
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(f"{out.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
        part.write_text(json.dumps(memo))
        os.replace(part, out)
    except OSError as exc:
        _log.info("model digest not remembered (%s)", exc)


def _remembered(path: Path) -> str | None:
    try:
        memo = json.loads(_memo_path(path).read_text())
        fresh = (memo["path"] == str(path.resolve()) and memo["identity"] == _identity(path)
                 and all(_identity(Path(p)) == identity for p, identity in memo["external"]))
        return memo["digest"] if fresh else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _file_bytes(h, path: Path, offset: int, length: int | None) -> None:
    with open(path, "rb") as f:
        f.seek(offset)
        left = length
        while left is None or left > 0:
            chunk = f.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)


def _prune(cfg: _config.Config) -> None:
    """Remove the least recently used entries while the entries exceed their share of the cache's bound."""
    root = _root()
    entries = []
    for directory in root.iterdir() if root.is_dir() else ():
        try:
            size = sum(f.stat().st_size for f in directory.iterdir())
            entries.append((directory.stat().st_mtime, size, directory))
        except OSError:
            continue
    total, bound = sum(size for _, size, _ in entries), SHARE_OF_CACHE * cfg.cache_bytes
    for _, size, directory in sorted(entries):
        if total <= bound:
            break
        shutil.rmtree(directory, ignore_errors=True)
        total -= size
        _log.info("module cache: removed %s (%d bytes) at %s", directory.name, size, time.ctime())
