"""The public surface: compile a model into a native module, load a saved one."""

from __future__ import annotations

import contextlib
import itertools
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from . import config, progress
from .backend import backend_for
from .errors import ShapeError, TilegradError, UnsupportedOpsError
from .frontend.load import import_model, onnx_proto
from .frontend.onnx_boundary import TENSOR, expose_inputs, structured_outputs
from .frontend.onnx_file import read_mapped_in
from .frontend.onnx_inputs import dimension_axes, is_dynamic, model_inputs, specialize, symbolic_shapes
from .frontend.torch_dynamic import exported_with_dims
from .options import CompileOptions
from . import module_cache
from .runtime import fast_paths, specializing
from .runtime.fast_paths import FastPathModule
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
            dynamic: Mapping[str, tuple[int, int]] | bool | None = None,
            specialize: Mapping[str, Sequence[int]] | None = None, options: CompileOptions | None = None,
            max_specializations: int = MAX_SPECIALIZATIONS,
            **option_fields) -> Module | SpecializingModule | FastPathModule:
    """Compile an ONNX model (a path, bytes or onnx.ModelProto), or a torch.nn.Module called on `example_inputs`
    (a tuple of tensors, captured with torch.export), into a callable native Module (NumPy in, NumPy out). A torch
    model with ops tilegrad does not lower becomes a `PartitionedModule`: its other ops compiled in native
    segments, those run by PyTorch between them, after one `EagerOpsWarning` naming them. An ONNX model compiled
    before, from the same bytes with the same options and tilegrad, is loaded from the module cache
    (`module_cache.py`; TILEGRAD_MODULE_CACHE=0 turns it off).

    How it compiles is `options` (a `CompileOptions`), with any of its fields given as keywords instead or on
    top: `target`, `opt_level`, `disable_passes`, `enable_passes`, `db`, `fusion`, `attention_form`,
    `attention_key_block` (`CompileOptions` says what each does).

    `dynamic` names symbolic dimensions of an ONNX model (its dim_params) with bounds, `{"seq": (1, 512)}` (or a
    size, which fixes one: `{"batch": 1, "seq": (1, 512)}`): they stay symbolic through the passes, the kernels
    and the generated C, and the one Module runs every value within the bounds without compiling again (its memory
    planned for the largest). Every other symbolic dimension must be fixed by `input_shapes`. `specialize` names
    values of those dimensions that deserve fast paths, `{"seq": [128, 512]}`: each (each combination, where it
    names several dimensions) is compiled as a fixed shape too, and the `FastPathModule` returned runs a call
    whose values are among them on that module, any other on the dynamic one.

    For a torch.nn.Module, `dynamic` is torch.export's `dynamic_shapes`, `{"ids": {1: Dim("seq", min=1,
    max=512)}}`: torch's exporter writes the module as ONNX with those dimensions named, compiled as above.

    `input_shapes` fixes symbolic input dimensions of an ONNX model. An ONNX model with symbolic dimensions left open,
    or with value inputs (integer inputs whose values decide shapes, like a Reshape's shape given as an input), or with
    sequence or optional inputs or outputs (given and returned as lists and None), becomes a SpecializingModule instead:
    it compiles on each call with a new signature (input shapes, values of the value inputs, lengths of sequences,
    presence of optionals), keeping the `max_specializations` most recently used. Where the inputs are plain
    tensors, their dimensions become dynamic as calls change them: the first call's shapes compile fixed, and the
    first call that changes a dimension compiles one module with it dynamic (from 1 to a few times its largest
    value) that later calls run without compiling (`runtime/automatic_dims.py`); `dynamic=False` compiles every
    signature fixed instead. `compile_with_report` takes the same arguments and also says what the passes did.
    """
    options = _checked(CompileOptions.of(options, **option_fields))
    automatic_dims = dynamic is not False
    dynamic = dynamic or None
    if dynamic and example_inputs is not None:  # a torch module, its dimensions declared by torch.export's Dims
        model, dynamic = exported_with_dims(model, example_inputs, dynamic)
        example_inputs = None
    if specialize:
        return _with_fast_paths(model, example_inputs, input_shapes, dynamic, specialize, options)
    shapes_key = {**(input_shapes or {}), **{f"\0dynamic {n}": repr(b) for n, b in (dynamic or {}).items()}}
    key = module_cache.quick_key(model, shapes_key, options)  # a model file compiled before, unchanged since
    if key is not None and (kept := module_cache.cached_module(key)) is not None:
        return kept
    proto = onnx_proto(model, example_inputs, map_external=True)  # weights read as the passes need them
    if dynamic:
        return _compile_dynamic(model, proto, input_shapes, dynamic, options, shapes_key)
    inputs = _inputs(proto, input_shapes)
    if inputs is not None and (is_dynamic(inputs) or structured_outputs(proto)):
        read_mapped_in(proto)  # kept whole: it is compiled again per signature
        return _specializing(proto.SerializeToString(), _saved_options(options, input_shapes, automatic_dims),
                             max_specializations)
    _check_one_shape(inputs)
    key = None if proto is None else module_cache.module_key(model, proto, input_shapes, options)
    if key is not None and (kept := module_cache.cached_module(key)) is not None:
        return kept  # compiled before from the same model, options and tilegrad
    try:
        imported = import_model(model if proto is None else proto, example_inputs, input_shapes)
    except UnsupportedOpsError as error:  # a torch model: compile around the ops, which PyTorch runs
        from .torch_partition import partition

        return partition(error, lambda segment, example: compile(segment, example, options=options))
    del proto  # the weights are the graph's arrays now: the loaded model's copy of them goes before the passes
    module = _compile_imported(imported, options).module
    if key is not None:
        module_cache.keep_module(key, module)
    return module


