"""int8 against float32: tilegrad's quantized models (tilegrad.quantize) against tilegrad float32 and against ONNX
Runtime running its own quantize_static result (QDQ, per-channel int8 weights, uint8 activations) calibrated on
the same data. The models are benchmarks/models.py's (random weights, no downloads); calibration and evaluation
inputs are random of the inputs' distribution (standard normal images, uniform token ids), which is enough for
latency; the metrics are agreement with float32 on held-out inputs: the mean cosine similarity of the outputs.
Run:

    python benchmarks/quant.py                       # table
    python benchmarks/quant.py --json                # [{"model", "method", "fp32_ms", "int8_ms", "ort_int8_ms",
                                                     #   "fp32_metric", "int8_metric", "ort_int8_metric", "metric",
                                                     #   "isa"}]
    python benchmarks/quant.py --only resnet50 --method max_min
    python benchmarks/quant.py --image-size 64 --batches 2 --repeats 2    # a quick check that it works

"fp32_metric" is tilegrad float32's agreement with ONNX Runtime float32 (the reference), "int8_metric"
tilegrad int8's and "ort_int8_metric" ONNX Runtime int8's. Timings are medians of interleaved rounds, batch 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import IDLE_S, MODELS, _export
from timing import median_time

VISION = ("resnet50", "mobilenet_v2")
ORT_METHOD = {"max_min": "MinMax", "kl": "Entropy", "remove_outlier": "Percentile"}


def _model(name: str, image_size: int):
    module, args = MODELS[name]()
    if name in VISION:
        args = (torch.randn(1, 3, image_size, image_size),)
    return _export(module.eval(), args), args


def _inputs(name: str, args, n: int, seed: int) -> list[dict[str, np.ndarray]]:
    """`n` random batches shaped like `args`: images from a standard normal, token ids uniform over the vocabulary."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        feeds = {}
        for i, a in enumerate(args):
            if a.dtype == torch.int64:
                feeds[f"in{i}"] = rng.integers(0, 30522, a.shape, dtype=np.int64)
            else:
                feeds[f"in{i}"] = rng.standard_normal(a.shape, dtype=np.float32)
        out.append(feeds)
    return out


def _agreement(name: str, ours: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Mean cosine similarity of the outputs: with random weights a vision model's logits are nearly flat, so its
    top-1 class flips under any quantization (ONNX Runtime's int8 matches float32's top-1 on 0 of 32 MobileNetV2
    inputs) and says nothing about the error."""
    return float(np.mean([np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30)
                          for a, b in zip(ours, want)]))


def _ort_quantized(model: bytes, calibration: list[dict], method: str, directory: Path) -> Path:
    """ONNX Runtime's own quantize_static of `model` on `calibration`, in QDQ format like tilegrad's."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.calibrate import CalibrationMethod

    class Reader(CalibrationDataReader):
        def __init__(self):
            self._batches = iter(calibration)

        def get_next(self):
            return next(self._batches, None)

    source, target = directory / "fp32.onnx", directory / "ort_int8.onnx"
    source.write_bytes(model)
    with contextlib.redirect_stdout(sys.stderr):  # its progress lines would break --json
        quantize_static(str(source), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, ORT_METHOD.get(method, "MinMax")))
    return target


def _first(outputs):
    return outputs[0] if isinstance(outputs, list) else outputs


def measure(name: str, method: str, image_size: int, batches: int, evaluations: int, rounds: int,
            repeats: int, bias_correction: bool) -> dict:
    import onnxruntime as ort

    import tilegrad
    from tilegrad.target import host

    model, args = _model(name, image_size)
    calibration = _inputs(name, args, batches, seed=0)
    held_out = _inputs(name, args, evaluations, seed=1)
    fp32 = tilegrad.compile(model)
    int8 = tilegrad.quantize(model, calibration, method, bias_correction=bias_correction).module
    reference = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    with tempfile.TemporaryDirectory() as d:
        ort_int8 = ort.InferenceSession(str(_ort_quantized(model, calibration, method, Path(d))),
                                        providers=["CPUExecutionProvider"])
    want = [reference.run(None, f)[0] for f in held_out]
    metrics = {key: _agreement(name, [_first(run(f)) for f in held_out], want) for key, run in
               (("fp32", lambda f: fp32(**f)), ("int8", lambda f: int8(**f)),
                ("ort_int8", lambda f: ort_int8.run(None, f)))}
    feeds = held_out[0]
    times = {"fp32": [], "int8": [], "ort_int8": []}
    contenders = {"fp32": lambda: fp32(**feeds), "int8": lambda: int8(**feeds),
                  "ort_int8": lambda: ort_int8.run(None, feeds)}
    for _ in range(rounds):  # interleaved, so that a slower period of the machine falls on all three
        for key, call in contenders.items():
            time.sleep(IDLE_S)  # the last one's threads (ONNX Runtime's spin after a run) leave the cores first
            times[key].append(median_time(call, repeats))
    row = {"model": name, "method": method}
    row.update({f"{k}_ms": statistics.median(v) * 1e3 for k, v in times.items()})
    row.update({f"{k}_metric": v for k, v in metrics.items()})
    row.update({"metric": "cosine", "isa": host().isa})
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", choices=("resnet50", "mobilenet_v2", "bert_base"),
                   help="benchmark only this model (repeatable)")
    p.add_argument("--method", default="kl", choices=("max_min", "remove_outlier", "kl", "symmetric_kl", "js"))
    p.add_argument("--image-size", type=int, default=224, help="the vision models' input size (default 224)")
    p.add_argument("--batches", type=int, default=16, help="calibration batches (default 16)")
    p.add_argument("--evaluations", type=int, default=32, help="held-out inputs for the metrics (default 32)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--no-bias-correction", dest="bias_correction", action="store_false",
                   help="quantize without bias correction (ONNX Runtime's quantize_static has none)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    for name in args.only or ("resnet50", "mobilenet_v2", "bert_base"):
        start = time.perf_counter()
        rows.append(measure(name, args.method, args.image_size, args.batches, args.evaluations, args.rounds,
                            args.repeats, args.bias_correction))
        # each row as it is done, so that a long run that is stopped still leaves its figures
        print(f"{name}: {time.perf_counter() - start:.0f} s {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    keys = ("model", "method", "fp32_ms", "int8_ms", "ort_int8_ms", "fp32_metric", "int8_metric", "ort_int8_metric")
    print("  ".join(f"{k:>15}" for k in keys))
    for r in rows:
        print("  ".join(f"{r[k]:>15.3f}" if isinstance(r[k], float) else f"{r[k]:>15}" for k in keys))
    print(f"isa: {rows[0]['isa']}; metric: cosine similarity of the outputs to ONNX Runtime float32's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
