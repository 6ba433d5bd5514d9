"""The `tilegrad` command: compile, run, bench, profile and info for ONNX models (compile, run, bench and profile
also for PyTorch models given as `path/to/file.py:factory`, see `frontend/model_spec.py`) and saved modules.

Every subcommand prints a short human report and exits 0; a mistake the user can fix (a bad file, an unsupported
op, a missing or misshapen input) is one line `tilegrad: error: ...` on stderr and exit status 2, and any other
failure (a bug) one line `tilegrad: internal error: ...` and exit status 1. `--debug` re-raises instead, for the
traceback.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .errors import TilegradError

USER_ERROR = 2
INTERNAL_ERROR = 1
PEERS = ("onnxruntime", "torch")
TORCH_SKIPPED = ("skipped: an ONNX file has no torch model to run "
                 "(converting one needs onnx2torch, which tilegrad does not depend on)")
MODEL_HELP = "the .onnx file, or a PyTorch model as path/to/file.py:factory (see --input-shape)"
ONNXRUNTIME_SKIPPED = "skipped: a PyTorch model has no ONNX file to run (export one with torch.onnx.export)"


class UsageError(TilegradError):
    """Arguments that parse but make no sense (an unknown input name, a malformed shape)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or an argparse usage error (already reported on stderr)
        return int(exc.code or 0)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(name)s: %(message)s")
    try:
        args.command(args)
    except (TilegradError, OSError) as exc:
        if args.debug:
            raise
        message = " ".join(str(exc).split())  # one line, whatever the exception's text
        print(f"tilegrad: error: {message}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("tilegrad: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]
        print(f"tilegrad: internal error: {message} (a bug in tilegrad; --debug shows the traceback)",
              file=sys.stderr)
        return INTERNAL_ERROR
    return 0


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show debug logging and raise errors with their traceback")
    shapes = argparse.ArgumentParser(add_help=False)
    shapes.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                        help="fix the shape of an input with symbolic dimensions; for a PyTorch model "
                             "(file.py:factory), the shape of forward's argument NAME (repeatable)")
    passes = argparse.ArgumentParser(add_help=False)
    passes.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=None,
                        help="graph passes to run: 0 none (one kernel per op) up to 3 (default 2)")
    passes.add_argument("--disable-pass", action="append", default=[], metavar="NAME",
                        help="skip this graph pass (repeatable)")
    passes.add_argument("--fusion", choices=("rules", "stitch"), default="rules",
                        help="fusion strategy: rule-based (default) or FusionStitching's search over plans")
    passes.add_argument("--explain", action="store_true",
                        help="print what each graph pass changed, the kernel count and the intermediate memory")
    passes.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                        help="the machine to compile for: cpu (this one) or cuda (the first GPU, else sm_90); "
                             "`compile --target cuda` writes the CUDA source and its PTX and needs no GPU")
    passes.add_argument("--db", metavar="FILE", default=None,
                        help="tuning records (from `tilegrad tune`): each kernel takes its best tuned schedule")

    p = argparse.ArgumentParser(prog="tilegrad", description="A deep-learning compiler for ONNX and PyTorch "
                                "models.")
    p.add_argument("--debug", action="store_true", help="show debug logging and raise errors with their traceback")
    sub = p.add_subparsers(title="commands", metavar="COMMAND", required=True)

    c = sub.add_parser("compile", parents=[common, shapes, passes],
                       help="compile an ONNX model into a module directory",
                       description="Compile an ONNX model and save the native module to a directory.")
    c.add_argument("model", help=MODEL_HELP)
    c.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to save the module to")
    c.set_defaults(command=_compile)

    r = sub.add_parser("run", parents=[common, shapes, passes], help="run a module directory or an ONNX model",
                       description="Run a saved module (or compile and run an .onnx file) on inputs from .npy files.")
    r.add_argument("model", help="a module directory saved by `tilegrad compile`, an .onnx file or a PyTorch "
                                 "file.py:factory")
    r.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input array (repeatable); the name may be left out when the model has one input")
    r.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs here, keyed by output name")
    r.set_defaults(command=_run)

    b = sub.add_parser("bench", parents=[common, shapes, passes], help="median latency, against other runtimes",
                       description="Median latency of the compiled model on random inputs, beside other runtimes.")
    b.add_argument("model", help=MODEL_HELP)
    b.add_argument("--against", default="", metavar="PEER[,PEER]",
                   help=f"runtimes to compare with, comma-separated: {', '.join(PEERS)}")
    b.add_argument("--repeats", type=int, default=10, metavar="N", help="timed repeats (default 10)")
    b.set_defaults(command=_bench)

    t = sub.add_parser("tune", parents=[common, shapes], help="tune the model's kernels into a records database",
                       description="Search schedules for every kernel of the model, measuring candidates on this "
                                   "machine; the records go to --db, which `compile --db` then uses.")
    t.add_argument("model", help=MODEL_HELP)
    t.add_argument("--db", metavar="FILE", help="the records database (SQLite; created or resumed)")
    t.add_argument("--policy", default="gradient", metavar="NAME",
                   help="search policy, a registered name: gradient (Felix, the default), evolutionary (Ansor) "
                        "or autotvm (templates, XGBoost and simulated annealing)")
    t.add_argument("--trials", type=int, default=None, metavar="N", help="candidates to measure in all")
    t.add_argument("--budget", default=None, metavar="TIME", help="wall-clock budget: seconds, or e.g. 10m, 1h")
    t.add_argument("--measure-per-round", type=int, default=None, metavar="N",
                   help="candidates per round (default: 16 for gradient, 64 for evolutionary)")
    t.add_argument("--recheck", type=int, default=3, metavar="N",
                   help="times a new best is timed again beside the old best before it counts (default 3; 0: never)")
    t.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3), default=2, help="graph passes (default 2)")
    t.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                   help="the machine to tune for: cpu (this one) or cuda (the first GPU, which must be present)")
    t.add_argument("--no-algorithms", action="store_true",
                   help="tune only the kernels of the estimate's convolution algorithms, not the others' too")
    t.add_argument("--fusion-plans", action="store_true",
                   help="tune the kernels of the stitched fusion plan too; `compile --db --fusion stitch` then "
                        "keeps the faster plan")
    t.add_argument("--list-tasks", action="store_true",
                   help="list the tasks (FLOPs, weight, share of the untuned latency) and stop")
    t.add_argument("--report", metavar="DIR", default=None,
                   help="write a tuning report to DIR/index.html: best-so-far curves, a table of the tasks and a "
                        "roofline against this machine's measured peaks")
    t.add_argument("--ray", metavar="auto|ADDRESS", default=None,
                   help="build and time the candidates on a Ray cluster: auto (ray.init() on this machine) or the "
                        "address of a running cluster (HOST:6379 from a node of it, ray://HOST:10001 from "
                        "elsewhere); needs the ray extra")
    t.add_argument("--ray-key", metavar="KEY", default=None,
                   help="with --ray: time on the devices registered under KEY (`tilegrad ray-device`; default: "
                        "this machine's key, e.g. amd-epyc-7b13-avx2)")
    t.set_defaults(command=_tune)

    d = sub.add_parser("ray-device", parents=[common], help="register this machine's cores as tuning devices",
                       description="Register devices on this node of a Ray cluster under a key, for "
                                   "`tilegrad tune --ray ADDRESS --ray-key KEY`; they stay after this command "
                                   "ends. docs/tuning.md, \"Tuning on a cluster\".")
    d.add_argument("--address", default="auto", metavar="auto|ADDRESS",
                   help="the cluster (default auto: the one running on this machine, started with `ray start`)")
    d.add_argument("--key", default=None, metavar="KEY",
                   help="the key to register under (default: this machine's CPU model and ISA)")
    d.add_argument("--cores", action="append", default=[], metavar="LIST",
                   help="the cores of one device, e.g. 0-7 or 0,2,4 (repeatable, a device each; default: one device "
                        "of all cores)")
    d.add_argument("--list", action="store_true", help="list the keys registered on the cluster and stop")
    d.set_defaults(command=_ray_device)

    i = sub.add_parser("info", parents=[common, shapes], help="inputs, outputs, ops, FLOPs and unsupported ops",
                       description="Describe an ONNX model: its inputs and outputs, op histogram, FLOPs estimate "
                                   "and the ops tilegrad does not support; with --machine, this machine's measured "
                                   "FMA peak and memory bandwidth.")
    i.add_argument("model", nargs="?", help="the .onnx file (optional with --machine)")
    i.add_argument("--machine", action="store_true",
                   help="this machine's CPU, ISA, threads, measured FMA peak and memory bandwidth (measured once, "
                        "then cached)")
    i.add_argument("--remeasure", action="store_true", help="with --machine: measure again, overwriting the cache")
    i.set_defaults(command=_info)

    f = sub.add_parser("profile", parents=[common, shapes, passes], help="time each kernel of the compiled model",
                       description="Time each kernel of the compiled model (or of a saved module directory) on "
                                   "random inputs: time, share, GFLOP/s and GB/s against this machine's measured "
                                   "FMA peak and bandwidth (`tilegrad info --machine`).")
    f.add_argument("model", help="a module directory saved by `tilegrad compile`, an .onnx file or a PyTorch "
                                 "file.py:factory")
    f.add_argument("--repeats", type=int, default=20, metavar="N", help="profiled runs, medians kept (default 20)")
    f.add_argument("--top", type=int, default=None, metavar="N", help="show only the N slowest kernels and labels")
    f.add_argument("--json", action="store_true", help="print the profile as JSON instead of the table")
    f.set_defaults(command=_profile)

    q = sub.add_parser("quantize", parents=[common], help="quantize an ONNX model to int8 (QDQ ONNX or a module)",
                       description="Quantize an ONNX model to int8 after training: weights per channel, activations "
                                   "calibrated on sample inputs. docs/quantization.md has the details.")
    q.add_argument("model", help="an .onnx file")
    q.add_argument("--calibration", metavar="DIR",
                   help="calibration batches, one file each: .npy (the one input) or .npz (arrays named by input); "
                        "needed unless --weight-only")
    q.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="out.onnx: write the QDQ ONNX model; a directory: save the compiled module")
    q.add_argument("--method", default="kl", choices=("max_min", "remove_outlier", "kl", "symmetric_kl", "js"),
                   help="how activation ranges are chosen (default kl)")
    q.add_argument("--per-tensor", dest="per_channel", action="store_false",
                   help="one scale per weight tensor (default: --per-channel, one per output channel)")
    q.add_argument("--per-channel", dest="per_channel", action="store_true", help=argparse.SUPPRESS)
    q.add_argument("--weight-only", action="store_true", help="quantize weights only; activations stay float32")
    q.add_argument("--report", action="store_true", help="print each quantized tensor's SQNR against float32")
    q.set_defaults(command=_quantize)
    return p


