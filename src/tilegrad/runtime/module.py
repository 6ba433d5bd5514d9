"""A compiled model: its native library, its weights and its workspaces, callable with NumPy arrays.

The library's entry `tg_run(void** args)` takes the inputs, the outputs, the weights and one workspace buffer (and
the values of the dynamic dimensions, where the module has any: `dims.py` reads them from the inputs). The
weights are bound here once, so a call passes only the inputs. Each call in flight has a frame of its own (a
workspace, and the entry's argument array with the weights' and the workspace's addresses already in it), taken from
a small pool and given back after the call: concurrent calls from several threads never share intermediates, a lone
call pays no lock, and a call writes only its inputs' and outputs' addresses. Inputs are checked by name, dtype and
shape, and copied only when not aligned and C-contiguous. A module saves to a directory that loads in a fresh
process without the model (`saved.py`). Weights the library can compute from smaller arrays (`DerivedWeight`) are
computed when the module is built, and saved as those arrays. `profile` times each kernel of the library
(`profile.py`)."""

from __future__ import annotations

import ctypes
import dataclasses
import math
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from .. import config as _config
from ..errors import KernelCallError, ModuleFormatError, ShapeError
from ..mapped import owned
from . import saved
from .dims import Dim, Extent, bind, shape_at
from .kernel import BufferSpec, Kernel, address
from .peaks import MachinePeaks
from .profile import KernelSite, Profile, profile_run
from .timing import time_kernel


@dataclasses.dataclass(frozen=True)
class DerivedWeight:
    """Weight number `weight`, which the library's function `kernel(source, weight)` computes from a smaller
    array (Winograd's transformed weights from the convolution's): a saved module stores the source instead."""

    weight: int
    source: BufferSpec
    kernel: str


def benchmark_inputs(specs) -> dict[str, np.ndarray]:
    """Random inputs of `specs` (name -> array) for timing: standard normal floats, zeros for integers, drawn in
    order from one seed, so that another runtime timed beside a module (peers.py) runs on the same values."""
    rng = np.random.default_rng(0)
    return {s.name: rng.standard_normal(s.shape).astype(s.dtype) if s.dtype.startswith("float")
            else np.zeros(s.shape, s.dtype) for s in specs}


@dataclasses.dataclass(frozen=True)
class ModuleSpec:
    inputs: tuple[BufferSpec, ...]
    outputs: tuple[BufferSpec, ...]
    weights: tuple[BufferSpec, ...]
    workspace_bytes: int
    unshared_bytes: int  # intermediate memory without reuse, for reports
    derived: tuple[DerivedWeight, ...] = ()
    kernels: tuple[KernelSite, ...] = ()  # the entry's kernel calls, in order, for `Module.profile`
    dims: tuple[Dim, ...] = ()  # dynamic dimensions, whose values each call passes after the workspace

    @staticmethod
    def of(inputs, outputs, weights, workspace_bytes: int, unshared_bytes: int,
           derived: tuple[DerivedWeight, ...] = (), kernels: tuple[KernelSite, ...] = (), dims: tuple[Dim, ...] = (),
           shape=tuple) -> "ModuleSpec":
        """The spec of values with `.name`, `.shape`, `.dtype`; `shape` makes a value's shape the runtime's (its
        dynamic dimensions as `Extent`s)."""
        def specs(values):
            return tuple(BufferSpec(v.name, shape(v.shape), v.dtype) for v in values)
        return ModuleSpec(specs(inputs), specs(outputs), specs(weights), workspace_bytes, unshared_bytes, derived,
                          kernels, dims)

    def to_json(self) -> dict:
        def row(s):
            return {"name": s.name, "shape": [d.to_json() if isinstance(d, Extent) else d for d in s.shape],
                    "dtype": s.dtype}

        def rows(specs):
            return [row(s) for s in specs]
        return {"inputs": rows(self.inputs), "outputs": rows(self.outputs), "weights": rows(self.weights),
                "workspace_bytes": self.workspace_bytes, "unshared_bytes": self.unshared_bytes,
                "derived": [{"weight": d.weight, "source": row(d.source), "kernel": d.kernel} for d in self.derived],
                "kernels": [k.to_json() for k in self.kernels], "dims": [d.to_json() for d in self.dims]}

    @staticmethod
    def from_json(obj: dict) -> "ModuleSpec":
        """The spec a manifest holds; a missing or ill-typed field is a ModuleFormatError naming it."""
        def specs(key):
            rows = obj[key]
            if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r["name"], str)
                                                     and isinstance(r["shape"], list) for r in rows):
                raise TypeError(f"{key!r} is not a list of buffers with a name, a shape and a dtype")
            return tuple(BufferSpec(r["name"], tuple(Extent.from_json(d) if isinstance(d, dict) else d
                                                     for d in r["shape"]), r["dtype"]) for r in rows)

        def count(key):
            if type(obj[key]) is not int or obj[key] < 0:
                raise TypeError(f"{key!r} is {obj[key]!r}, not a byte count")
            return obj[key]

        def derived(weights):
            rows = obj.get("derived", [])
            if not isinstance(rows, list):
                raise TypeError("'derived' is not a list")
            out = []
            for r in rows:
                k, src = r["weight"], r["source"]
                if type(k) is not int or not 0 <= k < len(weights) or not isinstance(r["kernel"], str):
                    raise TypeError(f"derived weight {r!r} names no weight or kernel")
                out.append(DerivedWeight(k, BufferSpec(src["name"], tuple(src["shape"]), src["dtype"]), r["kernel"]))
            if len({d.weight for d in out}) != len(out):
                raise TypeError("a weight is derived twice")
            return tuple(out)

        def kernels():
            rows = obj.get("kernels", [])  # absent in modules saved before profiling: they do not profile
            if not isinstance(rows, list):
                raise TypeError("'kernels' is not a list")
            return tuple(KernelSite.from_json(r) for r in rows)

        try:
            weights = specs("weights")
            return ModuleSpec(specs("inputs"), specs("outputs"), weights, count("workspace_bytes"),
                              count("unshared_bytes"), derived(weights), kernels(),
                              tuple(Dim.from_json(d) for d in obj.get("dims", [])))
        except KeyError as exc:
            raise ModuleFormatError(f"the manifest's spec has no field {exc}") from None
        except (TypeError, ShapeError) as exc:
            raise ModuleFormatError(f"the manifest's spec is not valid: {exc}") from None


