"""`tilegrad run`: a saved module or a model on inputs from .npy files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .common import UsageError, saved_or_compiled, typed


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    r = sub.add_parser("run", parents=[parents.common, parents.shapes, parents.passes],
                       help="run a module directory or an ONNX model",
                       description="Run a saved module (or compile and run an .onnx file) on inputs from .npy files.")
    r.add_argument("model", help="a module directory saved by `tilegrad compile`, an .onnx file or a PyTorch "
                                 "file.py:factory")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input array (repeatable); the name may be left out when the model has one input")
    r.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs here, keyed by output name")
    r.set_defaults(command=_run)


def _run(args) -> None:
    mod = saved_or_compiled(args, dynamic=True)
    inputs = _read_inputs(args.input, mod.spec.inputs if hasattr(mod, "spec") else
                          [_Declared(i.name, i.dims, i.dtype) for i in mod.inputs])
    outputs = mod(**inputs)
    outputs = dict(zip(mod.output_names, outputs if isinstance(outputs, list) else [outputs]))
    if args.output:
        path = Path(args.output)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, **outputs)
        except OSError as exc:
            raise UsageError(f"cannot write the outputs to {path}: {exc.strerror or exc}") from None
        print(f"wrote {len(outputs)} output(s) to {path}: {', '.join(outputs)}")
        return
    for name, y in outputs.items():
        print(f"{name}: {typed(y.shape, str(y.dtype))}  {_statistics(y)}")


class _Declared(NamedTuple):
    """An input of a SpecializingModule as `_read_inputs` reads it: symbolic dims by name, None for any shape."""

    name: str
    shape: tuple[int | str, ...] | None
    dtype: str


def _fits(shape: tuple[int, ...], declared) -> bool:
    """`shape` has the declared rank and static dimensions (symbolic ones take any size)."""
    return declared is None or (len(shape) == len(declared) and
                                all(not isinstance(d, int) or n == d for n, d in zip(shape, declared)))


def _read_inputs(items: Sequence[str], specs) -> dict[str, np.ndarray]:
    """The arrays named by `--input NAME=FILE` items, checked against the module's inputs."""
    names = [s.name for s in specs]
    files: dict[str, str] = {}
    for item in items:
        name, eq, file = item.partition("=")
        if not eq:
            if len(names) != 1:
                raise UsageError(f"--input {item!r} has no name and the model takes {len(names)} inputs "
                                 f"({', '.join(names)}); write --input NAME=FILE.npy")
            name, file = names[0], item
        if name not in names:
            raise UsageError(f"--input {item!r}: the model has no input {name!r}; its inputs are {', '.join(names)}")
        if name in files:
            raise UsageError(f"input {name!r} is given twice (--input)")
        files[name] = file
    missing = [s for s in specs if s.name not in files]
    if missing:
        wanted = ", ".join(f"{s.name} {typed(s.shape, s.dtype)}" for s in missing)
        raise UsageError(f"missing input(s): {wanted}; pass --input NAME=FILE.npy for each")
    arrays = {}
    for s in specs:
        path = Path(files[s.name])
        if not path.is_file():
            raise UsageError(f"input {s.name!r}: no file at {path}")
        try:
            a = np.load(path, allow_pickle=False)
        except (ValueError, EOFError):
            problem = f"{path} is not a readable .npy file; write one with numpy.save"
            raise UsageError(f"input {s.name!r}: {problem}") from None
        if not isinstance(a, np.ndarray):
            raise UsageError(f"input {s.name!r}: {path} holds several arrays (.npz); save one array with np.save")
        if not _fits(a.shape, s.shape) or str(a.dtype) != s.dtype:
            raise UsageError(f"input {s.name!r}: expected {typed(s.shape, s.dtype)}, got "
                             f"{typed(a.shape, str(a.dtype))} from {path}")
        arrays[s.name] = np.ascontiguousarray(a)
    return arrays


def _statistics(y: np.ndarray) -> str:
    if y.size == 0:
        return "(empty)"
    if y.dtype == bool:
        return f"true {int(y.sum())}/{y.size}"
    finite = y[np.isfinite(y)] if np.issubdtype(y.dtype, np.floating) else y
    bad = y.size - finite.size
    note = f"  non-finite {bad}" if bad else ""
    if finite.size == 0:
        return f"all {y.size} values non-finite"
    f64 = finite.astype(np.float64)
    return f"min {f64.min():.4g}  max {f64.max():.4g}  mean {f64.mean():.4g}  std {f64.std():.4g}{note}"
