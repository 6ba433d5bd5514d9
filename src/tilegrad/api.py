"""The public surface: compile a model into a native module, load a saved one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from .errors import TilegradError
from .runtime.module import Module, load as _load

if TYPE_CHECKING:
    from .ir.graph import Graph
    from .passes.pipeline import Report

TARGETS = ("cpu",)


class Compilation(NamedTuple):
    """A compiled module and how it was made: what `tilegrad compile --explain` prints."""

    module: Module
    report: Report  # per pass: node counts before and after, op deltas, notes
    graph: Graph  # the optimised graph the module was built from

    @property
    def kernels(self) -> int:
        """Kernels the module runs: one per node of the optimised graph, less the reshapes (views)."""
        from .executor import kernel_count

        return kernel_count(self.graph)


def compile(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None, target: str = "cpu",  # noqa: A001
            opt_level: int = 2, disable_passes: Sequence[str] = (), enable_passes: Sequence[str] = (),
            db=None) -> Module:
    """Compile an ONNX model (a path, bytes or onnx.ModelProto) into a callable native Module.

    `input_shapes` fixes symbolic input dimensions. `opt_level` picks the graph passes (0: none, one kernel per
    op; 2: all); `disable_passes` / `enable_passes` switch single passes off or on (`tilegrad.passes.pass_names()`
    lists them). Tuning records (`db=`) need the tuner, which is not built yet, so passing one is an error rather
    than a silent no-op. `compile_with_report` takes the same arguments and also says what the passes did.
    """
    return compile_with_report(model, input_shapes=input_shapes, target=target, opt_level=opt_level,
                               disable_passes=disable_passes, enable_passes=enable_passes, db=db).module


def compile_with_report(model, *, input_shapes: Mapping[str, Sequence[int]] | None = None, target: str = "cpu",
                        opt_level: int = 2, disable_passes: Sequence[str] = (), enable_passes: Sequence[str] = (),
                        db=None) -> Compilation:
    """`compile`, returning the module together with the pass pipeline's report and the optimised graph."""
    from .executor import compile_graph
    from .frontend.onnx import import_onnx
    from .passes import optimize

    if target not in TARGETS:
        raise TilegradError(f"target {target!r} is not supported; available: {', '.join(TARGETS)}")
    if opt_level not in (0, 1, 2, 3):
        raise TilegradError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    if db is not None:
        raise TilegradError("db= (tuning records) needs the auto-scheduler, which is not available yet")
    graph, report = optimize(import_onnx(model, input_shapes=input_shapes), opt_level, disable=disable_passes,
                             enable=enable_passes)
    return Compilation(compile_graph(graph), report, graph)


def load(directory) -> Module:
    """A module saved with `Module.save(directory)`, loaded without the original model."""
    return _load(directory)