class Module:
    """Call with positional or named NumPy arrays; returns the output array (or a list for several). Safe to
    call from several threads at once."""

    def __init__(self, library: Path, spec: ModuleSpec, weights: Sequence[np.ndarray | None],
                 cfg: _config.Config | None = None, sources: Sequence[np.ndarray] = (), keep_mapped: bool = False):
        """`weights` in the order of `spec.weights`; a derived one (`spec.derived`) may be None, and is then
        computed by the library from its source (`sources`, one per derived weight, in order). A weight mapped
        from a file is copied (`mapped.owned`) unless `keep_mapped` (`load` says when)."""
        self.library = Path(library)
        self.spec = spec
        self._sources = [np.require(a, requirements="C") for a in sources]
        if len(self._sources) != len(spec.derived):
            raise ModuleFormatError(f"{len(spec.derived)} derived weights need as many sources, got "
                                    f"{len(self._sources)}")
        self._weights = [None if w is None else np.require(w if keep_mapped else owned(w), requirements="C")
                         for w in weights]
        for d, source in zip(spec.derived, self._sources):
            if self._weights[d.weight] is None:
                self._weights[d.weight] = self._derive(d, source, cfg)
        self._inputs = spec.inputs
        self._input_dtypes = [np.dtype(s.dtype) for s in spec.inputs]
        workspace = BufferSpec("workspace", (max(spec.workspace_bytes, 1),), "int8")
        dims = [BufferSpec("dims", (len(spec.dims),), "int64")] if spec.dims else []
        params = [*spec.inputs, *spec.outputs, *spec.weights, workspace, *dims]
        self._kernel = Kernel(self.library, "tg_run", params, cfg=cfg)
        self._frames = _Frames(self._kernel, workspace.shape[0], self._weights, len(spec.dims))

    def _derive(self, d: DerivedWeight, source: np.ndarray, cfg) -> np.ndarray:
        """Derived weight `d`, computed by its kernel in the library."""
        target = self.spec.weights[d.weight]
        out = np.empty(target.shape, target.dtype)
        Kernel(self.library, d.kernel, [d.source, target], cfg=cfg)(source, out)
        return out

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.spec.inputs]

    @property
    def output_names(self) -> list[str]:
        return [s.name for s in self.spec.outputs]

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        return {s.name: s.shape for s in self.spec.inputs}

    def _arguments(self, args, kwargs) -> list[np.ndarray]:
        """The inputs in declaration order, each checked, and copied only if not aligned and C-contiguous. The
        common call (every input named, or every one positional; arrays that fit) takes the short way."""
        values = args if not kwargs and len(args) == len(self._inputs) else self._named(args, kwargs)
        if self.spec.dims:
            return [_input(s, dtype, a, dynamic=True) for s, dtype, a in zip(self._inputs, self._input_dtypes, values)]
        return [a if type(a) is np.ndarray and a.shape == s.shape and a.dtype == dtype and a.flags.carray
                else _input(s, dtype, a) for s, dtype, a in zip(self._inputs, self._input_dtypes, values)]

    def _outputs(self, inputs: list[np.ndarray], frame: "_Frame") -> list[np.ndarray]:
        """The output arrays of this call; a module with dynamic dimensions reads their values from the inputs
        (checked against the bounds and every input's shape), sizes the outputs by them and writes them into the
        frame for the library."""
        shapes = [s.shape for s in self.spec.outputs]
        if self.spec.dims:
            values = bind(self.spec.dims, self._inputs, [a.shape for a in inputs])
            frame.dims[:] = [values[d.key] for d in self.spec.dims]
            shapes = [shape_at(shape, values) for shape in shapes]
        return [np.empty(shape, s.dtype) for shape, s in zip(shapes, self.spec.outputs)]

    def _named(self, args, kwargs) -> list:
        if not args and len(kwargs) == len(self._inputs):
            try:
                return [kwargs[s.name] for s in self._inputs]
            except KeyError:
                pass  # bind_arguments names the input that is wrong
        given = bind_arguments(self.input_names, args, kwargs)
        return [given[s.name] for s in self._inputs]

    def __call__(self, *args, **kwargs):
        inputs = self._arguments(args, kwargs)
        frame = self._frames.take()
        try:
            outputs = self._outputs(inputs, frame)
            pointers = frame.pointers
            for slot, a in enumerate(inputs + outputs):  # checked by `_arguments`, made here: no second check
                pointers[slot] = address(a)
            self._kernel.run(pointers)
        finally:
            self._frames.give_back(frame)
        return outputs[0] if len(outputs) == 1 else outputs

    def benchmark(self, repeats: int = 10, min_repeat_s: float = 0.05,
                  dims: Mapping[str, int] | None = None) -> float:
        """Median latency in seconds, on random inputs at `dims` (a dynamic dimension's key or name -> its value;
        those left out at their largest)."""
        keys = {d.name: d.key for d in self.spec.dims}
        values = {d.key: d.hi for d in self.spec.dims} | {keys.get(k, k): v for k, v in (dims or {}).items()}
        inputs = list(benchmark_inputs([BufferSpec(s.name, shape_at(s.shape, values), s.dtype)
                                        for s in self.spec.inputs]).values())
        frame = self._frames.take()
        try:
            outputs = self._outputs(inputs, frame)
            return time_kernel(self._kernel, inputs + outputs + self._weights + frame.fixed[len(self._weights):],
                               repeats=repeats, min_repeat_s=min_repeat_s).median
        finally:
            self._frames.give_back(frame)

    def profile(self, *args, repeats: int = 20, warmup: int = 2, peaks: MachinePeaks | None = None,
                **kwargs) -> Profile:
        """Time each kernel on these inputs (positional or named, as a call takes them): the median of `repeats`
        runs after `warmup`, against `peaks` (default: this machine's, measured once and cached)."""
        inputs = self._arguments(args, kwargs)
        frame = self._frames.take()
        try:
            outputs = self._outputs(inputs, frame)
            values = dict(zip((d.key for d in self.spec.dims), frame.dims.tolist()))
            return profile_run(self._kernel, [k.at(values) for k in self.spec.kernels],
                               [*inputs, *outputs, *frame.fixed], outputs, repeats=repeats, warmup=warmup, peaks=peaks)
        finally:
            self._frames.give_back(frame)

    def save(self, directory) -> Path:
        """Write the library, the weights and a checksummed manifest into `directory` (new, empty or a saved
        module's), replacing it whole by a rename so a process running the old module is unaffected."""
        derived = {d.weight for d in self.spec.derived}
        stored = [w for k, w in enumerate(self._weights) if k not in derived] + self._sources
        return saved.write(directory, self.library, self.spec.to_json(), stored)