def _compile_dynamic(model, proto, input_shapes, dynamic: Mapping[str, tuple[int, int]], options: CompileOptions,
                     shapes_key: dict) -> Module:
    """One Module for every value of the `dynamic` dimensions within their bounds (`compile`)."""
    if proto is None:
        raise TilegradError("dynamic= applies to an ONNX model, or to a torch.nn.Module given with example inputs "
                            "(its dimensions as torch.export's Dims)")
    if not backend_for(TARGETS[options.target]()).symbolic_dims:
        raise TilegradError(f"dynamic= is not available for the {options.target} target, which compiles fixed "
                            f"shapes; compile with input_shapes= instead")
    symbolic = symbolic_shapes(model_inputs(proto, input_shapes), dynamic)
    key = module_cache.module_key(model, proto, shapes_key, options)
    if key is not None and (kept := module_cache.cached_module(key)) is not None:
        return kept
    imported = import_model(proto, None, {**(input_shapes or {}), **symbolic})
    del proto  # as in `compile`
    module = _compile_imported(imported, options).module
    if key is not None:
        module_cache.keep_module(key, module)
    return module


def _with_fast_paths(model, example_inputs, input_shapes, dynamic, specialize: Mapping[str, Sequence[int]],
                     options: CompileOptions) -> FastPathModule:
    """The dynamic module and one module per combination of the `specialize` values (`compile`)."""
    bounds = dict(dynamic or {})
    for name, values in specialize.items():
        lo_hi = bounds.get(name)
        if not isinstance(lo_hi, (tuple, list)):
            raise TilegradError(f"specialize names dimension {name!r}, which dynamic= does not give bounds; "
                                f"specialize picks values of dynamic dimensions")
        if isinstance(values, (int, str)) or not values or not all(type(v) is int and lo_hi[0] <= v <= lo_hi[1]
                                                                  for v in values):
            raise TilegradError(f"specialize gives dimension {name!r} {values!r}; expected a list of sizes within "
                                f"its bounds {lo_hi[0]} to {lo_hi[1]}")
    dynamic_module = compile(model, example_inputs, input_shapes=input_shapes, dynamic=bounds, options=options)
    keys = {d.name: d.key for d in dynamic_module.spec.dims}
    names = list(specialize)
    paths = {}
    for values in itertools.product(*(sorted(set(specialize[n])) for n in names)):
        fixed = {**bounds, **dict(zip(names, values))}
        paths[values] = compile(model, example_inputs, input_shapes=input_shapes, dynamic=fixed, options=options)
    return FastPathModule(dynamic_module, tuple(keys[n] for n in names), paths)


