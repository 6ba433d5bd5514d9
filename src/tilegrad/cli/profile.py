"""`tilegrad profile`: each kernel of a compiled model timed, against this machine's peaks."""

from __future__ import annotations

import json
from pathlib import Path

from ..runtime.module import benchmark_inputs
from .common import UsageError, saved_or_compiled, typed


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    f = sub.add_parser("profile", parents=[parents.common, parents.shapes, parents.passes],
                       help="time each kernel of the compiled model",
                       description="Time each kernel of the compiled model (or of a saved module directory) on "
                                   "random inputs: time, share, GFLOP/s and GB/s against this machine's measured "
                                   "FMA peak and bandwidth (`tilegrad info --machine`).")
    f.add_argument("model", help="a module directory saved by `tilegrad compile`, an .onnx file or a PyTorch "
                                 "file.py:factory")
    f.add_argument("--repeats", type=int, default=20, metavar="N", help="profiled runs, medians kept (default 20)")
    f.add_argument("--top", type=int, default=None, metavar="N", help="show only the N slowest kernels and labels")
    f.add_argument("--json", action="store_true", help="print the profile as JSON instead of the table")
    f.set_defaults(command=_profile)


def _profile(args) -> None:
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.top is not None and args.top < 1:
        raise UsageError(f"--top must be at least 1, got {args.top}")
    source = Path(args.model)
    mod = saved_or_compiled(args)
    if not hasattr(mod, "spec"):
        raise UsageError(f"the module in {source} compiles per call (its input shapes are open); profile its .onnx "
                         f"file with --input-shape for each symbolic input")
    profile = mod.profile(**benchmark_inputs(mod.spec.inputs), repeats=args.repeats)
    if args.json:
        print(json.dumps({"model": args.model, **profile.to_json()}, indent=1))
        return
    print(f"{args.model}: " + ", ".join(f"{s.name} {typed(s.shape, s.dtype)}" for s in mod.spec.inputs)
          + f"; {len(profile.sites)} kernels; median of {args.repeats} runs")
    print(profile.table(args.top))
