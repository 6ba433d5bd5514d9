"""What the subcommands share: loading a model under `--input-shape`, compiling it under the pass flags, the
error a user can fix, and how shapes, sizes and times are printed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import TilegradError
from ..options import CompileOptions

MODEL_HELP = "the .onnx file, or a PyTorch model as path/to/file.py:factory (see --input-shape)"


class UsageError(TilegradError):
    """Arguments that parse but make no sense (an unknown input name, a malformed shape)."""


def compile_model(args, dynamic: bool = False):
    """(ModelSpec, Module, seconds) for `args.model`, under the pass flags; with --explain, say what the passes
    did before the command's own report. With `dynamic`, an ONNX model whose inputs leave shapes open (symbolic
    dimensions, value inputs) gives a SpecializingModule, which compiles when called."""
    from .. import api
    from ..frontend.onnx_inputs import is_dynamic, model_inputs

    opt_level = 2 if args.opt_level is None else args.opt_level
    _check_pass_names(args.disable_pass)
    options = CompileOptions(target=getattr(args, "target", "cpu"), opt_level=opt_level,
                             disable_passes=args.disable_pass, db=getattr(args, "db", None), fusion=args.fusion,
                             attention_form=args.attention_form)
    spec = load(args.model, args.input_shape, dynamic=dynamic)
    t0 = time.perf_counter()
    if getattr(args, "specialize", None) and not getattr(args, "dynamic", None):
        raise UsageError("--specialize picks values of a dimension that --dynamic NAME=LO:HI keeps symbolic; give "
                         "--dynamic too")
    if getattr(args, "dynamic", None):
        if spec.kind != "onnx" or args.explain:
            raise UsageError("--dynamic applies to an .onnx file, without --explain (which reports one shape)")
        mod = api.compile(spec.model, input_shapes=spec.input_shapes, dynamic=dynamic_dims(args.dynamic),
                          specialize=specialized_values(getattr(args, "specialize", [])), options=options)
        return spec, mod, time.perf_counter() - t0
    if dynamic and spec.kind == "onnx" and is_dynamic(model_inputs(spec.model, spec.input_shapes)):
        if args.explain:
            raise UsageError("--explain reports one compiled shape, but the model's inputs leave shapes open: "
                             + "; ".join(declared_input(i) for i in model_inputs(spec.model, spec.input_shapes)
                                         if i.symbolic or i.value_needed) + "; fix them with --input-shape")
        mod = api.compile(spec.model, input_shapes=spec.input_shapes, options=options)
        return spec, mod, time.perf_counter() - t0
    compilation = api.compile_with_report(spec.model, spec.example_inputs, input_shapes=spec.input_shapes,
                                          options=options)
    elapsed = time.perf_counter() - t0
    if args.explain:
        _explain(compilation, opt_level)
    return spec, compilation.module, elapsed


def _check_pass_names(names: Sequence[str]) -> None:
    from ..passes import pass_names

    known = pass_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"--disable-pass {unknown[0]!r}: there is no such pass; the passes are {', '.join(known)}")


def _explain(compilation, opt_level: int) -> None:
    """The pipeline's report (one line per pass that ran, then its notes), the kernel count and the memory plan."""
    text = compilation.report.format()
    print(f"passes (opt-level {opt_level}):" + ("" if text else " none"))
    for line in text.splitlines():
        print(f"  {line}")
    spec = compilation.module.spec
    print(f"kernels: {compilation.kernels}")
    print(f"intermediates: {size_text(spec.workspace_bytes)} planned with reuse "
          f"({size_text(spec.unshared_bytes)} without)")


def saved_or_compiled(args, dynamic: bool = False):
    """The module of a command that takes either: a saved module directory loaded, or the model compiled."""
    from ..frontend.model_spec import is_torch_spec

    source = Path(args.model)
    if source.is_dir():
        return load_saved(args, source)
    if not source.exists() and not is_torch_spec(args.model):
        raise UsageError(f"no ONNX file or saved module directory at {source}")
    return compile_model(args, dynamic=dynamic)[1]


def load_saved(args, source: Path):
    """The module saved in directory `source`, refusing the flags that apply only to compiling."""
    from .. import api

    if args.input_shape:
        raise UsageError(f"--input-shape applies only when compiling an .onnx file; the module in {source} "
                         f"was compiled for fixed shapes")
    compiling = (getattr(args, "explain", False), getattr(args, "opt_level", None) is not None,
                 getattr(args, "disable_pass", ()))  # flags of the commands that compile (info has none)
    if any(compiling):
        raise UsageError(f"--explain, --opt-level and --disable-pass apply only when compiling an .onnx file; "
                         f"the module in {source} is already compiled")
    return api.load(source)


def load(model: str, shape_items: Sequence[str], dynamic: bool = False):
    """The ModelSpec of `model` (an ONNX file or a PyTorch `file.py:factory`) under the `--input-shape` items,
    checked to make every input's shape static (unless `dynamic`: compile and run specialise on each call)."""
    from ..frontend.model_spec import ModelSpec, is_torch_spec, load_model_spec
    from ..frontend.onnx_file import load_model

    shapes = input_shapes(shape_items)
    if is_torch_spec(model):
        return load_model_spec(model, shapes)
    proto = load_model(model_path(model))
    check_shape_names(proto, shapes)
    problem = None if dynamic else symbolic_inputs(proto, shapes)
    if problem:
        raise UsageError(problem)
    return ModelSpec("onnx", proto, None, shapes)