# ---- quantize ----

def _quantize(args) -> None:
    from .quant import quantize

    if args.calibration is None and not args.weight_only:
        raise UsageError("quantize needs --calibration DIR (sample inputs), or --weight-only")
    q = quantize(args.model, args.calibration, args.method, weight_only=args.weight_only,
                 per_channel=args.per_channel)
    out = q.save(args.output)
    kind = "QDQ ONNX model" if str(args.output).endswith(".onnx") else "int8 module"
    print(f"quantized {args.model} ({args.method}{', weights only' if args.weight_only else ''}) -> {kind} {out}")
    if args.report:
        print(q.report.table())


# ---- tune ----

def _tune(args) -> None:
    from .tune.model import model_tasks, tune

    if args.target == "cuda":  # before loading the model: without a device there is nothing to time on
        from .tune.measure.cuda import require_device

        require_device()
    spec = _load(args.model, args.input_shape)
    if args.list_tasks:
        _list_tasks(model_tasks(spec.model, input_shapes=spec.input_shapes, example_inputs=spec.example_inputs,
                                opt_level=args.opt_level, algorithms=not args.no_algorithms,
                                fusion_plans=args.fusion_plans))
        return
    budget = _duration(args.budget) if args.budget else None
    if not args.db:
        raise UsageError("tune needs --db FILE, the records database to write")
    if args.trials is None and budget is None:
        raise UsageError("give --trials N or --budget TIME (or both)")
    if args.ray_key and not args.ray:
        raise UsageError("--ray-key needs --ray auto|ADDRESS")
    if args.ray and args.target == "cuda":
        raise UsageError("--ray measures on CPU devices; --target cuda times on this machine's GPU")
    callbacks = []
    if args.report:
        from .tune.report import WriteReport

        callbacks.append(WriteReport(args.report, _machine_peaks(), model=args.model))
    measurer = _ray_cluster().ray_measurer(args.ray, args.ray_key) if args.ray else None
    try:
        result = tune(spec.model, db=args.db, input_shapes=spec.input_shapes, example_inputs=spec.example_inputs,
                      opt_level=args.opt_level, policy=args.policy, algorithms=not args.no_algorithms,
                      callbacks=callbacks, fusion_plans=args.fusion_plans, trials=args.trials, budget=budget,
                      measure_per_round=args.measure_per_round, recheck=args.recheck, measurer=measurer,
                      target=args.target)
    finally:
        if measurer is not None:
            measurer.close()
    print(result.table())
    print(f"records in {result.db}; compile with: tilegrad compile {args.model} --db {result.db} -o DIR")
    if args.report:
        print(f"report in {Path(args.report) / 'index.html'}")


