"""A model whose input shapes are known only when it is called, compiled once per distinct call signature.

tilegrad compiles static shapes. A model with symbolic input dimensions, or with *value inputs* (integer inputs
whose values decide shapes: a Reshape's target shape, Tile's repeats, TopK's k, ...), becomes a
`SpecializingModule`: each call computes a key from its inputs' shapes and dtypes and the values of its value
inputs, compiles a `Module` for that key on first sight and calls it. Each distinct value of a value input
compiles once. The specialisations are kept in memory, at most `max_specializations` (64 by default), the least
recently used evicted first; concurrent calls with the same new key wait for one compile. `save` writes the
model and every specialisation compiled so far; `load` restores them without compiling and still compiles new
keys.

A sequence or optional input or output is a list or None at the call and tensors inside (`structured.py`): the
length of each sequence input and the presence of each optional one are part of the key, and each specialisation
records the form of each output, by which its Module's tensors are regrouped.

A model of plain tensors given a `compile_dynamic` makes its dimensions dynamic as calls change them
(`automatic_dims.py`): the first signature compiles fixed, a later one that changes a dimension compiles one
dynamic module that every call within its bounds runs; a signature compiled fixed before keeps its module. Where
the dynamic compile fails (an op the symbolic kernels do not cover yet), the module says why once and
specialises per signature as before.

The runtime does not import the frontend: whoever makes the module passes a `compile` function (shapes, values,
input forms -> `Compiled`) and the inputs' descriptions (`DynamicInput`); `load` takes a factory that makes both
again from the saved model and options.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from .. import metrics
from . import saved
from .automatic_dims import Bounds, DimensionWatch, admits
from ..errors import KernelCallError, ModuleFormatError, TilegradError
from .module import Module, bind_arguments
from .module import load as load_module
from .peaks import MachinePeaks
from .profile import Profile
from .structured import TENSOR, Form, flat_names, regroup, split

MANIFEST = "specializing.json"
MODEL = "model.onnx"
DYNAMIC = "dynamic"  # the subdirectory of a saved module's dynamic module
FORMAT = 1
_log = logging.getLogger(__name__)
MAX_SPECIALIZATIONS = 64


class DynamicInput(Protocol):
    """An input as the model declares it: `dims` of ints (static) and names (symbolic), or None (any shape)."""

    name: str
    dtype: str
    dims: tuple[int | str, ...] | None
    kind: str  # "tensor", "sequence", "optional(tensor)" or "optional(sequence)"; dtype and dims are its tensors'

    @property
    def value_needed(self) -> bool: ...


class Compiled(NamedTuple):
    """A specialisation's Module, and the form of each model output (how its tensors regroup)."""

    module: Module
    outputs: tuple[Form, ...]


Compile = Callable[[Mapping[str, tuple[int, ...]], Mapping[str, np.ndarray], Mapping[str, Form]], Compiled]
CompileDynamic = Callable[[Bounds], Module]  # a module for every value of the dimensions within the bounds
Key = tuple  # (the form of each input, then per tensor: (name, shape, dtype, value as a tuple or None))


@dataclasses.dataclass(frozen=True)
class Specialization:
    """One compiled signature: the form of every input (a sequence's length, an optional's presence), the shape
    and dtype of every tensor (a sequence's `x.0`, `x.1`, ...), and the values of the value inputs."""

    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str]
    values: dict[str, list]
    forms: dict[str, Form]

    def to_json(self) -> dict:
        return {"shapes": {n: list(s) for n, s in self.shapes.items()}, "dtypes": self.dtypes,
                "values": self.values, "forms": self.forms}


