"""The public surface: compile a model into a native module, load a saved one."""

from __future__ import annotations

from typing import Mapping, Sequence

from .errors import TilegradError
from .runtime.module import Module, load as _load

TARGETS = ("cpu",)


def compile(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None, target: str = "cpu",  # noqa: A001
            opt_level: int = 2, db=None) -> Module:
    """Compile an ONNX model (a path, bytes or onnx.ModelProto) into a callable native Module.

    `input_shapes` fixes symbolic input dimensions. Every `opt_level` compiles one kernel per op today; the graph
    passes (folding, fusion, layout) arrive with the optimisation work. Tuning records (`db=`) need the tuner,
    which is not built yet, so passing one is an error rather than a silent no-op.
    """
    from .executor import compile_graph
    from .frontend.onnx import import_onnx

    if target not in TARGETS:
        raise TilegradError(f"target {target!r} is not supported; available: {', '.join(TARGETS)}")
    if opt_level not in (0, 1, 2, 3):
        raise TilegradError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    if db is not None:
        raise TilegradError("db= (tuning records) needs the auto-scheduler, which is not available yet")
    return compile_graph(import_onnx(model, input_shapes=input_shapes))


def load(directory) -> Module:
    """A module saved with `Module.save(directory)`, loaded without the original model."""
    return _load(directory)
