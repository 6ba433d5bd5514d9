"""`tilegrad info`: what a model takes, gives and holds (ops, FLOPs, what does not import), and this machine's
measured peaks."""

from __future__ import annotations

import collections
import math
from pathlib import Path

import numpy as np

from ..errors import TilegradError
from .common import (UsageError, check_shape_names, count_text, declared, declared_input, input_shapes, load_saved,
                     model_path, size_text, symbolic_inputs, typed)


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    i = sub.add_parser("info", parents=[parents.common, parents.shapes],
                       help="inputs, outputs, ops, FLOPs and unsupported ops",
                       description="Describe an ONNX model: its inputs and outputs, op histogram, FLOPs estimate "
                                   "and the ops tilegrad does not support; with --machine, this machine's measured "
                                   "FMA peak and memory bandwidth.")
    i.add_argument("model", nargs="?", help="the .onnx file, or a module directory saved by `tilegrad compile` "
                                            "(optional with --machine)")
    i.add_argument("--machine", action="store_true",
                   help="this machine's CPU, ISA, threads, measured FMA peak and memory bandwidth (measured once, "
                        "then cached)")
    i.add_argument("--remeasure", action="store_true", help="with --machine: measure again, overwriting the cache")
    i.set_defaults(command=_info)


def _info(args) -> None:
    if args.machine or args.remeasure:
        _print_machine(args.remeasure)
        if args.model is None:
            return
        print()
    elif args.model is None:
        raise UsageError("info needs a model (.onnx file), or --machine for this machine's peaks")
    if Path(args.model).is_dir():
        _print_saved(args, Path(args.model))
        return
    from ..frontend.onnx import read_onnx  # (the reader imports the op families, which fill ONNX_OPS)
    from ..frontend.onnx_file import load_model
    from ..frontend.onnx_op_table import ONNX_OPS, op_key

    proto = load_model(model_path(args.model, saved_too=True))
    shapes = input_shapes(args.input_shape)
    check_shape_names(proto, shapes)
    g = proto.graph
    initializers = {t.name for t in g.initializer}
    symbolic = symbolic_inputs(proto, shapes)
    graph, problems = read_onnx(proto, input_shapes=shapes) if symbolic is None else (None, [])
    opset = next((i.version for i in proto.opset_import if i.domain in ("", "ai.onnx")), None)
    params = sum(math.prod(t.dims) for t in g.initializer)
    print(f"{args.model}: opset {opset}, {len(g.node)} nodes, {params:,} parameters in {len(initializers)} "
          f"initializers")
    if graph is not None:
        print("inputs:  " + ", ".join(f"{v.name} {typed(v.shape, v.dtype)}" for v in graph.inputs))
        print("outputs: " + ", ".join(f"{v.name} {typed(v.shape, v.dtype)}" for v in graph.outputs))
    else:
        print("inputs:  " + ", ".join(declared(vi) for vi in g.input if vi.name not in initializers))
        print("outputs: " + ", ".join(declared(vi) for vi in g.output))
    if symbolic is not None:
        print(f"symbolic: {symbolic}")
    values = [i for i in _analysed_inputs(proto, shapes) if i.value_needed]
    if values:
        print("value inputs (each distinct value compiles once): "
              + "; ".join(f"{declared_input(i)} reaches {', '.join(i.shape_uses)}" for i in values))
    histogram = collections.Counter(_op_label(n) for n in g.node)
    print("ops:     " + ", ".join(f"{op} {count}" for op, count in histogram.most_common()))
    if symbolic is not None:  # constants cannot fold yet: list the ops with no mapping, which fail unless they do
        unmapped = [f"{_op_label(n)} (node {n.name!r})" for n in g.node
                    if op_key(n) not in ONNX_OPS]
        print(f"unsupported: not known until the symbolic dimensions are fixed; ops with no mapping (refused unless "
              f"their inputs are constants): {', '.join(unmapped) or 'none'}\nFLOPs:   unavailable until then")
        return
    unsupported = [f"\n  {p.op_type}: node {p.node!r}" for p in problems if p.unsupported_op]
    print(f"unsupported: {len(unsupported)} node(s){''.join(unsupported)}" if unsupported else "unsupported: none")
    others = [f"\n  {' '.join(str(p.error).split())}" for p in problems if not p.unsupported_op]
    if others:
        print(f"problems: {len(others)}{''.join(others)}")
    if graph is None:
        print("FLOPs:   unavailable (the model does not import: see above)")
        return
    _print_flops(graph)