def _graph_inputs(proto) -> list:
    initializers = {t.name for t in proto.graph.initializer}
    return [vi for vi in proto.graph.input if vi.name not in initializers]


def check_shape_names(proto, shapes) -> None:
    names = [vi.name for vi in _graph_inputs(proto)]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise UsageError(f"--input-shape names {', '.join(map(repr, unknown))}, which the model does not take as "
                         f"input; its inputs are {', '.join(names)}")


def symbolic_inputs(proto, shapes) -> str | None:
    """Why the inputs' shapes are not all static: each input with the positions and names of its symbolic
    dimensions, and the flag that fixes them; None when they are all static."""
    problems = []
    for vi in _graph_inputs(proto):
        dims = vi.type.tensor_type.shape.dim
        if vi.name in shapes or all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
            continue
        which = ", ".join(f"{i}: {d.dim_param or '?'}" for i, d in enumerate(dims)
                          if not (d.HasField("dim_value") and d.dim_value > 0))
        example = ",".join(str(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0
                           else f"<{d.dim_param or '?'}>" for d in dims)
        problems.append(f"input {declared(vi)} has symbolic dimensions ({which}); fix them with "
                        f"--input-shape {vi.name}={example}")
    return "; ".join(problems) or None


def model_path(text: str, saved_too: bool = False) -> Path:
    """The .onnx file `text` names; `saved_too`: the command also takes a saved module directory (the error for
    a path that is neither says so)."""
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{path} is a directory; this command takes an .onnx file")
    if not path.is_file():
        raise UsageError(f"no ONNX file{' or saved module directory' if saved_too else ''} at {path}")
    return path


def input_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`NAME=D0,D1,...` items as {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, eq, dims = item.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        except ValueError:
            shape = None
        if not eq or not name or shape is None or any(d <= 0 for d in shape):
            raise UsageError(f"--input-shape {item!r} is not NAME=D0,D1,... with positive integer dimensions "
                             f"(for example x=1,3,224,224)")
        if name in shapes:
            raise UsageError(f"--input-shape gives input {name!r} twice")
        shapes[name] = shape
    return shapes


def dynamic_dims(items: Sequence[str]) -> dict:
    """`--dynamic NAME=LO:HI` (or NAME=N) items as `compile(dynamic=)` takes them."""
    out: dict = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            parts = tuple(int(v) for v in value.split(":"))
        except ValueError:
            parts = ()
        if not name or len(parts) not in (1, 2):
            raise UsageError(f"--dynamic {item!r} is not NAME=LO:HI (bounds) or NAME=N (a size)")
        if name in out:
            raise UsageError(f"--dynamic gives dimension {name!r} twice")
        out[name] = parts if len(parts) == 2 else parts[0]
    return out


def specialized_values(items: Sequence[str], flag: str = "--specialize") -> dict | None:
    """`--specialize NAME=N,N,...` items (or another flag's of that form: `--sample`) as `compile(specialize=)`
    (`tune(samples=)`) takes them; None when there are none."""
    out: dict = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            values = [int(v) for v in value.split(",")]
        except ValueError:
            values = []
        if not name or not values:
            raise UsageError(f"{flag} {item!r} is not NAME=N,N,... (sizes of a --dynamic dimension)")
        if name in out:
            raise UsageError(f"{flag} gives dimension {name!r} twice")
        out[name] = values
    return out or None


def typed(shape, dtype: str, names: dict | None = None) -> str:
    """`float32[1, seq, 32]`: a dynamic dimension's formula by the model's `names` of them (key -> name)."""
    def text(d):
        return d.text(names) if hasattr(d, "text") else str(d)
    return f"{dtype}[{'?' if shape is None else ', '.join(map(text, shape))}]"


def size_text(n: int) -> str:
    size, unit = float(n), 0
    while size >= 1024 and unit < 3:
        size, unit = size / 1024, unit + 1
    return f"{n} B" if unit == 0 else f"{size:.1f} {('KiB', 'MiB', 'GiB')[unit - 1]}"


def seconds_text(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def count_text(n: float) -> str:
    size, unit = float(n), 0
    while abs(size) >= 1000 and unit < 4:
        size, unit = size / 1000, unit + 1
    return f"{n:.0f}" if unit == 0 else f"{size:.3g} {'KMGT'[unit - 1]}"


def declared_input(i) -> str:
    """`x float32[N, 3]` of an analysed input, with `(value input)` when its value is compiled in."""
    return i.describe() + (" (value input)" if i.value_needed else "")


def declared(vi) -> str:
    """`name float32[N, 3, 224, 224]` from an ONNX ValueInfo, symbolic dimensions by their names."""
    from onnx import helper

    from ..frontend.onnx_inputs import declared_dim

    tt = vi.type.tensor_type
    try:
        dtype = str(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except (KeyError, ValueError):
        dtype = "?"
    if not tt.HasField("shape"):
        return f"{vi.name} {dtype}[?]"
    dims = [str(declared_dim(d)) for d in tt.shape.dim]
    return f"{vi.name} {dtype}[{', '.join(dims)}]"
