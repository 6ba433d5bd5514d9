"""`tilegrad bench`: the compiled model's latency beside ONNX Runtime's and PyTorch's, timed in interleaved rounds.

On a shared machine consecutive runs of one model move by 15% or more, so the contenders are timed by turns: each
round times each of them once (after a pause that lets the previous runtime's threads go idle, a warm-up call,
then the median of ROUND_REPEATS repeats of back-to-back calls), its order rotated; the figure is the median over
the rounds, beside the spread of the rounds (the 10th to 90th percentile, over the median), with a warning where
that spread says the figures are not to be trusted.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from ..peers import median_seconds, onnxruntime_peer
from ..runtime.module import benchmark_inputs
from ..frontend.model_spec import is_torch_spec
from .common import MODEL_HELP, UsageError, compile_model, load_saved, model_path, seconds_text, typed

PEERS = ("onnxruntime", "torch")
TORCH_SKIPPED = ("skipped: an ONNX file has no torch model to run "
                 "(converting one needs onnx2torch, which tilegrad does not depend on)")
ONNXRUNTIME_SKIPPED = "skipped: a PyTorch model has no ONNX file to run (export one with torch.onnx.export)"
SAVED_SKIPPED = "skipped: a saved module carries no model for other runtimes (bench its .onnx file to compare)"
PAUSE_S = 0.2  # between two contenders' timings
ROUND_REPEATS = 3  # a contender's figure in a round: the median of this many repeats of 50 ms or more, after a call
NOISY = 0.10  # a spread of the rounds above this share of the median is warned about


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    b = sub.add_parser("bench", parents=[parents.common, parents.shapes, parents.passes],
                       help="median latency, against other runtimes",
                       description="Latency of the compiled model on random inputs, beside other runtimes, timed "
                                   "in interleaved rounds: the median over the rounds and their spread.")
    b.add_argument("model", help="a module directory saved by `tilegrad compile`, " + MODEL_HELP.removeprefix("the "))
    b.add_argument("--against", default="", metavar="PEER[,PEER]",
                   help=f"runtimes to compare with, comma-separated: {', '.join(PEERS)}")
    b.add_argument("--repeats", type=int, default=10, metavar="N",
                   help="interleaved rounds, each timing every runtime once (default 10)")
    b.set_defaults(command=_bench)


def _bench(args) -> None:
    peers = [p.strip() for p in args.against.split(",") if p.strip()]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise UsageError(f"--against {args.against!r}: unknown runtime(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(PEERS)}")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if Path(args.model).is_dir():
        spec, mod = None, load_saved(args, Path(args.model))
        if not hasattr(mod, "spec"):
            raise UsageError(f"the module in {args.model} specialises on its inputs' shapes: bench one shape by "
                             f"compiling the model with --input-shape")
        made = "loaded"
    else:
        if not Path(args.model).exists() and not is_torch_spec(args.model):
            model_path(args.model, saved_too=True)  # says what bench takes
        spec, mod, compile_s = compile_model(args)
        made = f"compiled in {compile_s:.2f} s"
    print(f"{args.model}: " + ", ".join(f"{s.name} {typed(s.shape, s.dtype)}" for s in mod.spec.inputs)
          + f"; {made}; {args.repeats} interleaved rounds")
    contenders = {"tilegrad": lambda specs: (mod.benchmark(repeats=ROUND_REPEATS), "")}
    for peer in peers:
        if spec is None:
            contenders[peer] = lambda specs: (None, SAVED_SKIPPED)
        elif peer == "onnxruntime":
            contenders[peer] = (onnxruntime_peer(spec.model, repeats=ROUND_REPEATS) if spec.kind == "onnx"
                                else lambda specs: (None, ONNXRUNTIME_SKIPPED))
        else:
            contenders[peer] = ((lambda specs: _time_torch(spec.model, specs, ROUND_REPEATS)) if spec.kind == "torch"
                                else lambda specs: (None, TORCH_SKIPPED))
    times = _rounds(contenders, mod.spec.inputs, args.repeats)
    ours = statistics.median(times["tilegrad"][0])
    print(f"{'runtime':<12} {'median':>11}  {'spread':>7}  {'tilegrad speed-up':>17}")
    for name, (seconds, note) in times.items():
        if not seconds:
            print(f"{name:<12} {'-':>11}  {'-':>7}  {'-':>17}  {note}")
            continue
        median = statistics.median(seconds)
        print(f"{name:<12} {seconds_text(median):>11}  {spread(seconds):>6.1%}  {median / ours:>16.2f}x")
    noisy = [name for name, (seconds, _) in times.items() if seconds and spread(seconds) > NOISY]
    if noisy:
        print(f"warning: the rounds of {', '.join(noisy)} spread by more than {NOISY:.0%} of the median (a busy "
              f"machine?): compare these figures with care, or take more rounds (--repeats)", file=sys.stderr)


def _rounds(contenders: dict, specs, rounds: int) -> dict[str, tuple[list[float], str]]:
    """Each contender's seconds per call in each of `rounds` rounds (or none, with why it did not run), timed by
    turns: round k starts with contender k (mod their number), each after PAUSE_S."""
    names = list(contenders)
    times: dict[str, tuple[list[float], str]] = {name: ([], "") for name in names}
    failed: dict[str, str] = {}
    for k in range(rounds):
        for name in names[k % len(names):] + names[:k % len(names)]:
            if name in failed:
                continue
            time.sleep(PAUSE_S)
            seconds, why = contenders[name](specs)
            if seconds is None:
                failed[name] = why
            else:
                times[name][0].append(seconds)
    return {name: ([], failed[name]) if name in failed else times[name] for name in names}


def spread(seconds: list[float]) -> float:
    """The rounds' 10th to 90th percentile over their median (0 for a single round)."""
    if len(seconds) < 2:
        return 0.0
    deciles = statistics.quantiles(seconds, n=10, method="inclusive")
    return (deciles[-1] - deciles[0]) / statistics.median(seconds)


def _time_torch(module, specs, repeats: int, min_repeat_s: float = 0.05) -> tuple[float | None, str]:
    """PyTorch eager's median seconds per run of `module` on the inputs Module.benchmark uses."""
    import torch

    args = [torch.from_numpy(a) for a in benchmark_inputs(specs).values()]
    with torch.no_grad():
        return median_seconds(lambda: module(*args), repeats, min_repeat_s), ""
