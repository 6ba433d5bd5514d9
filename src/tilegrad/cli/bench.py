"""`tilegrad bench`: the compiled model's median latency beside ONNX Runtime's and PyTorch's."""

from __future__ import annotations

from ..peers import median_seconds, onnxruntime_peer
from ..runtime.module import benchmark_inputs
from .common import MODEL_HELP, UsageError, compile_model, seconds_text, typed

PEERS = ("onnxruntime", "torch")
TORCH_SKIPPED = ("skipped: an ONNX file has no torch model to run "
                 "(converting one needs onnx2torch, which tilegrad does not depend on)")
ONNXRUNTIME_SKIPPED = "skipped: a PyTorch model has no ONNX file to run (export one with torch.onnx.export)"


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    b = sub.add_parser("bench", parents=[parents.common, parents.shapes, parents.passes],
                       help="median latency, against other runtimes",
                       description="Median latency of the compiled model on random inputs, beside other runtimes.")
    b.add_argument("model", help=MODEL_HELP)
    b.add_argument("--against", default="", metavar="PEER[,PEER]",
                   help=f"runtimes to compare with, comma-separated: {', '.join(PEERS)}")
    b.add_argument("--repeats", type=int, default=10, metavar="N", help="timed repeats (default 10)")
    b.set_defaults(command=_bench)


def _bench(args) -> None:
    peers = [p.strip() for p in args.against.split(",") if p.strip()]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise UsageError(f"--against {args.against!r}: unknown runtime(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(PEERS)}")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    spec, mod, compile_s = compile_model(args)
    print(f"{args.model}: " + ", ".join(f"{s.name} {typed(s.shape, s.dtype)}" for s in mod.spec.inputs)
          + f"; compiled in {compile_s:.2f} s; median of {args.repeats} repeats")
    ours = mod.benchmark(repeats=args.repeats)
    rows = [("tilegrad", ours, "")]
    for peer in peers:
        if peer == "onnxruntime":
            rows.append(("onnxruntime", *(onnxruntime_peer(spec.model, args.repeats)(mod.spec.inputs)
                                          if spec.kind == "onnx" else (None, ONNXRUNTIME_SKIPPED))))
        else:
            rows.append(("torch", *(_time_torch(spec.model, mod.spec.inputs, args.repeats) if spec.kind == "torch"
                                    else (None, TORCH_SKIPPED))))
    print(f"{'runtime':<12} {'median':>11}  {'tilegrad speed-up':>17}")
    for name, seconds, note in rows:
        if seconds is None:
            print(f"{name:<12} {'-':>11}  {'-':>17}  {note}")
        else:
            print(f"{name:<12} {seconds_text(seconds):>11}  {seconds / ours:>16.2f}x")


def _time_torch(module, specs, repeats: int, min_repeat_s: float = 0.05) -> tuple[float | None, str]:
    """PyTorch eager's median seconds per run of `module` on the inputs Module.benchmark uses."""
    import torch

    args = [torch.from_numpy(a) for a in benchmark_inputs(specs).values()]
    with torch.no_grad():
        return median_seconds(lambda: module(*args), repeats, min_repeat_s), ""