def compile_with_report(model, example_inputs=None, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                        options: CompileOptions | None = None, **option_fields) -> Compilation:
    """`compile`, returning the module together with the pass pipeline's report and the optimised graph. It
    compiles one shape: an ONNX model whose inputs leave shapes open (or are sequences or optionals) is a
    ShapeError naming them."""
    options = _checked(CompileOptions.of(options, **option_fields))
    proto = onnx_proto(model, example_inputs, map_external=True)
    _check_one_shape(_inputs(proto, input_shapes))
    imported = import_model(model if proto is None else proto, example_inputs, input_shapes)
    del proto  # as in `compile`
    return _compile_imported(imported, options)


def cuda_source(model, example_inputs=None, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
                opt_level: int = 2, disable_passes: Sequence[str] = ()) -> tuple[str, str]:
    """(CUDA source, PTX) of a model's kernels for the CUDA target, compiled by NVRTC; needs no GPU (the target
    is the device's where one is present, else sm_90)."""
    from .cuda_executor import render_graph
    from .passes import optimize
    from .runtime.nvrtc import compile_ptx

    options = CompileOptions(target="cuda", opt_level=opt_level, disable_passes=disable_passes)
    machine = TARGETS[options.target]()
    proto = onnx_proto(model, example_inputs)
    imported = import_model(model if proto is None else proto, example_inputs, input_shapes)
    graph, _ = optimize(imported, options.opt_level, disable=options.disable_passes, target=machine)
    source = render_graph(graph, target=machine).source
    return source, compile_ptx(source, machine.arch)


def _checked(options: CompileOptions) -> CompileOptions:
    """`options`, with the fields the passes define (fusion strategies, attention forms) checked now rather than
    at the first call of a specialising module."""
    from .passes.attention_form import attention_options
    from .passes.fuse import STRATEGIES

    if options.fusion not in STRATEGIES:
        raise TilegradError(f"fusion must be one of {', '.join(sorted(STRATEGIES))}, got {options.fusion!r}")
    attention_options(options.attention_form, options.attention_key_block)
    return options


def _check_one_shape(inputs) -> None:
    """A ShapeError naming the ONNX model's inputs (None for a torch model) that leave a dimension open, need a
    value or are not tensors: what compiling one shape cannot take."""
    open_inputs = [i for i in inputs or () if i.symbolic or i.value_needed or i.kind != TENSOR]
    if open_inputs:
        raise ShapeError("compile_with_report compiles one shape, but " + "; ".join(map(_why_open, open_inputs))
                         + "; fix the dimensions with input_shapes, or call tilegrad.compile, which compiles "
                         "per call")


def _compile_imported(imported: Graph, options: CompileOptions) -> Compilation:
    """The passes, then the native module, of an imported graph, for the options' target and thread count: with
    a records database, the tuned schedules (and, where the target's records choose them, the graph: algorithms,
    attention forms, fusion plan). On a terminal, a bar shows the progress (`progress.py`)."""
    with _threads(options.threads), progress.reporting():
        return _compile_passes_and_kernels(imported, options)


def _threads(threads: int | None):
    """The configuration with `threads` as the kernels' thread count while it is active (None: unchanged)."""
    return contextlib.nullcontext() if threads is None else config.override(num_threads=threads)


def _compile_passes_and_kernels(imported: Graph, options: CompileOptions) -> Compilation:
    from .passes import optimize

    machine = TARGETS[options.target]()
    backend = backend_for(machine)
    attention = {"attention_form": options.attention_form, "attention_key_block": options.attention_key_block}
    dynamic = any(not isinstance(d, numbers.Integral) for v in imported.inputs for d in v.shape)  # choices: fixed
    if options.db is None or not backend.chooses_graph or dynamic:
        pass_options = {**_fusion_options(options.fusion), **attention} if backend.chooses_graph else attention
        graph, report = optimize(imported, options.opt_level, disable=options.disable_passes,
                                 enable=options.enable_passes, target=machine, options=pass_options)
        if options.db is None:
            return Compilation(backend.compile_graph(graph, None, None, machine), report, graph)
        from .tune.apply import BestRecords
        from .tune.graph_choice import records_chosen
        from .tune.records import target_fingerprint

        with BestRecords(options.db, fingerprint=target_fingerprint(machine)) as chooser:  # this device's records
            replay = not dynamic or records_chosen(imported, chooser, opt_level=options.opt_level,
                                                   disable=options.disable_passes, enable=options.enable_passes)
            return Compilation(backend.compile_graph(graph, None, chooser if replay else None, machine), report,
                               graph)
    from .tune.apply import BestRecords
    from .tune.graph_choice import chosen_graph

    with BestRecords(options.db) as chooser:
        pick = chosen_graph(imported, chooser, fusion_plans=options.fusion == "stitch", **attention,
                            opt_level=options.opt_level, disable=options.disable_passes, enable=options.enable_passes)
        chosen = pick.variant
        return Compilation(backend.compile_graph(chosen.graph, None, chooser if pick.tuned else None, machine),
                           chosen.report, chosen.graph)


