"""`tilegrad compile`: a model into a saved native module (or, for CUDA, its source and PTX)."""

from __future__ import annotations

import time
from pathlib import Path

from ..backend import backend_for
from ..target import TARGETS
from .common import MODEL_HELP, UsageError, compile_model, declared_input, load, size_text, typed


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    c = sub.add_parser("compile", parents=[parents.common, parents.shapes, parents.passes],
                       help="compile an ONNX model into a module directory",
                       description="Compile an ONNX model and save the native module to a directory.")
    c.add_argument("model", help=MODEL_HELP)
    c.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to save the module to")
    c.add_argument("--dynamic", action="append", default=[], metavar="NAME=LO:HI",
                   help="keep the model's symbolic dimension NAME symbolic, valued LO to HI: one library runs every "
                        "value (docs/dynamic.md); NAME=N fixes it to N (repeatable)")
    c.add_argument("--specialize", action="append", default=[], metavar="NAME=N,N,...",
                   help="with --dynamic NAME=LO:HI, also compile these values of NAME as fixed shapes, which calls "
                        "of those sizes run (fast paths; repeatable, every combination compiled)")
    c.set_defaults(command=_compile)


def _compile(args) -> None:
    if not backend_for(TARGETS[args.target]()).saves_module:
        _compile_cuda(args)
        return
    _, mod, elapsed = compile_model(args, dynamic=True)
    try:
        out = mod.save(args.output)
    except OSError as exc:
        raise UsageError(f"cannot save the module to {args.output}: {exc.strerror or exc}") from None
    fast = _fast_paths(mod)
    mod = getattr(mod, "dynamic", mod)  # a FastPathModule: its dynamic module's report, then the paths
    if not hasattr(mod, "spec"):  # a SpecializingModule: nothing compiled yet
        how = ("it compiles its first call's shapes, then one module for the dimensions later calls change"
               if mod.automatic_dims else "it compiles on each call with new input shapes or values")
        print(f"saved {args.model} to {out}; {how}")
        print("  inputs     " + ", ".join(declared_input(i) for i in mod.inputs))
        print("  outputs    " + ", ".join(mod.output_names))
        return
    spec = mod.spec
    print(f"compiled {args.model} in {elapsed:.2f} s -> {out}")
    names = {d.key: d.name for d in spec.dims}
    _print_buffers("inputs", spec.inputs, names)
    _print_buffers("outputs", spec.outputs, names)
    if spec.dims:
        print("  dynamic    " + ", ".join(f"{d.name} in {d.lo}..{d.hi}" for d in spec.dims)
              + " (the workspace is planned for the largest)")
    if fast:
        print("  fast paths " + fast)
    print(f"  weights    {len(spec.weights)} ({size_text(sum(s.nbytes for s in spec.weights))})")
    saved = 1 - spec.workspace_bytes / spec.unshared_bytes if spec.unshared_bytes else 0.0
    print(f"  workspace  {size_text(spec.workspace_bytes)} (without reuse {size_text(spec.unshared_bytes)}, "
          f"{saved:.0%} saved)")


def _fast_paths(mod) -> str:
    """`seq=16; seq=32`: the values a FastPathModule's specialised modules run ('' for any other module)."""
    if not hasattr(mod, "paths"):
        return ""
    names = {d.key: d.name for d in mod.dynamic.spec.dims}
    return "; ".join(", ".join(f"{names[k]}={v}" for k, v in zip(mod.keys, values)) for values in mod.paths)


def _compile_cuda(args) -> None:
    """The model's CUDA source and PTX (NVRTC, no GPU needed) into the output directory."""
    from .. import api

    spec = load(args.model, args.input_shape, dynamic=False)
    t0 = time.perf_counter()
    source, ptx = api.cuda_source(spec.model, spec.example_inputs, input_shapes=spec.input_shapes,
                                  opt_level=2 if args.opt_level is None else args.opt_level,
                                  disable_passes=args.disable_pass)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernels.cu").write_text(source)
        (out / "kernels.ptx").write_text(ptx)
    except OSError as exc:
        raise UsageError(f"cannot write to {args.output}: {exc.strerror or exc}") from None
    kernels = source.count('extern "C" __global__')
    print(f"compiled {args.model} for CUDA in {time.perf_counter() - t0:.2f} s: {kernels} kernels -> "
          f"{out / 'kernels.cu'}, {out / 'kernels.ptx'}")


def _print_buffers(title: str, specs, names: dict) -> None:
    print(f"  {title:<10} {len(specs)}: " + ", ".join(f"{s.name} {typed(s.shape, s.dtype, names)}" for s in specs))
