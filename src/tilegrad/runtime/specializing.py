"""A model whose input shapes are known only when it is called, compiled once per distinct call signature.

tilegrad compiles static shapes. A model with symbolic input dimensions, or with *value inputs* (integer inputs
whose values decide shapes: a Reshape's target shape, Tile's repeats, TopK's k, ...), becomes a
`SpecializingModule`: each call computes a key from its inputs' shapes and dtypes and the values of its value
inputs, compiles a `Module` for that key on first sight and calls it. Each distinct value of a value input
compiles once. The specialisations are kept in memory, at most `max_specializations` (64 by default), the least
recently used evicted first; concurrent calls with the same new key wait for one compile. `save` writes the
model and every specialisation compiled so far; `load` restores them without compiling and still compiles new
keys.

The runtime does not import the frontend: whoever makes the module passes a `compile` function (shapes, values
-> Module) and the inputs' descriptions (`DynamicInput`); `load` takes a factory that makes both again from the
saved model and options.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

import numpy as np

from .. import metrics
from ..errors import KernelCallError, ModuleFormatError, TilegradError
from .module import Module
from .module import load as load_module

MANIFEST = "specializing.json"
MODEL = "model.onnx"
FORMAT = 1
MAX_SPECIALIZATIONS = 64


class DynamicInput(Protocol):
    """An input as the model declares it: `dims` of ints (static) and names (symbolic), or None (any shape)."""

    name: str
    dtype: str
    dims: tuple[int | str, ...] | None

    @property
    def value_needed(self) -> bool: ...


Compile = Callable[[Mapping[str, tuple[int, ...]], Mapping[str, np.ndarray]], Module]
Key = tuple  # per input: (name, shape, dtype, value as a tuple or None)


@dataclasses.dataclass(frozen=True)
class Specialization:
    """One compiled signature: the shape and dtype of every input, and the values of the value inputs."""

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    values: dict[str, list]

    def to_json(self) -> dict:
        return {"shapes": {n: list(s) for n, s in self.shapes.items()}, "dtypes": self.dtypes,
                "values": self.values}


class SpecializingModule:
    """Call with positional or named NumPy arrays, like `Module`; compiles a specialisation per new signature
    (shapes, dtypes, values of value inputs) and keeps the `max_specializations` most recently used. Safe to call
    from several threads at once."""

    def __init__(self, model: bytes, options: dict, inputs: Sequence[DynamicInput], outputs: Sequence[str],
                 compile: Compile, max_specializations: int = MAX_SPECIALIZATIONS):
        if max_specializations < 1:
            raise TilegradError(f"max_specializations must be at least 1, got {max_specializations!r}")
        self.model = model
        self.options = options
        self.inputs = tuple(inputs)
        self._outputs = list(outputs)
        self._compile = compile
        self.max_specializations = max_specializations
        self._lock = threading.Lock()
        self._cache: collections.OrderedDict[Key, Future] = collections.OrderedDict()

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def value_inputs(self) -> list[str]:
        """The inputs whose values are part of the key (each distinct value compiles once)."""
        return [i.name for i in self.inputs if i.value_needed]

    def specializations(self) -> list[Specialization]:
        """The signatures compiled and kept, least recently used first."""
        with self._lock:
            keys = [k for k, f in self._cache.items() if f.done() and f.exception() is None]
        return [_specialization(k) for k in keys]

    def specialization(self, *args, **kwargs) -> Module:
        """The Module these arguments run on, compiled now if it is not yet."""
        return self._module(self._key(self._arguments(args, kwargs)))

    def __call__(self, *args, **kwargs):
        arrays = self._arguments(args, kwargs)
        module = self._module(self._key(arrays))
        return module(**{i.name: a for i, a in zip(self.inputs, arrays) if not i.value_needed})

    def _module(self, key: Key) -> Module:
        """The compiled module of `key`: from the cache, or compiled by this call while others wait for it."""
        with self._lock:
            future = self._cache.get(key)
            mine = future is None
            if mine:
                future = self._cache[key] = Future()
                self._evict()
            else:
                self._cache.move_to_end(key)
        if mine:
            try:
                spec = _specialization(key)
                values = {n: np.asarray(v, spec.dtypes[n]).reshape(spec.shapes[n]) for n, v in spec.values.items()}
                future.set_result(self._compile(spec.shapes, values))
                metrics.bump("specializations_compiled")
            except BaseException as exc:  # noqa: BLE001  (handed to the calls waiting for it, then raised)
                with self._lock:
                    if self._cache.get(key) is future:
                        del self._cache[key]  # a later call tries again
                future.set_exception(exc)
        return future.result()

    def _evict(self) -> None:
        while len(self._cache) > self.max_specializations:
            self._cache.popitem(last=False)
            metrics.bump("specializations_evicted")

    def _arguments(self, args, kwargs) -> list[np.ndarray]:
        """The inputs in declaration order, checked against the model's declared dtypes, ranks and static dims."""
        names = self.input_names
        if len(args) > len(names):
            raise KernelCallError(f"the model takes {len(names)} input(s) ({', '.join(names)}), got {len(args)} "
                                  f"positional arguments")
        given = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise KernelCallError(f"the model has no input {name!r}; its inputs are {names}")
            if name in given:
                raise KernelCallError(f"input {name!r} given twice")
            given[name] = value
        missing = [n for n in names if n not in given]
        if missing:
            raise KernelCallError(f"missing input(s) {missing}; the model takes {names}")
        return [_checked(i, given[i.name]) for i in self.inputs]

    def _key(self, arrays: Sequence[np.ndarray]) -> Key:
        return tuple((i.name, a.shape, str(a.dtype), tuple(a.ravel().tolist()) if i.value_needed else None)
                     for i, a in zip(self.inputs, arrays))

    def save(self, directory) -> Path:
        """Write the model, its options and every specialisation kept (each a saved Module in a subdirectory) into
        `directory` (new, empty, or a saved specializing module, replaced whole by a rename)."""
        out = Path(os.path.abspath(directory))
        out.parent.mkdir(parents=True, exist_ok=True)
        _check_replaceable(out)
        with self._lock:
            kept = [(k, f.result()) for k, f in self._cache.items() if f.done() and f.exception() is None]
        fresh = out.parent / f".{out.name}.{uuid.uuid4().hex}.saving"
        fresh.mkdir()
        try:
            (fresh / MODEL).write_bytes(self.model)
            rows = []
            for n, (key, module) in enumerate(kept):
                module.save(fresh / f"s{n}")
                rows.append({"directory": f"s{n}", **_specialization(key).to_json()})
            manifest = {"format": FORMAT, "options": self.options, "max_specializations": self.max_specializations,
                        "model_sha256": hashlib.sha256(self.model).hexdigest(), "specializations": rows}
            (fresh / MANIFEST).write_text(json.dumps(manifest, indent=1))
            _rename_into_place(fresh, out)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        return Path(directory)


