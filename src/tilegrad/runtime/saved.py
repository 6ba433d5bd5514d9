"""A module's directory on disk: its library, its weights and a manifest that checksums both and itself.

The weights are one raw file, each array at a 64-byte aligned offset the manifest records, so a reader may map
it instead of reading it: the module cache (module_cache.py) does, for its own entries, which are only ever
replaced by a rename and never rewritten in place.

Saving writes a fresh directory beside the target and renames it into place, so a process that loaded the old
module keeps the files it mapped (a library rewritten in place would crash it). Loading checks the checksums of
the very bytes it then uses, and loads the library from the build cache under the name of its checksum: the
code that runs is the code that was checked, and a later save over the directory cannot change it. The library
is native code that runs with the caller's rights: load only directories you trust. The checksums catch
truncated, edited and mismatched files, not a deliberate forgery.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .. import config as _config
from ..errors import ModuleFormatError
from ..mapped import release_pages

MANIFEST = "manifest.json"
LIBRARY = "model.so"
WEIGHTS = "weights.bin"
FORMAT = 3
ALIGN = 64  # each weight's offset in the weights file
ENTRY = "tg_run"
_CHECKSUM = "manifest_sha256"  # the manifest's own checksum, over every other field


def write(directory, library: Path, spec: dict, weights: list[np.ndarray]) -> Path:
    """Save into `directory` (new, empty, or a saved module, which is replaced whole) and return its path."""
    out = Path(os.path.abspath(directory))  # "." has no name to rename
    out.parent.mkdir(parents=True, exist_ok=True)
    _check_replaceable(out)
    fresh = out.parent / f".{out.name}.{uuid.uuid4().hex}.saving"
    fresh.mkdir()
    try:
        shutil.copyfile(library, fresh / LIBRARY)
        layout = _write_weights(fresh / WEIGHTS, weights)
        body = {"format": FORMAT, "entry": ENTRY, "spec": spec, "weights": layout,
                "sha256": {LIBRARY: _file_sha256(fresh / LIBRARY), WEIGHTS: weights_digest(_weights_bytes(
                    fresh / WEIGHTS, mapped=True), release=True)},
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (fresh / MANIFEST).write_text(json.dumps({**body, _CHECKSUM: _json_sha256(body)}, indent=1))
        rename_into_place(fresh, out)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return Path(directory)


def _write_weights(path: Path, weights: list[np.ndarray]) -> list[list[int]]:
    """Write `weights` raw into one file, each at an ALIGN-aligned offset; returns [offset, bytes] per weight."""
    layout, offset = [], 0
    with open(path, "wb") as f:
        for w in weights:
            raw = np.ascontiguousarray(w).reshape(-1).view(np.uint8)
            offset = -(-offset // ALIGN) * ALIGN
            f.seek(offset)
            f.write(raw.data)
            layout.append([offset, raw.size])
            offset += raw.size
        f.truncate(offset)
    return layout


def read(directory, cfg: _config.Config | None = None, *, mapped: bool = False) -> tuple[Path, dict, list]:
    """The checked library (as a path in the build cache), spec (JSON) and weights of a saved module, each weight
    as its raw bytes (a flat uint8 array: `module.load` gives it its dtype and shape). With `mapped`, the weights
    are views of the file mapped read-only rather than read into memory: only for directories never rewritten in
    place. The files are opened through a descriptor of the directory, so they come from one save even if another
    save renames a new directory into place meanwhile; one that save deleted before it was opened makes the read
    start again."""
    root = Path(directory)
    for attempt in range(1, _READ_ATTEMPTS + 1):
        try:
            return _read_pinned(root, cfg, mapped)
        except _Replaced:
            time.sleep(0.002 * attempt)
    raise ModuleFormatError(f"{root} was replaced {_READ_ATTEMPTS} times while it was read (saved over again and "
                            f"again?); load it once the saves are done")


_READ_ATTEMPTS = 50


class _Replaced(Exception):
    """The directory being read was replaced by a save, and a file of it deleted before it was opened."""


def _read_pinned(root: Path, cfg: _config.Config | None, mapped: bool) -> tuple[Path, dict, list]:
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        if _saving(root):  # between the two renames of a save
            raise _Replaced from None
        raise ModuleFormatError(f"{root} is not a complete tilegrad module: {MANIFEST} is missing") from None
    with contextlib.ExitStack() as opened:
        opened.callback(os.close, fd)
        files = {}
        for name in (MANIFEST, LIBRARY, WEIGHTS):
            try:
                files[name] = opened.enter_context(open(os.open(name, os.O_RDONLY, dir_fd=fd), "rb"))
            except OSError:
                if _replaced(fd, root):
                    raise _Replaced from None
                raise ModuleFormatError(f"{root} is not a complete tilegrad module: {name} is missing") from None
        return _read_files(root, files, cfg, mapped)


def _read_files(root: Path, files: dict, cfg: _config.Config | None, mapped: bool) -> tuple[Path, dict, list]:
    manifest = _manifest(root / MANIFEST, files[MANIFEST].read())
    code = files[LIBRARY].read()
    if hashlib.sha256(code).hexdigest() != manifest["sha256"].get(LIBRARY):
        raise _altered(root / LIBRARY)
    data = _weights_bytes(files[WEIGHTS], mapped)
    if weights_digest(data) != manifest["sha256"].get(WEIGHTS):
        raise _altered(root / WEIGHTS)
    return (_cached_library(code, manifest["sha256"][LIBRARY], cfg), manifest["spec"],
            _weights(root / WEIGHTS, data, manifest["weights"]))


def _replaced(fd: int, root: Path) -> bool:
    """Whether the directory open as `fd` is no longer the one at `root` (a save put another there)."""
    try:
        now = os.stat(root)
    except OSError:
        return True
    pinned = os.fstat(fd)
    return (now.st_dev, now.st_ino) != (pinned.st_dev, pinned.st_ino)


def _saving(root: Path) -> bool:
    """Whether a save into `root` is under way: its fresh directory or the old one moved aside is beside it."""
    try:
        return any(p.name.startswith(f".{root.name}.") and p.name.endswith((".saving", ".old"))
                   for p in root.parent.iterdir())
    except OSError:
        return False


def _manifest(path: Path, text: bytes) -> dict:
    """The manifest read from `path`, checked: JSON, this format, its own checksum, the fields `read` uses."""
    try:
        manifest = json.loads(text.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModuleFormatError(f"{path} is not a valid manifest (not JSON: {exc}); save the module again") from None
    if not isinstance(manifest, dict):
        raise ModuleFormatError(f"{path} is not a valid manifest (not a JSON object); save the module again")
    if manifest.get("format") != FORMAT:
        raise ModuleFormatError(f"{path.parent} was saved in format {manifest.get('format')!r}; this version "
                                f"reads format {FORMAT}: compile and save the module again")
    claimed = manifest.pop(_CHECKSUM, None)
    if claimed != _json_sha256(manifest):
        raise ModuleFormatError(f"{path} does not match its own checksum (edited?); save the module again")
    if (manifest.get("entry") != ENTRY or not isinstance(manifest.get("sha256"), dict) or "spec" not in manifest
            or "weights" not in manifest):
        raise ModuleFormatError(f"{path} lacks its entry, checksums, spec or weights; save the module again")
    return manifest


_DIGEST_CHUNK = 16 << 20


def weights_digest(data: np.ndarray, *, release: bool = False) -> str:
    """The weights' checksum: the SHA-256 of the SHA-256s of their 16 MiB chunks, which threads compute side by
    side (hashlib lets go of the GIL): checking a large model's weights is part of every warm compile. With
    `release`, a mapped chunk's pages are handed back once hashed: a save that checksums the file it just wrote
    would otherwise hold the weights twice, the module's and the file's."""
    def digest(chunk: np.ndarray) -> bytes:
        value = hashlib.sha256(chunk).digest()
        if release:
            release_pages(chunk)
        return value

    chunks = [data[k:k + _DIGEST_CHUNK] for k in range(0, data.size, _DIGEST_CHUNK)]
    with ThreadPoolExecutor(max(1, min(len(chunks), _config.get().num_threads))) as pool:
        digests = list(pool.map(digest, chunks))
    return hashlib.sha256(b"".join(digests) + str(data.size).encode()).hexdigest()


def _weights_bytes(file, mapped: bool) -> np.ndarray:
    """The weights file's bytes (`file` open, or its path): mapped read-only, or read into an ALIGN-aligned buffer
    of this process."""
    if isinstance(file, Path):
        with open(file, "rb") as opened:
            return _weights_bytes(opened, mapped)
    size = os.fstat(file.fileno()).st_size
    if mapped and size:
        return np.frombuffer(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)
    buffer = np.empty(size + ALIGN, np.uint8)
    start = -buffer.ctypes.data % ALIGN
    data = buffer[start:start + size]
    if file.readinto(memoryview(data)) != size:
        raise _Replaced  # cut short while it was read: a save replaced it
    return data


def _weights(path: Path, data: np.ndarray, layout) -> list[np.ndarray]:
    """The raw bytes of each weight, by the manifest's [offset, bytes] list."""
    if not isinstance(layout, list) or not all(isinstance(e, list) and len(e) == 2 and all(
            isinstance(v, int) and v >= 0 for v in e) and e[0] + e[1] <= data.size for e in layout):
        raise ModuleFormatError(f"{path}: the manifest's weight offsets do not fit its {data.size} bytes; save "
                                f"the module again")
    return [data[offset:offset + nbytes] for offset, nbytes in layout]