def _print_saved(args, directory: Path) -> None:
    """A saved module: what it takes and gives, its kernels, weights and memory."""
    mod = load_saved(args, directory)
    if not hasattr(mod, "spec"):
        dynamic = f", and a module for the dimensions {mod.dynamic_bounds}" if mod.dynamic_bounds else ""
        print(f"{directory}: a module that specialises on its inputs' shapes; {len(mod.specializations())} "
              f"specialisation(s) saved{dynamic}")
        return
    spec = mod.spec
    weights = sum(math.prod(w.shape) * np.dtype(w.dtype).itemsize for w in spec.weights)
    print(f"{directory}: a saved module, {len(spec.kernels)} kernels, library {size_text(mod.library.stat().st_size)}")
    names = {d.key: d.name for d in spec.dims}
    print("inputs:  " + ", ".join(f"{s.name} {typed(s.shape, s.dtype, names)}" for s in spec.inputs))
    print("outputs: " + ", ".join(f"{s.name} {typed(s.shape, s.dtype, names)}" for s in spec.outputs))
    print(f"weights: {len(spec.weights)} arrays, {size_text(weights)} ({len(spec.derived)} derived by the library "
          f"at load)")
    print(f"intermediates: {size_text(spec.workspace_bytes)} planned with reuse ({size_text(spec.unshared_bytes)} "
          f"without)")
    largest = {d.key: d.hi for d in spec.dims}
    flops = sum(k.at(largest).flops for k in spec.kernels)
    at = f" at {', '.join(f'{d.name} = {d.hi}' for d in spec.dims)}" if spec.dims else ""
    print(f"work: {flops / 1e9:.3f} GFLOP per call{at} (the kernels' own arithmetic: Winograd's fewer multiplies)")


def _print_machine(remeasure: bool) -> None:
    """This machine's peaks, measured now (the first time, or with --remeasure) or read from the cache."""
    from ..machine import cache_path, measured_peaks

    path = cache_path()
    fresh = remeasure or not path.is_file()
    peaks = measured_peaks(remeasure=remeasure)
    print(f"machine:   {peaks.cpu}")
    print(f"  isa        {peaks.isa}")
    print(f"  threads    {peaks.threads}")
    print(f"  FMA peak   {peaks.fma_gflops:.1f} GFLOP/s (float32, all threads)")
    print(f"  bandwidth  {peaks.bandwidth_gbs:.1f} GB/s (triad, bytes read + written)")
    print(f"  clock      {peaks.clock_ghz:.2f} GHz measured; {peaks.fma_per_cycle:.2f} vector FMAs per cycle per core")
    print(f"  measured   {peaks.measured_at}: {peaks.how}")
    print(f"  cache      {path} ({'measured now' if fresh else 'cached; --remeasure measures again'})")


def _print_flops(graph) -> None:
    from ..ir.compute import node_flops

    by_op = collections.Counter()
    try:
        for node in graph.nodes:
            by_op[node.op] += node_flops(node)
    except TilegradError as exc:  # an op the registry has no compute for at these shapes
        print(f"FLOPs:   unavailable: {' '.join(str(exc).split())}")
        return
    total = sum(by_op.values())
    detail = ", ".join(f"{op} {count_text(f)}" for op, f in by_op.most_common() if f)
    print(f"FLOPs:   {total:,} ({count_text(total)}; a multiply-add counts two" + (f": {detail})" if detail else ")"))


def _analysed_inputs(proto, shapes) -> tuple:
    """The model's inputs with their value uses; none when they do not read (the import reports why)."""
    from ..frontend.onnx_inputs import model_inputs

    try:
        return model_inputs(proto, shapes)
    except TilegradError:
        return ()


def _op_label(node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