def _ray_cluster():
    """`tune.measure.ray_cluster`, or a usage error saying how to install Ray."""
    try:
        from .tune.measure import ray_cluster
    except ImportError as exc:
        raise UsageError(f"--ray and ray-device need Ray ({exc}): pip install 'tilegrad[ray]'") from None
    return ray_cluster


def _ray_device(args) -> None:
    cluster = _ray_cluster()
    try:
        cluster.connect(args.address, start=False)  # a cluster started here would end with this command
    except ConnectionError as exc:
        raise UsageError(f"no Ray cluster at {args.address} ({exc}); start one with `ray start --head`") from None
    if args.list:
        for key in cluster.keys():
            print(f"{key}: {len(cluster.devices(key))} devices")
        return
    key = args.key or cluster.default_key()
    for cores in args.cores or [None]:
        device = cluster.register_device(key, _cores(cores) if cores else None)
        about = cluster.describe(device)
        print(f"device {key} on {about['host']}, cores {_core_ranges(about['cores'])}")
    print(f"tune on them with: tilegrad tune MODEL --db FILE --ray {args.address} --ray-key {key} --trials N")


def _cores(text: str) -> list[int]:
    """"0-3,8" -> [0, 1, 2, 3, 8]."""
    cores = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cores += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise UsageError(f"--cores {text!r}: expected core numbers and ranges, e.g. 0-7 or 0,2,4") from None
    return cores