def _cached_library(code: bytes, digest: str, cfg: _config.Config | None) -> Path:
    """`code` at a path in the build cache named by its checksum, so that path always holds these bytes."""
    cfg = cfg or _config.get()
    path = Path(cfg.cache_dir) / "modules" / f"{digest}.so"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{digest}.{uuid.uuid4().hex}.tmp")
        try:
            part.write_bytes(code)
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)
    return path


def _check_replaceable(out: Path) -> None:
    """Refuse to replace anything but an empty directory or a saved module: saving replaces the whole directory."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ModuleFormatError(f"cannot save a module to {out}: it exists and is not a directory")
    others = sorted(p.name for p in out.iterdir() if p.name not in (MANIFEST, LIBRARY, WEIGHTS))
    if others:
        raise ModuleFormatError(f"cannot save a module to {out}: it holds other files ({', '.join(others[:5])}), "
                                f"which saving would delete; save to a new or empty directory")


def rename_into_place(fresh: Path, out: Path) -> None:
    """Put directory `fresh` at `out`; an old `out` is moved aside first and deleted after, never rewritten, so a
    process running its libraries keeps them."""
    if not out.exists():
        os.rename(fresh, out)
        return
    old = out.parent / f".{out.name}.{uuid.uuid4().hex}.old"
    os.rename(out, old)
    try:
        os.rename(fresh, out)
    except OSError:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _altered(path: Path) -> ModuleFormatError:
    return ModuleFormatError(f"{path} does not match its checksum in the manifest (truncated or altered?); "
                             f"save the module again")


def _json_sha256(obj: dict) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