class _Frame(NamedTuple):
    """What one call in flight owns: its workspace, its dynamic dimensions' values, and the entry's `void**` with
    the addresses of the weights, of that workspace and of those values written once, where the call writes those
    of its inputs and outputs."""

    workspace: np.ndarray
    dims: np.ndarray
    pointers: ctypes.Array
    fixed: list  # the arrays after the outputs: the weights, the workspace, the dimensions' values where any


class _Frames:
    """Frames not in use. A call takes one (a new one if none is free) and gives it back, so the pool holds as
    many as calls have ever run at once; list pop and append are atomic, so no lock is needed."""

    def __init__(self, kernel: Kernel, workspace_bytes: int, weights: Sequence[np.ndarray], dims: int = 0):
        self._kernel = kernel
        self._nbytes = workspace_bytes
        self._weights = weights
        self._dims = dims
        self._free: list[_Frame] = []

    def take(self) -> _Frame:
        try:
            return self._free.pop()
        except IndexError:
            return self._new()

    def give_back(self, frame: _Frame) -> None:
        self._free.append(frame)

    def _new(self) -> _Frame:
        workspace = np.empty(self._nbytes, dtype="int8")
        dims = np.zeros(self._dims, dtype=np.int64)
        pointers = self._kernel.pointer_array()
        fixed = [*self._weights, workspace, *([dims] if self._dims else [])]
        for slot, a in enumerate(fixed, start=len(pointers) - len(fixed)):
            pointers[slot] = address(a)
        return _Frame(workspace, dims, pointers, fixed)