def _core_ranges(cores: Sequence[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8"."""
    runs: list[list[int]] = []
    for c in cores:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def _machine_peaks():
    """This machine's FMA peak and memory bandwidth, which the report's roofline is drawn against."""
    from .machine import measured_peaks

    return measured_peaks()


def _list_tasks(tasks) -> None:
    """Each task with its FLOPs, weight and share of the untuned latency (its default schedule, measured); the
    other convolution algorithms' tasks after, their share that of the kernels they would stand in for."""
    from .tune.measure import MeasureInput, Measurer

    with Measurer() as measurer:
        results = measurer.measure([MeasureInput(t, t.default_trace()) for t in tasks])
    total = sum(t.weight * r.latency for t, r in zip(tasks, results) if r.valid and not t.algorithm) or 1.0
    default = [t for t in tasks if not t.algorithm]
    print(f"{len(default)} tasks, {sum(t.weight for t in default)} kernels; {len(tasks) - len(default)} tasks of "
          f"other convolution algorithms and layout blocks")
    print(f"{'#':>3} {'task':<48} {'algorithm':>9} {'weight':>6} {'MFLOP':>9} {'untuned':>10} {'share':>6}")
    for i, (t, r) in enumerate(zip(tasks, results)):
        share = t.weight * r.latency / total if r.valid else float("nan")
        print(f"{i:>3} {t.name[:48]:<48} {t.algorithm or '':>9} {t.weight:>6} {t.flops / 1e6:>9.1f} "
              f"{_seconds(r.latency):>10} {share:>6.1%}")


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except (ValueError, IndexError):
        raise UsageError(f"--budget {text!r}: expected seconds or a number with s, m or h (e.g. 10m)") from None


# ---- compile ----

def _compile(args) -> None:
    if args.target == "cuda":
        _compile_cuda(args)
        return
    _, mod, elapsed = _compile_model(args, dynamic=True)
    try:
        out = mod.save(args.output)
    except OSError as exc:
        raise UsageError(f"cannot save the module to {args.output}: {exc.strerror or exc}") from None
    if not hasattr(mod, "spec"):  # a SpecializingModule: nothing compiled yet
        print(f"saved {args.model} to {out}; it compiles on each call with new input shapes or values")
        print("  inputs     " + ", ".join(_declared_input(i) for i in mod.inputs))
        print("  outputs    " + ", ".join(mod.output_names))
        return
    spec = mod.spec
    print(f"compiled {args.model} in {elapsed:.2f} s -> {out}")
    _print_buffers("inputs", spec.inputs)
    _print_buffers("outputs", spec.outputs)
    print(f"  weights    {len(spec.weights)} ({_bytes(sum(s.nbytes for s in spec.weights))})")
    saved = 1 - spec.workspace_bytes / spec.unshared_bytes if spec.unshared_bytes else 0.0
    print(f"  workspace  {_bytes(spec.workspace_bytes)} (without reuse {_bytes(spec.unshared_bytes)}, "
          f"{saved:.0%} saved)")


def _compile_cuda(args) -> None:
    """The model's CUDA source and PTX (NVRTC, no GPU needed) into the output directory."""
    from . import api

    spec = _load(args.model, args.input_shape, dynamic=False)
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


def _print_buffers(title: str, specs) -> None:
    print(f"  {title:<10} {len(specs)}: " + ", ".join(f"{s.name} {_type(s.shape, s.dtype)}" for s in specs))


def _compile_model(args, dynamic: bool = False):
    """(ModelSpec, Module, seconds) for `args.model`, under the pass flags; with --explain, say what the passes
    did before the command's own report. With `dynamic`, an ONNX model whose inputs leave shapes open (symbolic
    dimensions, value inputs) gives a SpecializingModule, which compiles when called."""
    from . import api
    from .frontend.onnx_inputs import is_dynamic, model_inputs

    opt_level = 2 if args.opt_level is None else args.opt_level
    _check_pass_names(args.disable_pass)
    spec = _load(args.model, args.input_shape, dynamic=dynamic)
    t0 = time.perf_counter()
    if dynamic and spec.kind == "onnx" and is_dynamic(model_inputs(spec.model, spec.input_shapes)):
        if args.explain:
            raise UsageError("--explain reports one compiled shape, but the model's inputs leave shapes open: "
                             + "; ".join(_declared_input(i) for i in model_inputs(spec.model, spec.input_shapes)
                                         if i.symbolic or i.value_needed) + "; fix them with --input-shape")
        mod = api.compile(spec.model, input_shapes=spec.input_shapes, opt_level=opt_level,
                          disable_passes=args.disable_pass, db=getattr(args, "db", None),
                          target=getattr(args, "target", "cpu"), fusion=args.fusion)
        return spec, mod, time.perf_counter() - t0
    compilation = api.compile_with_report(spec.model, spec.example_inputs, input_shapes=spec.input_shapes,
                                          opt_level=opt_level, disable_passes=args.disable_pass,
                                          db=getattr(args, "db", None), target=getattr(args, "target", "cpu"),
                                          fusion=args.fusion)
    elapsed = time.perf_counter() - t0
    if args.explain:
        _explain(compilation, opt_level)
    return spec, compilation.module, elapsed


def _check_pass_names(names: Sequence[str]) -> None:
    from .passes import pass_names

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
    print(f"intermediates: {_bytes(spec.workspace_bytes)} planned with reuse ({_bytes(spec.unshared_bytes)} without)")


# ---- run ----

def _run(args) -> None:
    source = Path(args.model)
    if source.is_dir():
        mod = _load_saved(args, source)
    else:
        _, mod, _ = _compile_model(args, dynamic=True)
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
        print(f"{name}: {_type(y.shape, str(y.dtype))}  {_statistics(y)}")


def _load_saved(args, source: Path):
    """The module saved in directory `source`, refusing the flags that apply only to compiling."""
    from . import api

    if args.input_shape:
        raise UsageError(f"--input-shape applies only when compiling an .onnx file; the module in {source} "
                         f"was compiled for fixed shapes")
    if args.explain or args.opt_level is not None or args.disable_pass:
        raise UsageError(f"--explain, --opt-level and --disable-pass apply only when compiling an .onnx file; "
                         f"the module in {source} is already compiled")
    return api.load(source)


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
        wanted = ", ".join(f"{s.name} {_type(s.shape, s.dtype)}" for s in missing)
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
            raise UsageError(f"input {s.name!r}: expected {_type(s.shape, s.dtype)}, got "
                             f"{_type(a.shape, str(a.dtype))} from {path}")
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


# ---- bench ----

def _bench(args) -> None:
    peers = [p.strip() for p in args.against.split(",") if p.strip()]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise UsageError(f"--against {args.against!r}: unknown runtime(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(PEERS)}")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    spec, mod, compile_s = _compile_model(args)
    print(f"{args.model}: " + ", ".join(f"{s.name} {_type(s.shape, s.dtype)}" for s in mod.spec.inputs)
          + f"; compiled in {compile_s:.2f} s; median of {args.repeats} repeats")
    ours = mod.benchmark(repeats=args.repeats)
    rows = [("tilegrad", ours, "")]
    for peer in peers:
        if peer == "onnxruntime":
            rows.append(("onnxruntime", *(_time_onnxruntime(spec.model, mod.spec.inputs, args.repeats)
                                          if spec.kind == "onnx" else (None, ONNXRUNTIME_SKIPPED))))
        else:
            rows.append(("torch", *(_time_torch(spec.model, mod.spec.inputs, args.repeats) if spec.kind == "torch"
                                    else (None, TORCH_SKIPPED))))
    print(f"{'runtime':<12} {'median':>11}  {'tilegrad speed-up':>17}")
    for name, seconds, note in rows:
        if seconds is None:
            print(f"{name:<12} {'-':>11}  {'-':>17}  {note}")
        else:
            print(f"{name:<12} {_seconds(seconds):>11}  {seconds / ours:>16.2f}x")


def _time_onnxruntime(proto, specs, repeats: int, min_repeat_s: float = 0.05) -> tuple[float | None, str]:
    """ONNX Runtime's median seconds per run on the inputs Module.benchmark uses; (None, why) if it cannot run."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "unavailable: onnxruntime is not installed (pip install onnxruntime)"
    try:
        session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001  (a peer failing is a row of the report, not an error of ours)
        return None, "failed: " + " ".join(str(exc).split())[:200]
    feeds = _benchmark_inputs(specs)
    return _median_seconds(lambda: session.run(None, feeds), repeats, min_repeat_s), ""


def _time_torch(module, specs, repeats: int, min_repeat_s: float = 0.05) -> tuple[float | None, str]:
    """PyTorch eager's median seconds per run of `module` on the inputs Module.benchmark uses."""
    import torch

    args = [torch.from_numpy(a) for a in _benchmark_inputs(specs).values()]
    with torch.no_grad():
        return _median_seconds(lambda: module(*args), repeats, min_repeat_s), ""


def _benchmark_inputs(specs) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)  # the same seed and order as Module.benchmark
    return {s.name: rng.standard_normal(s.shape).astype(s.dtype) if s.dtype.startswith("float")
            else np.zeros(s.shape, s.dtype) for s in specs}


def _median_seconds(run, repeats: int, min_repeat_s: float) -> float:
    """Median seconds per call of `run` over `repeats` repeats, each long enough to time (at least
    `min_repeat_s`), after a warm-up call."""
    run()
    number = 1
    while True:  # calibrate: calls per repeat so that a repeat lasts at least min_repeat_s
        t0 = time.perf_counter()
        for _ in range(number):
            run()
        elapsed = time.perf_counter() - t0
        if elapsed >= min_repeat_s or number >= 1 << 20:
            break
        number *= 2 if elapsed <= 0 else max(2, min(10, math.ceil(min_repeat_s / elapsed)))
    costs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            run()
        costs.append((time.perf_counter() - t0) / number)
    return statistics.median(costs)


# ---- profile ----

def _profile(args) -> None:
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.top is not None and args.top < 1:
        raise UsageError(f"--top must be at least 1, got {args.top}")
    source = Path(args.model)
    mod = _load_saved(args, source) if source.is_dir() else _compile_model(args)[1]
    if not hasattr(mod, "spec"):
        raise UsageError(f"the module in {source} compiles per call (its input shapes are open); profile its .onnx "
                         f"file with --input-shape for each symbolic input")
    profile = mod.profile(**_benchmark_inputs(mod.spec.inputs), repeats=args.repeats)
    if args.json:
        print(json.dumps({"model": args.model, **profile.to_json()}, indent=1))
        return
    print(f"{args.model}: " + ", ".join(f"{s.name} {_type(s.shape, s.dtype)}" for s in mod.spec.inputs)
          + f"; {len(profile.sites)} kernels; median of {args.repeats} runs")
    print(profile.table(args.top))


# ---- info ----

def _info(args) -> None:
    if args.machine or args.remeasure:
        _print_machine(args.remeasure)
        if args.model is None:
            return
        print()
    elif args.model is None:
        raise UsageError("info needs a model (.onnx file), or --machine for this machine's peaks")
    from .frontend import onnx_ops  # noqa: F401  (fills ONNX_OPS)
    from .frontend.onnx import ONNX_OPS, load_model, op_key, read_onnx

    proto = load_model(_model_path(args.model))
    shapes = _input_shapes(args.input_shape)
    _check_shape_names(proto, shapes)
    g = proto.graph
    initializers = {t.name for t in g.initializer}
    symbolic = _symbolic_inputs(proto, shapes)
    graph, problems = read_onnx(proto, input_shapes=shapes) if symbolic is None else (None, [])
    opset = next((i.version for i in proto.opset_import if i.domain in ("", "ai.onnx")), None)
    params = sum(math.prod(t.dims) for t in g.initializer)
    print(f"{args.model}: opset {opset}, {len(g.node)} nodes, {params:,} parameters in {len(initializers)} "
          f"initializers")
    if graph is not None:
        print("inputs:  " + ", ".join(f"{v.name} {_type(v.shape, v.dtype)}" for v in graph.inputs))
        print("outputs: " + ", ".join(f"{v.name} {_type(v.shape, v.dtype)}" for v in graph.outputs))
    else:
        print("inputs:  " + ", ".join(_declared(vi) for vi in g.input if vi.name not in initializers))
        print("outputs: " + ", ".join(_declared(vi) for vi in g.output))
    if symbolic is not None:
        print(f"symbolic: {symbolic}")
    values = [i for i in _analysed_inputs(proto, shapes) if i.value_needed]
    if values:
        print("value inputs (each distinct value compiles once): "
              + "; ".join(f"{_declared_input(i)} reaches {', '.join(i.shape_uses)}" for i in values))
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


def _print_machine(remeasure: bool) -> None:
    """This machine's peaks, measured now (the first time, or with --remeasure) or read from the cache."""
    from .machine import cache_path, measured_peaks

    path = cache_path()
    fresh = remeasure or not path.is_file()
    peaks = measured_peaks(remeasure=remeasure)
    print(f"machine:   {peaks.cpu}")
    print(f"  isa        {peaks.isa}")
    print(f"  threads    {peaks.threads}")
    print(f"  FMA peak   {peaks.fma_gflops:.1f} GFLOP/s (float32, all threads)")
    print(f"  bandwidth  {peaks.bandwidth_gbs:.1f} GB/s (triad, bytes read + written)")
    print(f"  cache      {path} ({'measured now' if fresh else 'cached; --remeasure measures again'})")


def _print_flops(graph) -> None:
    from .ir.compute import node_flops

    by_op = collections.Counter()
    try:
        for node in graph.nodes:
            by_op[node.op] += node_flops(node)
    except TilegradError as exc:  # an op the registry has no compute for at these shapes
        print(f"FLOPs:   unavailable: {' '.join(str(exc).split())}")
        return
    total = sum(by_op.values())
    detail = ", ".join(f"{op} {_count(f)}" for op, f in by_op.most_common() if f)
    print(f"FLOPs:   {total:,} ({_count(total)}; a multiply-add counts two" + (f": {detail})" if detail else ")"))


def _analysed_inputs(proto, shapes) -> tuple:
    """The model's inputs with their value uses; none when they do not read (the import reports why)."""
    from .frontend.onnx_inputs import model_inputs

    try:
        return model_inputs(proto, shapes)
    except TilegradError:
        return ()


def _declared_input(i) -> str:
    """`x float32[N, 3]` of an analysed input, with `(value input)` when its value is compiled in."""
    return i.describe() + (" (value input)" if i.value_needed else "")


def _op_label(node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _declared(vi) -> str:
    """`name float32[N, 3, 224, 224]` from an ONNX ValueInfo, symbolic dimensions by their names."""
    from onnx import helper

    tt = vi.type.tensor_type
    try:
        dtype = str(helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except (KeyError, ValueError):
        dtype = "?"
    if not tt.HasField("shape"):
        return f"{vi.name} {dtype}[?]"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return f"{vi.name} {dtype}[{', '.join(dims)}]"


# ---- shared parsing and formatting ----

def _load(model: str, shape_items: Sequence[str], dynamic: bool = False):
    """The ModelSpec of `model` (an ONNX file or a PyTorch `file.py:factory`) under the `--input-shape` items,
    checked to make every input's shape static (unless `dynamic`: compile and run specialise on each call)."""
    from .frontend.model_spec import ModelSpec, is_torch_spec, load_model_spec
    from .frontend.onnx import load_model

    shapes = _input_shapes(shape_items)
    if is_torch_spec(model):
        return load_model_spec(model, shapes)
    proto = load_model(_model_path(model))
    _check_shape_names(proto, shapes)
    problem = None if dynamic else _symbolic_inputs(proto, shapes)
    if problem:
        raise UsageError(problem)
    return ModelSpec("onnx", proto, None, shapes)


def _graph_inputs(proto) -> list:
    initializers = {t.name for t in proto.graph.initializer}
    return [vi for vi in proto.graph.input if vi.name not in initializers]


def _check_shape_names(proto, shapes) -> None:
    names = [vi.name for vi in _graph_inputs(proto)]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise UsageError(f"--input-shape names {', '.join(map(repr, unknown))}, which the model does not take as "
                         f"input; its inputs are {', '.join(names)}")


def _symbolic_inputs(proto, shapes) -> str | None:
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
        problems.append(f"input {_declared(vi)} has symbolic dimensions ({which}); fix them with "
                        f"--input-shape {vi.name}={example}")
    return "; ".join(problems) or None


def _model_path(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{path} is a directory; this command takes an .onnx file")
    if not path.is_file():
        raise UsageError(f"no ONNX file at {path}")
    return path


def _input_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
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


def _type(shape, dtype: str) -> str:
    return f"{dtype}[{'?' if shape is None else ', '.join(map(str, shape))}]"


def _bytes(n: int) -> str:
    size, unit = float(n), 0
    while size >= 1024 and unit < 3:
        size, unit = size / 1024, unit + 1
    return f"{n} B" if unit == 0 else f"{size:.1f} {('KiB', 'MiB', 'GiB')[unit - 1]}"


def _seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.1f} us"


def _count(n: float) -> str:
    size, unit = float(n), 0
    while abs(size) >= 1000 and unit < 4:
        size, unit = size / 1000, unit + 1
    return f"{n:.0f}" if unit == 0 else f"{size:.3g} {'KMGT'[unit - 1]}"
