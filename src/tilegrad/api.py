"""The public surface: compile a model into a native module, load a saved one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from .errors import ShapeError, TilegradError
from .frontend.load import import_model, onnx_proto
from .frontend.onnx_boundary import TENSOR, expose_inputs, structured_outputs
from .frontend.onnx_inputs import is_dynamic, model_inputs, specialize
from .runtime import specializing
from .runtime.module import Module, load as _load
from .runtime.specializing import MAX_SPECIALIZATIONS, Compiled, SpecializingModule
from .runtime.structured import flat_names
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
            enable_passes: Sequence[str] = (), db=None, fusion: str = "rules", attention_form: str = "auto",
            attention_key_block: int | None = None,
            max_specializations: int = MAX_SPECIALIZATIONS) -> Module | SpecializingModule:
    """Compile an ONNX model (a path, bytes or onnx.ModelProto), or a torch.nn.Module called on `example_inputs`
    (a tuple of tensors, captured with torch.export), into a callable native Module (NumPy in, NumPy out).

    `input_shapes` fixes symbolic input dimensions of an ONNX model. An ONNX model with symbolic dimensions left open,
    or with value inputs (integer inputs whose values decide shapes, like a Reshape's shape given as an input), or with
    sequence or optional inputs or outputs (given and returned as lists and None), becomes a SpecializingModule instead:
    it compiles on each call with a new signature (input shapes, values of the value inputs, lengths of sequences,
    presence of optionals), keeping the `max_specializations` most recently used. `opt_level` picks the graph passes (0:
    none, one kernel per op; 2: all); `disable_passes` / `enable_passes` switch single passes off or on
    (`tilegrad.passes.pass_names()` lists them). `fusion` is the fusion strategy: "rules" (the rule-based pass) or
    "stitch" (FusionStitching's search over plans, scored with this machine's measured costs; with `db`, the
    records choose between the two plans, see `tilegrad.tune(fusion_plans=True)`). `attention_form` is the softmax
    form of the attention kernels: "auto" (by shape on a CPU: blockwise for long key sequences; with `db`, the
    form whose tuned kernels are faster), "two_pass" or "blockwise" for all of them; `attention_key_block` the
    keys per block of the blockwise form (None: the block that pads the keys least). `db` is a tuning records
    database (`tilegrad.tune`): each convolution gets the algorithm whose tuned kernels make the graph fastest, each
    kernel the best valid schedule recorded for its workload on this machine, and the default rules where none was
    tuned.
`compile_with_report` takes the same arguments and also says what the passes did.
    """
    proto = onnx_proto(model, example_inputs)
    inputs = _inputs(proto, input_shapes)
    if inputs is not None and (is_dynamic(inputs) or structured_outputs(proto)):
        _attention_options(attention_form, attention_key_block)  # checked now, not at the first call
        options = {"input_shapes": {n: list(s) for n, s in (input_shapes or {}).items()}, "target": target,
                   "opt_level": opt_level, "disable_passes": list(disable_passes),
                   "enable_passes": list(enable_passes), "db": None if db is None else str(db), "fusion": fusion,
                   "attention_form": attention_form, "attention_key_block": attention_key_block}
        return _specializing(proto.SerializeToString(), options, max_specializations)
    return compile_with_report(model if proto is None else proto, example_inputs, input_shapes=input_shapes,
                               target=target, opt_level=opt_level, disable_passes=disable_passes,
                               enable_passes=enable_passes, db=db, fusion=fusion, attention_form=attention_form,
                               attention_key_block=attention_key_block).module


def compile_with_report(model, example_inputs=None, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                        target: str = "cpu", opt_level: int = 2, disable_passes: Sequence[str] = (),
                        enable_passes: Sequence[str] = (), db=None, fusion: str = "rules",
                        attention_form: str = "auto", attention_key_block: int | None = None) -> Compilation:
    """`compile`, returning the module together with the pass pipeline's report and the optimised graph. It
    compiles one shape: an ONNX model whose inputs leave shapes open (or are sequences or optionals) is a
    ShapeError naming them."""
    proto = onnx_proto(model, example_inputs)
    open_inputs = [i for i in _inputs(proto, input_shapes) or () if i.symbolic or i.value_needed or i.kind != TENSOR]
    if open_inputs:
        raise ShapeError("compile_with_report compiles one shape, but " + "; ".join(map(_why_open, open_inputs))
                         + "; fix the dimensions with input_shapes, or call tilegrad.compile, which compiles "
                         "per call")
    model = model if proto is None else proto
    _check_options(target, opt_level)
    _check_fusion(fusion)
    attention = _attention_options(attention_form, attention_key_block)
    imported = import_model(model, example_inputs, input_shapes)
    return _compile_imported(imported, target=target, opt_level=opt_level, disable_passes=disable_passes,
                             enable_passes=enable_passes, db=db, fusion=fusion, attention=attention)


def cuda_source(model, example_inputs=None, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                opt_level: int = 2, disable_passes: Sequence[str] = ()) -> tuple[str, str]:
    """(CUDA source, PTX) of a model's kernels for the CUDA target, compiled by NVRTC; needs no GPU (the target
    is the device's where one is present, else sm_90)."""
    from .cuda_executor import render_graph
    from .passes import optimize
    from .runtime.nvrtc import compile_ptx

    _check_options("cuda", opt_level)
    machine = TARGETS["cuda"]()
    proto = onnx_proto(model, example_inputs)
    imported = import_model(model if proto is None else proto, example_inputs, input_shapes)
    graph, _ = optimize(imported, opt_level, disable=disable_passes, target=machine)
    source = render_graph(graph, target=machine).source
    return source, compile_ptx(source, machine.arch)


def _check_options(target: str, opt_level: int) -> None:
    if target not in TARGETS:
        raise TilegradError(f"target {target!r} is not supported; available: {', '.join(TARGETS)}")
    if opt_level not in (0, 1, 2, 3):
        raise TilegradError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")


def _check_fusion(fusion: str) -> None:
    from .passes.fuse import STRATEGIES

    if fusion not in STRATEGIES:
        raise TilegradError(f"fusion must be one of {', '.join(sorted(STRATEGIES))}, got {fusion!r}")


def _compile_imported(imported: Graph, *, target: str, opt_level: int, disable_passes: Sequence[str],
                      enable_passes: Sequence[str], db, fusion: str = "rules", attention: dict | None = None
                      ) -> Compilation:
    """The passes, then the native module, of an imported graph; `attention` the pass options of
    `_attention_options` (None: "auto")."""
    from .executor import compile_graph
    from .passes import optimize

    _check_options(target, opt_level)
    attention = attention or {}
    options = {**_fusion_options(fusion), **attention}
    machine = TARGETS[target]()
    if machine.kind == "cuda":
        from .cuda_executor import compile_graph as compile_cuda

        graph, report = optimize(imported, opt_level, disable=disable_passes, enable=enable_passes, target=machine,
                                 options=attention)
        if db is None:
            return Compilation(compile_cuda(graph, target=machine), report, graph)
        from .tune.apply import BestRecords
        from .tune.records import target_fingerprint

        with BestRecords(db, fingerprint=target_fingerprint(machine)) as chooser:  # the GPU's records only
            return Compilation(compile_cuda(graph, choose=chooser, target=machine), report, graph)
    if db is None:
        graph, report = optimize(imported, opt_level, disable=disable_passes, enable=enable_passes, target=machine,
                                 options=options)
        return Compilation(compile_graph(graph, target=machine), report, graph)
    from .tune.apply import BestRecords
    from .tune.graph_choice import chosen_graph

    with BestRecords(db) as chooser:
        chosen = chosen_graph(imported, chooser, fusion_plans=fusion == "stitch", **attention,
                              opt_level=opt_level, disable=disable_passes, enable=enable_passes)
        return Compilation(compile_graph(chosen.graph, choose=chooser, target=machine), chosen.report, chosen.graph)


def _fusion_options(fusion: str) -> dict:
    """The pass options of a fusion strategy: the stitching explorer scores with this machine's measured costs."""
    _check_fusion(fusion)
    if fusion != "stitch":
        return {"fusion": fusion}
    from .tune.fusion_costs import measured_fusion_costs

    return {"fusion": fusion, "fusion_costs": measured_fusion_costs()}


def _attention_options(form: str, key_block: int | None) -> dict:
    """The pass options of compile's `attention_form` and `attention_key_block`, checked."""
    from .passes.attention_form import attention_options

    return attention_options(form, key_block)


def load(directory) -> Module | SpecializingModule:
    """A module saved with `Module.save(directory)`, loaded without the original model, or a SpecializingModule
    saved with its `save`, its specialisations loaded (not compiled again). Its libraries are native code that
    runs with your rights: load only directories you trust. The manifest, the library and the weights are checked
    (checksums, sizes, dtypes); a failed check is a ModuleFormatError saying which file."""
    if specializing.is_saved(directory):
        return specializing.load(directory, _specializing)
    return _load(directory)


def _inputs(proto, input_shapes):
    """The inputs of an ONNX model (None for anything else, or a model whose inputs do not read: the import
    reports every problem of those)."""
    if proto is None:
        return None
    try:
        return model_inputs(proto, input_shapes)
    except TilegradError:
        return None


def _why_open(i) -> str:
    if i.kind != TENSOR:
        return f"input {i.name!r} is a {i.kind}, whose length or presence each call gives"
    if i.value_needed:
        return f"input {i.describe()} is a value input (it reaches {', '.join(i.shape_uses)})"
    return f"input {i.describe()} has symbolic dimensions"


def _specializing(model: bytes, options: dict, max_specializations: int) -> SpecializingModule:
    """The SpecializingModule of an ONNX model (serialised) compiled under `options` (compile's keywords)."""
    from .frontend.onnx import import_flattened
    from .frontend.onnx_file import load_model

    proto = load_model(model)
    inputs = model_inputs(proto, options["input_shapes"])
    symbolic = {i.name for i in inputs if i.symbolic and not i.value_needed}

    def compile_one(shapes, values, forms) -> Compiled:
        parts = {i.name: None if forms[i.name] is None else flat_names(i.name, i.kind, forms[i.name])
                 for i in inputs if i.kind != TENSOR}
        tensors_of = {name: i.name for i in inputs for name in flat_names(i.name, i.kind, forms[i.name])}
        static = {n: s for n, s in shapes.items() if tensors_of[n] in symbolic}  # declared static ones: checked
        graph, outputs = import_flattened(expose_inputs(specialize(proto, values), parts), static)
        return Compiled(_compile_imported(graph, target=options["target"], opt_level=options["opt_level"],
                                          disable_passes=options["disable_passes"],
                                          enable_passes=options["enable_passes"], db=options["db"],
                                          fusion=options.get("fusion", "rules"),
                                          attention=_attention_options(options.get("attention_form", "auto"),
                                                                       options.get("attention_key_block"))
                                          ).module, outputs)

    return SpecializingModule(model, options, inputs, [vo.name for vo in proto.graph.output],
                              compile_one, max_specializations)