def bind_arguments(names: list[str], args, kwargs) -> dict:
    """{input name: value} for a call with positional `args` and named `kwargs`; a surplus, unknown, doubled or
    missing input is a KernelCallError naming it and the inputs the model takes."""
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
    return given


def _input(spec: BufferSpec, dtype: np.dtype, value, dynamic: bool = False) -> np.ndarray:
    """`value` as an aligned C-contiguous array for input `spec`, copied only if it is not one already; a wrong
    dtype or shape is a KernelCallError naming the input and what it expects. With `dynamic`, the shape is checked
    later, against the dimensions' values (`dims.bind`)."""
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if a.dtype != dtype:
        raise KernelCallError(f"input {spec.name!r} expects dtype {spec.dtype}, got {a.dtype}; convert it with "
                              f".astype(numpy.{spec.dtype})")
    if not dynamic and a.shape != spec.shape:
        rank = "" if a.ndim == len(spec.shape) else f" (rank {a.ndim}, expected rank {len(spec.shape)})"
        raise KernelCallError(f"input {spec.name!r} expects shape {spec.shape}, got {a.shape}{rank}")
    return a if a.flags.c_contiguous and a.flags.aligned else np.require(a, requirements="CA")


def load(directory, cfg: _config.Config | None = None, *, mapped: bool = False) -> Module:
    """A module saved by `Module.save`; a missing, altered, truncated or foreign file is a ModuleFormatError.
    With `mapped`, the weights stay views of their file mapped read-only (no copy: for a directory that is only
    ever replaced by a rename, as the module cache's entries are; a file rewritten in place under a running
    module would crash it). The library is native code: load only directories you trust."""
    library, spec_json, arrays = saved.read(directory, cfg, mapped=mapped)
    spec = ModuleSpec.from_json(spec_json)
    derived = {d.weight for d in spec.derived}
    stored = [s for k, s in enumerate(spec.weights) if k not in derived] + [d.source for d in spec.derived]
    if len(arrays) != len(stored):
        raise ModuleFormatError(f"{directory}: the weights file holds {len(arrays)} arrays, the manifest names "
                                f"{len(stored)}")
    typed = []
    for raw, s in zip(arrays, stored):
        dtype = np.dtype(s.dtype)
        if raw.size != math.prod(s.shape) * dtype.itemsize:
            raise ModuleFormatError(f"{directory}: weight {s.name!r} has {raw.size} bytes in the weights file, "
                                    f"{s.describe()} in the manifest")
        typed.append(raw.view(dtype).reshape(s.shape))
    kept = iter(typed)
    weights = [None if k in derived else next(kept) for k in range(len(spec.weights))]
    return Module(library, spec, weights, cfg=cfg, sources=list(kept), keep_mapped=mapped)
