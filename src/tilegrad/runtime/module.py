"""A compiled model: its native library, its weights and its workspace, callable with NumPy arrays.

The library's entry `tg_run(void** args)` takes the inputs, the outputs, the weights and one workspace buffer;
the weights and the workspace are bound here once, so a call passes only the inputs. A module saves to a
directory (library, weights, JSON manifest with checksums) that loads in a fresh process without the model.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import config as _config
from ..errors import KernelCallError, TilegradError
from .kernel import BufferSpec, Kernel
from .timing import time_kernel

MANIFEST = "manifest.json"
LIBRARY = "model.so"
WEIGHTS = "weights.npz"


class ModuleFormatError(TilegradError):
    """A saved module directory that is incomplete, tampered with or from an incompatible version."""


@dataclasses.dataclass(frozen=True)
class ModuleSpec:
    inputs: tuple[BufferSpec, ...]
    outputs: tuple[BufferSpec, ...]
    weights: tuple[BufferSpec, ...]
    workspace_bytes: int
    unshared_bytes: int  # intermediate memory without reuse, for reports

    @staticmethod
    def of(inputs, outputs, weights, workspace_bytes: int, unshared_bytes: int) -> "ModuleSpec":
        def specs(values):
            return tuple(BufferSpec(v.name, tuple(v.shape), v.dtype) for v in values)
        return ModuleSpec(specs(inputs), specs(outputs), specs(weights), workspace_bytes, unshared_bytes)

    def to_json(self) -> dict:
        def rows(specs):
            return [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype} for s in specs]
        return {"inputs": rows(self.inputs), "outputs": rows(self.outputs), "weights": rows(self.weights),
                "workspace_bytes": self.workspace_bytes, "unshared_bytes": self.unshared_bytes}

    @staticmethod
    def from_json(obj: dict) -> "ModuleSpec":
        def specs(rows):
            return tuple(BufferSpec(r["name"], tuple(r["shape"]), r["dtype"]) for r in rows)
        return ModuleSpec(specs(obj["inputs"]), specs(obj["outputs"]), specs(obj["weights"]),
                          int(obj["workspace_bytes"]), int(obj["unshared_bytes"]))


class Module:
    """Call with positional or named NumPy arrays; returns the output array (or a list for several)."""

    def __init__(self, library: Path, spec: ModuleSpec, weights: Sequence[np.ndarray],
                 cfg: _config.Config | None = None):
        self.library = Path(library)
        self.spec = spec
        self._weights = [np.require(w, requirements='C') for w in weights]
        self._workspace = np.empty(max(spec.workspace_bytes, 1), dtype="int8")
        params = list(spec.inputs) + list(spec.outputs) + list(spec.weights)
        params.append(BufferSpec("workspace", self._workspace.shape, "int8"))
        self._kernel = Kernel(self.library, "tg_run", params, cfg=cfg)

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
        if len(args) > len(self.spec.inputs):
            raise KernelCallError(f"the model takes {len(self.spec.inputs)} inputs, got {len(args)}")
        given = dict(zip(self.input_names, args))
        for name, value in kwargs.items():
            if name not in self.input_names:
                raise KernelCallError(f"the model has no input {name!r}; its inputs are {self.input_names}")
            if name in given:
                raise KernelCallError(f"input {name!r} given twice")
            given[name] = value
        missing = [n for n in self.input_names if n not in given]
        if missing:
            raise KernelCallError(f"missing input(s) {missing}; the model takes {self.input_names}")
        return [np.asarray(given[n]) for n in self.input_names]

    def __call__(self, *args, **kwargs):
        inputs = self._arguments(args, kwargs)
        outputs = [np.empty(s.shape, s.dtype) for s in self.spec.outputs]
        self._kernel(*inputs, *outputs, *self._weights, self._workspace)
        return outputs[0] if len(outputs) == 1 else outputs

    def benchmark(self, repeats: int = 10, min_repeat_s: float = 0.05) -> float:
        """Median latency in seconds, on random inputs."""
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(s.shape).astype(s.dtype) if s.dtype.startswith("float")
                  else np.zeros(s.shape, s.dtype) for s in self.spec.inputs]
        outputs = [np.empty(s.shape, s.dtype) for s in self.spec.outputs]
        return time_kernel(self._kernel, inputs + outputs + self._weights + [self._workspace], repeats=repeats,
                           min_repeat_s=min_repeat_s).median

    def save(self, directory) -> Path:
        """Write the library, the weights and a manifest with their checksums into `directory`."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.library, out / LIBRARY)
        np.savez(out / WEIGHTS, *self._weights)
        manifest = {"format": 1, "spec": self.spec.to_json(), "entry": "tg_run",
                    "sha256": {LIBRARY: _sha256(out / LIBRARY), WEIGHTS: _sha256(out / WEIGHTS)},
                    "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
        return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load(directory, cfg: _config.Config | None = None) -> Module:
    """A module saved by `Module.save`; a missing, altered or foreign file is a ModuleFormatError."""
    root = Path(directory)
    for name in (MANIFEST, LIBRARY, WEIGHTS):
        if not (root / name).is_file():
            raise ModuleFormatError(f"{root} is not a complete tilegrad module: {name} is missing")
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        spec = ModuleSpec.from_json(manifest["spec"])
        sums = manifest["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ModuleFormatError(f"{root / MANIFEST} is not a valid manifest: {exc}") from None
    if manifest.get("format") != 1:
        raise ModuleFormatError(f"{root} was saved in format {manifest.get('format')!r}; this version reads 1")
    for name in (LIBRARY, WEIGHTS):
        if _sha256(root / name) != sums.get(name):
            raise ModuleFormatError(f"{root / name} does not match its checksum in the manifest (altered?)")
    with np.load(root / WEIGHTS) as data:
        weights = [data[f"arr_{i}"] for i in range(len(spec.weights))]
    for w, s in zip(weights, spec.weights):
        if w.shape != s.shape or str(w.dtype) != s.dtype:
            raise ModuleFormatError(f"weight {s.name!r} in {root / WEIGHTS} has the wrong shape or dtype")
    return Module(root / LIBRARY, spec, weights, cfg=cfg)
