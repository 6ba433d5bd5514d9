"""The public surface: compile a model into a native module, load a saved one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from .errors import TilegradError
from .frontend.load import import_model
from .runtime.module import Module, load as _load
from .target import TARGETS

if TYPE_CHECKING:
    from .ir.graph import Graph
    from .passes.pipeline import Report

class Compilation(NamedTuple):
    """A compiled module and how it was made: what `tilegrad compile --explain` prints."""

    module: Module
    report: Report  # per pass: node counts before and after, op deltas, notes
    graph: Graph  # the optimised graph the module was built from

    @property
    def kernels(self) -> int:
        """Kernels the module runs: one per node of the optimised graph, less the reshapes (views)."""
        from .passes.memory_plan import kernel_count

        return kernel_count(self.graph)


def compile(model, example_inputs=None, *, input_shapes: Mapping[str, Sequence[int]] | None = None,  # noqa: A001
            target: str = "cpu", opt_level: int = 2, disable_passes: Sequence[str] = (),
            enable_passes: Sequence[str] = (), db=None) -> Module:
    """Compile an ONNX model (a path, bytes or onnx.ModelProto), or a torch.nn.Module called on `example_inputs`
    (a tuple of tensors, captured with torch.export), into a callable native Module (NumPy in, NumPy out).

    `input_shapes` fixes symbolic input dimensions of an ONNX model. `opt_level` picks the graph passes (0: none,
    one kernel per op; 2: all); `disable_passes` / `enable_passes` switch single passes off or on
    (`tilegrad.passes.pass_names()` lists them). `db` is a tuning records database (`tilegrad.tune`): each
    convolution gets the algorithm whose tuned kernels make the graph fastest, each kernel the best valid
    schedule recorded for its workload on this machine, and the default rules where none was tuned.
    `compile_with_report` takes the same arguments and also says what the passes did.
    """
    return compile_with_report(model, example_inputs, input_shapes=input_shapes, target=target, opt_level=opt_level,
                               disable_passes=disable_passes, enable_passes=enable_passes, db=db).module


def compile_with_report(model, example_inputs=None, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                        target: str = "cpu", opt_level: int = 2, disable_passes: Sequence[str] = (),
                        enable_passes: Sequence[str] = (), db=None) -> Compilation:
    """`compile`, returning the module together with the pass pipeline's report and the optimised graph."""
    from .executor import compile_graph
    from .passes import optimize

    if target not in TARGETS:
        raise TilegradError(f"target {target!r} is not supported; available: {', '.join(TARGETS)}")
    if opt_level not in (0, 1, 2, 3):
        raise TilegradError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    machine = TARGETS[target]()
    imported = import_model(model, example_inputs, input_shapes)
    if db is None:
        graph, report = optimize(imported, opt_level, disable=disable_passes, enable=enable_passes, target=machine)
        return Compilation(compile_graph(graph, target=machine), report, graph)
    from .tune.algorithms import choose
    from .tune.apply import BestRecords

    with BestRecords(db) as chooser:
        chosen = choose(imported, chooser.latency, opt_level=opt_level, disable=disable_passes, enable=enable_passes)
        return Compilation(compile_graph(chosen.graph, choose=chooser, target=machine), chosen.report, chosen.graph)


def load(directory) -> Module:
    """A module saved with `Module.save(directory)`, loaded without the original model. Its library is native
    code that runs with your rights: load only directories you trust. The manifest, the library and the weights
    are checked (checksums, sizes, dtypes); a failed check is a ModuleFormatError saying which file."""
    return _load(directory)
