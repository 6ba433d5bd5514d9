"""A module's directory on disk: its library, its weights and a manifest that checksums both and itself.

Saving writes a fresh directory beside the target and renames it into place, so a process that loaded the old
module keeps the files it mapped (a library rewritten in place would crash it). Loading checks the checksums of
the very bytes it then uses, and loads the library from the build cache under the name of its checksum: the
code that runs is the code that was checked, and a later save over the directory cannot change it. The library
is native code that runs with the caller's rights: load only directories you trust. The checksums catch
truncated, edited and mismatched files, not a deliberate forgery.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
import zipfile
from pathlib import Path

import numpy as np

from .. import config as _config
from ..errors import ModuleFormatError

MANIFEST = "manifest.json"
LIBRARY = "model.so"
WEIGHTS = "weights.npz"
FORMAT = 2
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
        np.savez(fresh / WEIGHTS, *weights)
        body = {"format": FORMAT, "entry": ENTRY, "spec": spec,
                "sha256": {LIBRARY: _file_sha256(fresh / LIBRARY), WEIGHTS: _file_sha256(fresh / WEIGHTS)},
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (fresh / MANIFEST).write_text(json.dumps({**body, _CHECKSUM: _json_sha256(body)}, indent=1))
        rename_into_place(fresh, out)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    return Path(directory)


def read(directory, cfg: _config.Config | None = None) -> tuple[Path, dict, list[np.ndarray]]:
    """The checked library (as a path in the build cache), spec (JSON) and weights of a saved module. A save over
    the directory while it is read (its manifest from one version, its library from the next, or the moment the
    directory is renamed aside) is read again, a few times; a file that fails its checks on a directory that no
    save touched is refused."""
    root = Path(directory)
    attempt = 0
    while True:
        before = _identity(root)
        try:
            return _read_once(root, cfg)
        except ModuleFormatError:
            attempt += 1
            if attempt == _READ_ATTEMPTS or not (_identity(root) != before or _saving(root)):
                raise
            time.sleep(0.005 * attempt)


_READ_ATTEMPTS = 20


def _read_once(root: Path, cfg: _config.Config | None) -> tuple[Path, dict, list[np.ndarray]]:
    for name in (MANIFEST, LIBRARY, WEIGHTS):
        if not (root / name).is_file():
            raise ModuleFormatError(f"{root} is not a complete tilegrad module: {name} is missing")
    manifest = _manifest(root / MANIFEST)
    code = (root / LIBRARY).read_bytes()
    if hashlib.sha256(code).hexdigest() != manifest["sha256"].get(LIBRARY):
        raise _altered(root / LIBRARY)
    if _file_sha256(root / WEIGHTS) != manifest["sha256"].get(WEIGHTS):
        raise _altered(root / WEIGHTS)
    return _cached_library(code, manifest["sha256"][LIBRARY], cfg), manifest["spec"], _weights(root / WEIGHTS)


def _identity(root: Path) -> tuple[int, int] | None:
    """Which directory `root` names now (a save renames a new one into place), None while none is there."""
    try:
        st = os.stat(root)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _saving(root: Path) -> bool:
    """Whether a save into `root` is under way: its fresh directory or the old one moved aside is beside it."""
    try:
        return any(p.name.startswith(f".{root.name}.") and p.name.endswith((".saving", ".old"))
                   for p in root.parent.iterdir())
    except OSError:
        return False


def _manifest(path: Path) -> dict:
    """The manifest at `path`, checked: JSON, this format, its own checksum, the fields `read` uses."""
    try:
        manifest = json.loads(path.read_text())
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
    if manifest.get("entry") != ENTRY or not isinstance(manifest.get("sha256"), dict) or "spec" not in manifest:
        raise ModuleFormatError(f"{path} lacks its entry, checksums or spec; save the module again")
    return manifest


def _weights(path: Path) -> list[np.ndarray]:
    """The arrays of a weights file written by `write`, in order."""
    try:
        with np.load(path, allow_pickle=False) as data:
            names = [f"arr_{i}" for i in range(len(data.files))]
            if sorted(data.files) != sorted(names):
                raise ModuleFormatError(f"{path} holds arrays {data.files}, not arr_0..arr_{len(names) - 1}")
            return [data[n] for n in names]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ModuleFormatError(f"{path} is not a readable weights file ({exc}); save the module again") from None


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