def _checked(i: DynamicInput, value) -> np.ndarray:
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if str(a.dtype) != i.dtype:
        raise KernelCallError(f"input {i.name!r} expects dtype {i.dtype}, got {a.dtype}; convert it with "
                              f".astype(numpy.{i.dtype})")
    if i.dims is None:
        return a
    declared = "[" + ", ".join(map(str, i.dims)) + "]"
    if a.ndim != len(i.dims):
        raise KernelCallError(f"input {i.name!r} expects rank {len(i.dims)} (shape {declared}), got shape "
                              f"{a.shape} (rank {a.ndim})")
    for k, (n, d) in enumerate(zip(a.shape, i.dims)):
        if isinstance(d, int) and n != d:
            raise KernelCallError(f"input {i.name!r} expects shape {declared}, got {a.shape}: dimension {k} "
                                  f"must be {d}")
    return a


def _specialization(key: Key) -> Specialization:
    return Specialization({name: tuple(shape) for name, shape, _, _ in key},
                          {name: dtype for name, _, dtype, _ in key},
                          {name: list(value) for name, _, _, value in key if value is not None})


def is_saved(directory) -> bool:
    """True when `directory` holds a saved specializing module (rather than a plain Module)."""
    return (Path(directory) / MANIFEST).is_file()


def load(directory, make: Callable[[bytes, dict, int], SpecializingModule]) -> SpecializingModule:
    """A module saved by `SpecializingModule.save`, its specialisations loaded, not compiled. `make(model,
    options, max_specializations)` builds the empty module (it knows how to compile); a missing, altered or
    inconsistent file is a ModuleFormatError."""
    root = Path(directory)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        model = (root / MODEL).read_bytes()
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ModuleFormatError(f"{root} is not a readable specializing module ({exc}); save it again") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModuleFormatError(f"{root / MANIFEST} is not a specializing module's manifest of format {FORMAT}; "
                                f"save it again")
    if hashlib.sha256(model).hexdigest() != manifest.get("model_sha256"):
        raise ModuleFormatError(f"{root / MODEL} does not match its checksum in the manifest (altered?); save "
                                f"the module again")
    try:
        module = make(model, manifest["options"], manifest["max_specializations"])
        for row in manifest["specializations"]:
            key = _key_of(module.inputs, row)
            future: Future = Future()
            future.set_result(load_module(root / row["directory"]))
            module._cache[key] = future
    except (KeyError, TypeError, ValueError) as exc:
        raise ModuleFormatError(f"{root / MANIFEST} lacks a field or lists a specialisation that does not fit the "
                                f"model ({type(exc).__name__}: {exc}); save the module again") from None
    module._evict()
    return module


def _key_of(inputs: Sequence[DynamicInput], row: dict) -> Key:
    """The cache key of a saved specialisation, in the model's input order."""
    shapes, values, dtypes = row["shapes"], row["values"], row["dtypes"]
    if sorted(shapes) != sorted(i.name for i in inputs):
        raise ValueError(f"it names inputs {sorted(shapes)}")
    return tuple((i.name, tuple(int(d) for d in shapes[i.name]), dtypes[i.name],
                  tuple(values[i.name]) if i.value_needed else None) for i in inputs)


def _check_replaceable(out: Path) -> None:
    """Saving replaces the whole directory: refuse anything but a new or empty one, or a specializing module."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_saved(out))):
        raise ModuleFormatError(f"cannot save a specializing module to {out}: it exists and is not empty or a "
                                f"saved specializing module; save to a new or empty directory")


def _rename_into_place(fresh: Path, out: Path) -> None:
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
