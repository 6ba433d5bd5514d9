"""`tilegrad quantize`: an ONNX model to int8 after training (a QDQ ONNX file or a compiled module)."""

from __future__ import annotations

import argparse

from .common import UsageError


def add_parser(sub, parents) -> None:
    """Its arguments, under `sub` (argparse subparsers)."""
    q = sub.add_parser("quantize", parents=[parents.common],
                       help="quantize an ONNX model to int8 (QDQ ONNX or a module)",
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


def _quantize(args) -> None:
    from ..quant import quantize

    if args.calibration is None and not args.weight_only:
        raise UsageError("quantize needs --calibration DIR (sample inputs), or --weight-only")
    q = quantize(args.model, args.calibration, args.method, weight_only=args.weight_only,
                 per_channel=args.per_channel)
    out = q.save(args.output)
    kind = "QDQ ONNX model" if str(args.output).endswith(".onnx") else "int8 module"
    print(f"quantized {args.model} ({args.method}{', weights only' if args.weight_only else ''}) -> {kind} {out}")
    if args.report:
        print(q.report.table())