class SpecializingModule:
    """Call with positional or named NumPy arrays, like `Module`; compiles a specialisation per new signature
    (shapes, dtypes, values of value inputs) and keeps the `max_specializations` most recently used. Safe to call
    from several threads at once."""

    def __init__(self, model: bytes, options: dict, inputs: Sequence[DynamicInput], outputs: Sequence[str],
                 compile: Compile, max_specializations: int = MAX_SPECIALIZATIONS,
                 compile_dynamic: CompileDynamic | None = None, axes: Mapping[str, Sequence[str | None]] = None):
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
        # Automatic dynamic dimensions: what calls gave each dimension, the dynamic module and its bounds, or why
        # it could not be compiled.
        self._compile_dynamic = compile_dynamic
        self._watch = DimensionWatch(axes) if compile_dynamic is not None else None
        self._dynamic: tuple[Bounds, Compiled] | None = None
        self.dynamic_unavailable: str | None = None
        self._dynamic_lock = threading.Lock()

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
        return [_specialization(k, self.inputs) for k in keys]

    def specialization(self, *args, **kwargs) -> Module:
        """The Module these arguments run on (a fixed one, or the dynamic one), compiled now if it is not yet."""
        return self._module_for(*self._arguments(args, kwargs)).module

    @property
    def automatic_dims(self) -> bool:
        """Whether dimensions that calls change become dynamic (rather than compiling every shape fixed)."""
        return self._watch is not None

    @property
    def dynamic_bounds(self) -> Bounds | None:
        """The dimensions of the dynamic module compiled so far (fixed sizes or bounds), or None."""
        return None if self._dynamic is None else dict(self._dynamic[0])

    def __call__(self, *args, **kwargs):
        forms, tensors = self._arguments(args, kwargs)
        compiled = self._module_for(forms, tensors)
        return regroup(compiled.outputs,
                       compiled.module(**{name: a for name, a, value_needed in tensors if not value_needed}))

    def profile(self, *args, repeats: int = 20, warmup: int = 2, peaks: MachinePeaks | None = None,
                **kwargs) -> Profile:
        """`Module.profile` of the specialisation these arguments run on (its outputs flat, as tensors)."""
        forms, tensors = self._arguments(args, kwargs)
        module = self._module_for(forms, tensors).module
        return module.profile(repeats=repeats, warmup=warmup, peaks=peaks,
                              **{name: a for name, a, value_needed in tensors if not value_needed})

    def _module_for(self, forms: tuple[Form, ...], tensors) -> Compiled:
        """What runs a call: the module kept for its signature, else the dynamic module where the dimensions are
        dynamic (compiled now where the call is the one that makes them so), else a specialisation."""
        key = self._key(forms, tensors)
        if self._watch is None:
            return self._compiled(key)
        with self._lock:
            future = self._cache.get(key)
            if future is not None and future.done() and future.exception() is None:
                self._cache.move_to_end(key)
                return future.result()
        dynamic = self._dynamic_for({name: a.shape for name, a, _ in tensors})
        return dynamic if dynamic is not None else self._compiled(key)

    def _dynamic_for(self, shapes: Mapping[str, tuple[int, ...]]) -> Compiled | None:
        """The dynamic module for a call of these shapes, compiled (again, with wider bounds) where the call
        changes a dimension it does not cover; None while no dimension has changed, or where it cannot be compiled."""
        values = self._watch.values(shapes)
        if values is None:
            return None
        current = self._dynamic  # (read once: a compile replaces it whole)
        if current is not None and admits(current[0], values):
            return current[1]
        with self._dynamic_lock:
            if self._dynamic is not None and admits(self._dynamic[0], values):
                return self._dynamic[1]
            self._watch.observe(values)
            if not self._watch.varied or self.dynamic_unavailable is not None:
                return None
            bounds = self._watch.bounds()
            start = time.perf_counter()
            try:
                module = self._compile_dynamic(bounds)
            except Exception as exc:  # noqa: BLE001  (any failure: the signature is specialised, as before)
                self.dynamic_unavailable = f"{type(exc).__name__}: {exc}"
                _log.warning("the model's dimensions %s change between calls, but a module for all their values "
                             "could not be compiled (%s); each new shape compiles a module of its own",
                             sorted(d for d, b in bounds.items() if not isinstance(b, int)), self.dynamic_unavailable)
                return None
            metrics.bump("dynamic_modules_compiled")
            _log.info("compiled one module for the dimensions %s in %.1f s", bounds, time.perf_counter() - start)
            self._dynamic = (bounds, Compiled(module, tuple(TENSOR for _ in self._outputs)))
            return self._dynamic[1]

    def _compiled(self, key: Key) -> Compiled:
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
                spec = _specialization(key, self.inputs)
                values = {n: np.asarray(v, spec.dtypes[n]).reshape(spec.shapes[n]) for n, v in spec.values.items()}
                start = time.perf_counter()
                future.set_result(self._compile(spec.shapes, values, spec.forms))
                metrics.bump("specializations_compiled")
                _log.info("compiled a specialisation for %s%s in %.1f s (%d kept, at most %d)",
                          ", ".join(f"{n} {list(s)}" for n, s in spec.shapes.items()),
                          f", values {spec.values}" if spec.values else "", time.perf_counter() - start,
                          len(self._cache), self.max_specializations)
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

    def _arguments(self, args, kwargs) -> tuple[tuple[Form, ...], list[tuple[str, np.ndarray, bool]]]:
        """The form of each input in declaration order, and its tensors (name, array, whether a value input),
        checked against the model's declared kinds, dtypes, ranks and static dims."""
        given = bind_arguments(self.input_names, args, kwargs)
        forms, tensors = [], []
        for i in self.inputs:
            form, parts = split(i.name, i.kind, given[i.name])
            forms.append(form)
            tensors += [(name, _checked(i, name, value), i.value_needed) for name, value in parts]
        return tuple(forms), tensors

    @staticmethod
    def _key(forms: tuple[Form, ...], tensors: Sequence[tuple[str, np.ndarray, bool]]) -> Key:
        return (forms, *((name, a.shape, str(a.dtype), tuple(a.ravel().tolist()) if value_needed else None)
                         for name, a, value_needed in tensors))

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
            for n, (key, compiled) in enumerate(kept):
                compiled.module.save(fresh / f"s{n}")
                rows.append({"directory": f"s{n}", **_specialization(key, self.inputs).to_json(),
                             "outputs": list(compiled.outputs)})
            manifest = {"format": FORMAT, "options": self.options, "max_specializations": self.max_specializations,
                        "model_sha256": hashlib.sha256(self.model).hexdigest(), "specializations": rows}
            with self._dynamic_lock:
                dynamic, seen = self._dynamic, dict(self._watch.seen) if self._watch is not None else {}
            if dynamic is not None:
                dynamic[1].module.save(fresh / DYNAMIC)
                manifest["dynamic"] = {"directory": DYNAMIC, "bounds": dynamic[0]}
            if seen:
                manifest["seen"] = seen
            (fresh / MANIFEST).write_text(json.dumps(manifest, indent=1))
            saved.rename_into_place(fresh, out)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        return Path(directory)


