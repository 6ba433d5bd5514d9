"""A dynamic module with fast paths: modules specialised to values of its dimensions that a user named.

One library serves every value of a dynamic dimension within its bounds, its schedules chosen for a
representative value (DESIGN.md, decision 8). A server that mostly sees a few shapes (a length of 128 and one of
512, say) can have those compiled as fixed shapes too: `tilegrad.compile(..., dynamic={"seq": (1, 512)},
specialize={"seq": [128, 512]})`. A call reads the dimensions' values from its inputs' shapes, as the dynamic
module does, and runs the specialised module where their values are one of those named, the dynamic one
otherwise. Every module is compiled up front: no call compiles.

Saved (`save`, `tilegrad compile --specialize`), a directory holds the dynamic module in `dynamic/`, each fast path
in a subdirectory of its own, and `fast_paths.json`, which says which values each path is for.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from . import saved
from ..errors import ModuleFormatError
from .dims import bind
from .module import Module, bind_arguments
from .module import load as load_module

MANIFEST = "fast_paths.json"
FORMAT = 1


class FastPathModule:
    """`dynamic` (a Module with dynamic dimensions) and `paths`: {values of the specialised dimensions, in the
    order of `keys` (their keys in the module's `spec.dims`): the Module compiled for them}."""

    def __init__(self, dynamic: Module, keys: tuple[str, ...], paths: Mapping[tuple[int, ...], Module]):
        self.dynamic = dynamic
        self.keys = keys
        self.paths = dict(paths)

    @property
    def spec(self):
        """The dynamic module's spec: the inputs and outputs every call takes, with their dynamic dimensions."""
        return self.dynamic.spec

    @property
    def input_names(self) -> list[str]:
        return self.dynamic.input_names

    @property
    def output_names(self) -> list[str]:
        return self.dynamic.output_names

    def module_for(self, *args, **kwargs) -> Module:
        """The module a call with these inputs runs; a dimension outside its bounds is the dynamic module's
        KernelCallError."""
        given = bind_arguments(self.input_names, args, kwargs)
        specs = self.dynamic.spec.inputs
        values = bind(self.dynamic.spec.dims, specs, [np.shape(given[s.name]) for s in specs])
        return self.paths.get(tuple(values[k] for k in self.keys), self.dynamic)

    def __call__(self, *args, **kwargs):
        return self.module_for(*args, **kwargs)(*args, **kwargs)

    def profile(self, *args, repeats: int = 20, warmup: int = 2, peaks=None, **kwargs):
        """The profile (`Module.profile`) of the module these inputs run."""
        return self.module_for(*args, **kwargs).profile(*args, repeats=repeats, warmup=warmup, peaks=peaks,
                                                        **kwargs)

    def save(self, directory) -> Path:
        """Write the dynamic module and every fast path (each a saved Module in a subdirectory) with the manifest
        into `directory` (new, empty, or a saved module with fast paths, replaced whole by a rename)."""
        out = Path(os.path.abspath(directory))
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_saved(out))):
            raise ModuleFormatError(f"cannot save a module with fast paths to {out}: it exists and is not empty or "
                                    f"such a module; save to a new or empty directory")
        fresh = out.parent / f".{out.name}.{uuid.uuid4().hex}.saving"
        fresh.mkdir()
        try:
            self.dynamic.save(fresh / "dynamic")
            rows = []
            for n, (values, module) in enumerate(self.paths.items()):
                module.save(fresh / f"p{n}")
                rows.append({"directory": f"p{n}", "values": list(values)})
            manifest = {"format": FORMAT, "keys": list(self.keys), "paths": rows}
            (fresh / MANIFEST).write_text(json.dumps(manifest, indent=1))
            saved.rename_into_place(fresh, out)
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        return Path(directory)


def is_saved(directory) -> bool:
    """True when `directory` holds a saved module with fast paths."""
    return (Path(directory) / MANIFEST).is_file()


def load(directory) -> FastPathModule:
    """A module saved by `FastPathModule.save`: the dynamic module and its fast paths, loaded (each checked as
    `Module.save`'s directories are); a missing or inconsistent manifest is a ModuleFormatError."""
    root = Path(directory)
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        keys = tuple(manifest["keys"])
        rows = [(tuple(int(v) for v in row["values"]), str(row["directory"])) for row in manifest["paths"]]
        ok = manifest["format"] == FORMAT and all(len(values) == len(keys) and "/" not in name and name != ".."
                                                  for values, name in rows)
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise ModuleFormatError(f"{root / MANIFEST} is not a readable fast-path manifest ({exc}); save the module "
                                f"again") from None
    if not ok:
        raise ModuleFormatError(f"{root / MANIFEST} is not a fast-path manifest of format {FORMAT} with a value for "
                                f"each of its {len(keys)} dimensions; save the module again")
    dynamic = load_module(root / "dynamic")
    missing = set(keys) - {d.key for d in dynamic.spec.dims}
    if missing:
        raise ModuleFormatError(f"{root / MANIFEST} names dimensions {sorted(missing)} that the dynamic module in "
                                f"{root / 'dynamic'} does not have; save the module again")
    return FastPathModule(dynamic, keys, {values: load_module(root / name) for values, name in rows})
