"""The public surface: compile a model into a native module, load a saved one."""

from __future__ import annotations

from typing import Mapping, Sequence

from .errors import TilegradError
from .runtime.module import Module, load as _load

TARGETS = ("cpu",)


def compile(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None, target: str = "cpu",  # noqa: A001
            opt_level: int = 2, disable_passes: Sequence[str] = (), enable_passes: Sequence[str] = (),
            db=None) -> Module:
    """Compile an ONNX model (a path, bytes or onnx.ModelProto) into a callable native Module.

    `input_shapes` fixes symbolic input dimensions. `opt_level` picks the graph passes (0: none, one kernel per
    op; 2: all); `disable_passes` / `enable_passes` switch single passes off or on (`tilegrad.passes.pass_names()`
    lists them). Tuning records (`db=`) need the tuner, which is not built yet, so passing one is an error rather
    than a silent no-op.
    """
    from .executor import compile_graph
    from .frontend.onnx import import_onnx
    from .passes import optimize

    if target not in TARGETS:
        raise TilegradError(f"target {target!r} is not supported; available: {', '.join(TARGETS)}")
    if opt_level not in (0, 1, 2, 3):
        raise TilegradError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    if db is not None:
        raise TilegradError("db= (tuning records) needs the auto-scheduler, which is not available yet")
    graph, _ = optimize(import_onnx(model, input_shapes=input_shapes), opt_level, disable=disable_passes,
                        enable=enable_passes)
    return compile_graph(graph)


def load(directory) -> Module:
    """A module saved with `Module.save(directory)`, loaded without the original model."""
    return _load(directory)