def _checked(i: DynamicInput, name: str, value) -> np.ndarray:
    """The array given for the tensor `name` of input `i` (itself, or an element of a sequence)."""
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    what = f"input {i.name!r}" if name == i.name else f"input {i.name!r} (its tensor {name!r})"
    if str(a.dtype) != i.dtype:
        raise KernelCallError(f"{what} expects dtype {i.dtype}, got {a.dtype}; convert it with "
                              f".astype(numpy.{i.dtype})")
    if i.dims is None:
        return a
    declared = "[" + ", ".join(map(str, i.dims)) + "]"
    if a.ndim != len(i.dims):
        raise KernelCallError(f"{what} expects rank {len(i.dims)} (shape {declared}), got shape "
                              f"{a.shape} (rank {a.ndim})")
    for k, (n, d) in enumerate(zip(a.shape, i.dims)):
        if isinstance(d, int) and n != d:
            raise KernelCallError(f"{what} expects shape {declared}, got {a.shape}: dimension {k} "
                                  f"must be {d}")
    return a


def _specialization(key: Key, inputs: Sequence[DynamicInput]) -> Specialization:
    forms, *tensors = key
    return Specialization({name: tuple(shape) for name, shape, _, _ in tensors},
                          {name: dtype for name, _, dtype, _ in tensors},
                          {name: list(value) for name, _, _, value in tensors if value is not None},
                          {i.name: form for i, form in zip(inputs, forms)})


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
            outputs = tuple(row.get("outputs", [TENSOR] * len(module.output_names)))
            future.set_result(Compiled(load_module(root / row["directory"]), outputs))
            module._cache[key] = future
        if module._watch is not None:
            for dim, (lo, hi) in manifest.get("seen", {}).items():
                module._watch.observe({dim: int(lo)})
                module._watch.observe({dim: int(hi)})
            if "dynamic" in manifest:
                bounds = {d: b if isinstance(b, int) else (int(b[0]), int(b[1]))
                          for d, b in manifest["dynamic"]["bounds"].items()}
                compiled = Compiled(load_module(root / manifest["dynamic"]["directory"]),
                                    tuple(TENSOR for _ in module.output_names))
                module._dynamic = (bounds, compiled)
    except (KeyError, TypeError, ValueError) as exc:
        raise ModuleFormatError(f"{root / MANIFEST} lacks a field or lists a specialisation that does not fit the "
                                f"model ({type(exc).__name__}: {exc}); save the module again") from None
    module._evict()
    return module


def _key_of(inputs: Sequence[DynamicInput], row: dict) -> Key:
    """The cache key of a saved specialisation, in the model's input order."""
    shapes, values, dtypes = row["shapes"], row["values"], row["dtypes"]
    forms = row.get("forms", {i.name: TENSOR for i in inputs})  # saved before sequences and optionals
    names = [(i, name) for i in inputs for name in flat_names(i.name, i.kind, forms[i.name])]
    if sorted(shapes) != sorted(name for _, name in names):
        raise ValueError(f"it names inputs {sorted(shapes)}")
    return (tuple(forms[i.name] for i in inputs),
            *((name, tuple(int(d) for d in shapes[name]), dtypes[name],
               tuple(values[name]) if i.value_needed else None) for i, name in names))


def _check_replaceable(out: Path) -> None:
    """Saving replaces the whole directory: refuse anything but a new or empty one, or a specializing module."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_saved(out))):
        raise ModuleFormatError(f"cannot save a specializing module to {out}: it exists and is not empty or a "
                                f"saved specializing module; save to a new or empty directory")