def _fusion_options(fusion: str) -> dict:
    """The pass options of a fusion strategy: the stitching explorer scores with this machine's measured costs."""
    if fusion != "stitch":
        return {"fusion": fusion}
    from .tune.fusion_costs import measured_fusion_costs

    return {"fusion": fusion, "fusion_costs": measured_fusion_costs()}


def c_include_dir():
    """The directory holding tilegrad.h, the C API that loads a saved module and runs it without Python
    (examples/c_api/run_model.c): pass it to the C compiler with -I."""
    from .runtime.c_api import include_dir

    return include_dir()


def load(directory, *, threads: int | None = None) -> Module | SpecializingModule | FastPathModule:
    """A module saved with `Module.save(directory)`, loaded without the original model; a SpecializingModule
    saved with its `save`, its specialisations loaded (not compiled again); or a FastPathModule saved with its
    `save`. Its kernels run on `threads` threads (None: the configured count). Its libraries are native code that
    runs with your rights: load only directories you trust. The manifest, the library and the weights are checked
    (checksums, sizes, dtypes); a failed check is a ModuleFormatError saying which file."""
    CompileOptions(threads=threads)  # the same check as compile's
    with _threads(threads):
        if specializing.is_saved(directory):
            return specializing.load(directory, _specializing)
        if fast_paths.is_saved(directory):
            return fast_paths.load(directory)
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


def _saved_options(options: CompileOptions, input_shapes, automatic_dims: bool) -> dict:
    """What a specialising module records of how it compiles: the options, the fixed input dimensions and whether
    the dimensions calls change become dynamic."""
    return {"input_shapes": {n: list(v) for n, v in (input_shapes or {}).items()}, "automatic_dims": automatic_dims,
            **options.to_json()}


def _specializing(model: bytes, saved: dict, max_specializations: int) -> SpecializingModule:
    """The SpecializingModule of an ONNX model (serialised) compiled under `saved` (`_saved_options`)."""
    from .frontend.onnx import import_flattened
    from .frontend.onnx_file import load_model

    proto = load_model(model)
    options = _checked(CompileOptions.from_json({k: v for k, v in saved.items()
                                                 if k not in ("input_shapes", "automatic_dims")}))
    inputs = model_inputs(proto, saved["input_shapes"])
    symbolic = {i.name for i in inputs if i.symbolic and not i.value_needed}

    def compile_one(shapes, values, forms) -> Compiled:
        parts = {i.name: None if forms[i.name] is None else flat_names(i.name, i.kind, forms[i.name])
                 for i in inputs if i.kind != TENSOR}
        tensors_of = {name: i.name for i in inputs for name in flat_names(i.name, i.kind, forms[i.name])}
        static = {n: s for n, s in shapes.items() if tensors_of[n] in symbolic}  # declared static ones: checked
        graph, outputs = import_flattened(expose_inputs(specialize(proto, values), parts), static)
        return Compiled(_compile_imported(graph, options).module, outputs)

    def compile_dynamic(bounds) -> Module:
        shapes = {**saved["input_shapes"], **symbolic_shapes(inputs, bounds)}
        return _compile_imported(import_model(proto, None, shapes), options).module

    axes = dimension_axes(inputs)
    automatic = (saved.get("automatic_dims", False) and axes is not None and not structured_outputs(proto)
                 and options.db is None and backend_for(TARGETS[options.target]()).symbolic_dims)
    return SpecializingModule(model, saved, inputs, [vo.name for vo in proto.graph.output],
                              compile_one, max_specializations, compile_dynamic if automatic else None, axes)
