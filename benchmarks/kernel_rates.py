"""The kernels that take the time in real models, one node each, tilegrad against ONNX Runtime as a model call
sees them: the working instrument of the kernels issue (docs/benchmarks.md keeps its current table).

Every case is a one-node ONNX model with constant weights (the shapes of ResNet-50, MobileNetV2, MNASNet,
EfficientNet-B7, ResNeXt-50, DeepLabV3, Whisper, DCGAN, BERT, ViT and GPT-2 decoding, and the int8 forms of their
products). Both runtimes compile it untuned and run it in interleaved rounds: each round flushes the caches (a
write over twice the last-level cache, so weights and activations start in memory, as in a model call where the
other layers' data passed through the caches in between) before each runtime's call, and the figure is the median
call. Neither runtime's threads spin between calls (OMP_WAIT_POLICY=passive, ONNX Runtime's allow_spinning 0), so
one does not take the cores from the other.

A row's rate is read against this machine's measured peaks (`tilegrad.machine.measured_peaks`): a
compute-bound kernel (more FLOPs per compulsory byte than the FMA peak over the bandwidth) against the FMA peak, a
memory-bound one against the bandwidth. FLOPs are the direct method's (2 per multiply-add), also for a
convolution tilegrad runs by Winograd; int8 rows count 2 operations per multiply-add. Run:

    python benchmarks/kernel_rates.py                 # the table
    python benchmarks/kernel_rates.py --json          # one JSON document: {"machine": {...}, "rows": [...]}
    python benchmarks/kernel_rates.py --only conv3x3,gemm --rounds 21 --warm
    python benchmarks/kernel_rates.py --warm --burst 5   # threads kept awake: the kernel, not the wake-up
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # read when the first kernel loads libgomp

import tilegrad  # noqa: E402  (after the wait policy)
from tilegrad.machine import measured_peaks  # noqa: E402
from tilegrad.target import host  # noqa: E402

F32, U8, I8 = TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8
RNG = np.random.default_rng(0)


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel: its kind (the issue's classes), a name saying where it comes from, the one-node model, its
    input, its work (2 per multiply-add) and its compulsory bytes (input, weights and output, each once)."""

    kind: str
    name: str
    model: onnx.ModelProto
    x: np.ndarray
    flops: int
    bytes: int


def _model(nodes, x_info, y_info, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "kernel", [x_info], [y_info], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _weights(*shape) -> np.ndarray:
    fan_in = int(np.prod(shape[1:])) or 1
    return (RNG.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def conv(kind: str, name: str, c: int, o: int, size, k, *, stride=1, group=1, dilation=1, batch=1) -> Case:
    """A convolution (1-D when `size` is an int and `k` a 1-tuple, else square), padded to keep the size at
    stride 1, with a bias."""
    dims = 1 if isinstance(k, tuple) and len(k) == 1 else 2
    k = k[0] if isinstance(k, tuple) else k
    pad = dilation * (k - 1) // 2
    in_shape = [batch, c] + [size] * dims
    out = (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    out_shape = [batch, o] + [out] * dims
    w, b = _weights(o, c // group, *[k] * dims), _weights(o)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[stride] * dims, pads=[pad] * 2 * dims,
                            group=group, dilations=[dilation] * dims, kernel_shape=[k] * dims)
    model = _model([node], helper.make_tensor_value_info("x", F32, in_shape),
                   helper.make_tensor_value_info("y", F32, out_shape),
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    x = RNG.standard_normal(in_shape).astype(np.float32)
    flops = 2 * int(np.prod(out_shape)) * (c // group) * k ** dims
    return Case(kind, name, model, x, flops, 4 * (x.size + w.size + int(np.prod(out_shape))))


def conv_transpose(name: str, c: int, o: int, size: int, k: int = 4, stride: int = 2, pad: int = 1) -> Case:
    """DCGAN's generator layer: a transposed convolution doubling the size."""
    out = (size - 1) * stride - 2 * pad + k
    w = _weights(c, o, k, k)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[stride, stride], pads=[pad] * 4,
                            kernel_shape=[k, k])
    model = _model([node], helper.make_tensor_value_info("x", F32, [1, c, size, size]),
                   helper.make_tensor_value_info("y", F32, [1, o, out, out]), [numpy_helper.from_array(w, "w")])
    x = RNG.standard_normal((1, c, size, size)).astype(np.float32)
    return Case("transposed", name, model, x, 2 * c * o * k * k * size * size, 4 * (x.size + w.size + o * out * out))


def gemm(kind: str, name: str, m: int, k: int, n: int, batch: tuple = ()) -> Case:
    """A MatMul of an activation (batch..., m, k) by a constant (k, n) weight, with a bias added (as Gemm and the
    transformer's linear layers run)."""
    w, b = _weights(k, n), _weights(n)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])]
    model = _model(nodes, helper.make_tensor_value_info("x", F32, [*batch, m, k]),
                   helper.make_tensor_value_info("y", F32, [*batch, m, n]),
                   [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    x = RNG.standard_normal((*batch, m, k)).astype(np.float32)
    rows = int(np.prod(batch, dtype=np.int64)) * m
    return Case(kind, name, model, x, 2 * rows * k * n, 4 * (x.size + w.size + rows * n))


def _quant_scalars(**values):
    return [numpy_helper.from_array(np.array(v, dtype), name) for name, (v, dtype) in values.items()]


_QPARAMS = dict(sx=(0.02, "float32"), zx=(128, "uint8"), sw=(0.01, "float32"), zw=(0, "int8"),
                sy=(0.5, "float32"), zy=(128, "uint8"))


def qgemm(name: str, m: int, k: int, n: int) -> Case:
    """QLinearMatMul: uint8 activations by int8 weights (7-bit, which MLAS's AVX2 path needs), requantised."""
    w = RNG.integers(-64, 63, (k, n), endpoint=True).astype(np.int8)
    node = helper.make_node("QLinearMatMul", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])
    model = _model([node], helper.make_tensor_value_info("x", U8, [m, k]),
                   helper.make_tensor_value_info("y", U8, [m, n]),
                   [numpy_helper.from_array(w, "w"), *_quant_scalars(**_QPARAMS)])
    x = RNG.integers(0, 255, (m, k), endpoint=True).astype(np.uint8)
    return Case("int8", name, model, x, 2 * m * k * n, x.size + w.size + m * n)


def qconv(name: str, c: int, o: int, size: int, k: int) -> Case:
    """QLinearConv, padded to keep the size."""
    w = RNG.integers(-64, 63, (o, c, k, k), endpoint=True).astype(np.int8)
    shape, pad = [1, c, size, size], (k - 1) // 2
    node = helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[pad] * 4)
    model = _model([node], helper.make_tensor_value_info("x", U8, shape),
                   helper.make_tensor_value_info("y", U8, [1, o, size, size]),
                   [numpy_helper.from_array(w, "w"), *_quant_scalars(**_QPARAMS)])
    x = RNG.integers(0, 255, shape, endpoint=True).astype(np.uint8)
    return Case("int8", name, model, x, 2 * o * size * size * c * k * k, x.size + w.size + o * size * size)


def cases() -> list[Case]:
    """The kernels, by kind."""
    return [
        conv("conv1x1", "resnet50 1x1 64->256 56", 64, 256, 56, 1),
        conv("conv1x1", "resnet50 1x1 256->64 56", 256, 64, 56, 1),
        conv("conv1x1", "resnet50 1x1 512->128 28", 512, 128, 28, 1),
        conv("conv1x1", "resnet50 1x1 1024->256 14", 1024, 256, 14, 1),
        conv("conv1x1", "resnet50 1x1 2048->512 7", 2048, 512, 7, 1),
        conv("conv1x1", "resnet50 1x1 s2 256->512 56", 256, 512, 56, 1, stride=2),
        conv("conv3x3", "resnet50 3x3 64->64 56", 64, 64, 56, 3),
        conv("conv3x3", "resnet50 3x3 128->128 28", 128, 128, 28, 3),
        conv("conv3x3", "resnet50 3x3 256->256 14", 256, 256, 14, 3),
        conv("conv3x3", "resnet50 3x3 512->512 7", 512, 512, 7, 3),
        conv("conv3x3", "resnet50 3x3 s2 128->128 56", 128, 128, 56, 3, stride=2),
        conv("conv3x3", "resnet50 3x3 s2 256->256 28", 256, 256, 28, 3, stride=2),
        conv("stem", "resnet50 7x7 s2 3->64 224", 3, 64, 224, 7, stride=2),
        conv("conv1x1", "mobilenetv2 1x1 16->96 112", 16, 96, 112, 1),
        conv("conv1x1", "mobilenetv2 1x1 24->144 56", 24, 144, 56, 1),
        conv("conv1x1", "mobilenetv2 1x1 144->24 56", 144, 24, 56, 1),
        conv("conv1x1", "mobilenetv2 1x1 96->576 14", 96, 576, 14, 1),
        conv("conv1x1", "mobilenetv2 1x1 960->160 7", 960, 160, 7, 1),
        conv("conv1x1", "mnasnet 1x1 192->1152 7", 192, 1152, 7, 1),
        conv("conv1x1", "mnasnet 1x1 1152->192 7", 1152, 192, 7, 1),
        conv("stem", "mobilenetv2 3x3 s2 3->32 224", 3, 32, 224, 3, stride=2),
        conv("depthwise", "mobilenetv2 dw 32 112", 32, 32, 112, 3, group=32),
        conv("depthwise", "mobilenetv2 dw 144 56", 144, 144, 56, 3, group=144),
        conv("depthwise", "mobilenetv2 dw s2 96 112", 96, 96, 112, 3, stride=2, group=96),
        conv("depthwise", "mobilenetv2 dw 960 7", 960, 960, 7, 3, group=960),
        conv("depthwise", "efficientnet-b7 dw 960 37", 960, 960, 37, 3, group=960),
        conv("depthwise", "efficientnet-b7 dw 288 150", 288, 288, 150, 3, group=288),
        conv("depthwise", "mnasnet dw 5x5 480 14", 480, 480, 14, 5, group=480),
        conv("depthwise", "mnasnet dw 5x5 1152 7", 1152, 1152, 7, 5, group=1152),
        conv("grouped", "resnext50 3x3 g32 128->128 56", 128, 128, 56, 3, group=32),
        conv("grouped", "resnext50 3x3 g32 256->256 28", 256, 256, 28, 3, group=32),
        conv("grouped", "resnext50 3x3 g32 512->512 14", 512, 512, 14, 3, group=32),
        conv("dilated", "deeplabv3 3x3 d2 256->256 28", 256, 256, 28, 3, dilation=2),
        conv("dilated", "deeplabv3 3x3 d4 512->512 14", 512, 512, 14, 3, dilation=4),
        conv("conv1d", "whisper conv1d k3 80->384 3000", 80, 384, 3000, (3,)),
        conv("conv1d", "whisper conv1d k3 s2 384->384 3000", 384, 384, 3000, (3,), stride=2),
        conv_transpose("dcgan convT 4x4 s2 256->128 8", 256, 128, 8),
        conv_transpose("dcgan convT 4x4 s2 128->64 16", 128, 64, 16),
        gemm("gemm", "bert 128x768x768", 128, 768, 768),
        gemm("gemm", "bert 128x768x3072", 128, 768, 3072),
        gemm("gemm", "bert 128x3072x768", 128, 3072, 768),
        gemm("gemm", "vit 197x768x768", 197, 768, 768),
        gemm("gemm", "square 512x512x512", 512, 512, 512),
        gemm("gemm", "square 1024x1024x1024", 1024, 1024, 1024),
        gemm("gemm", "gpt2 64x768x768", 64, 768, 768),
        gemm("gemm small-m", "decode 1x768x768", 1, 768, 768),
        gemm("gemm small-m", "decode 1x768x3072", 1, 768, 3072),
        gemm("gemm small-m", "decode 4x768x3072", 4, 768, 3072),
        gemm("gemm small-m", "decode 16x768x768", 16, 768, 768),
        gemm("gemm small-m", "resnet50 head 1x2048x1000", 1, 2048, 1000),
        qgemm("bert int8 128x768x768", 128, 768, 768),
        qgemm("decode int8 1x768x3072", 1, 768, 3072),
        qconv("resnet50 int8 3x3 64->64 56", 64, 64, 56, 3),
        qconv("resnet50 int8 1x1 256->64 56", 256, 64, 56, 1),
    ]


class Flush:
    """Evicts the caches: a write over twice the last-level cache (at least 64 MiB)."""

    def __init__(self):
        self.buffer = np.zeros(max(64 << 20, 2 * host().l3_bytes) // 4, np.float32)

    def __call__(self) -> None:
        self.buffer += 1.0


def _onnxruntime(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return lambda x: sess.run(None, {"x": x})[0]


def measure(case: Case, rounds: int, flush, peaks, burst: int = 0) -> dict:
    """Both runtimes on `case`, `rounds` interleaved rounds, each call after `flush`; the row of the table. With
    a `burst`, each turn is one untimed call after `flush` and then `burst` timed calls back to back: the kernel
    with its threads awake, as a model's neighbouring kernels keep them."""
    compiled = tilegrad.compile(case.model)
    ort = _onnxruntime(case.model)
    contenders = {"tilegrad": lambda: compiled(case.x), "onnxruntime": lambda: ort(case.x)}
    ours, theirs = contenders["tilegrad"](), contenders["onnxruntime"]()
    scale = max(float(np.abs(theirs.astype(np.float64)).max()), 1e-6)
    error = float(np.abs(ours.astype(np.float64) - theirs.astype(np.float64)).max()) / scale
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, call in contenders.items():
            flush()
            if burst:
                call()
            for _ in range(max(burst, 1)):
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
    ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
    intensity = case.flops / case.bytes
    memory_bound = intensity < peaks.fma_gflops / peaks.bandwidth_gbs
    gflops = case.flops / ms["tilegrad"] / 1e6
    gbs = case.bytes / ms["tilegrad"] / 1e6
    return {"kind": case.kind, "case": case.name, "bound": "memory" if memory_bound else "compute",
            "tilegrad_ms": round(ms["tilegrad"], 4), "onnxruntime_ms": round(ms["onnxruntime"], 4),
            "vs_onnxruntime": round(ms["onnxruntime"] / ms["tilegrad"], 3), "gflops": round(gflops, 1),
            "onnxruntime_gflops": round(case.flops / ms["onnxruntime"] / 1e6, 1), "gbs": round(gbs, 2),
            "of_peak": round(gbs / peaks.bandwidth_gbs if memory_bound else gflops / peaks.fma_gflops, 3),
            "max_rel_error": error}


def _int8_against_float32(rows: list[dict]) -> None:
    """Each int8 row's speed against its float32 form's (the row of the same name without "int8"), when both ran:
    `vs_float32` (time of the float32 kernel over the int8 one)."""
    by_name = {r["case"]: r for r in rows}
    for r in rows:
        twin = by_name.get(r["case"].replace("int8 ", ""))
        if r["kind"] == "int8" and twin is not None:
            r["vs_float32"] = round(twin["tilegrad_ms"] / r["tilegrad_ms"], 3)


def _table(rows: list[dict], peaks) -> str:
    lines = [f"{peaks.cpu} ({peaks.isa}, {peaks.threads} threads): FMA peak {peaks.fma_gflops:.1f} GFLOP/s, "
             f"bandwidth {peaks.bandwidth_gbs:.1f} GB/s (measured {peaks.measured_at})",
             f"{'kind':<13} {'case':<38} {'bound':<7} {'tg ms':>8} {'ort ms':>8} {'x ort':>6} {'GFLOP/s':>8} "
             f"{'ort':>7} {'GB/s':>7} {'%peak':>6} {'err':>8}"]
    for r in rows:
        lines.append(f"{r['kind']:<13} {r['case'][:38]:<38} {r['bound']:<7} {r['tilegrad_ms']:>8.3f} "
                     f"{r['onnxruntime_ms']:>8.3f} {r['vs_onnxruntime']:>6.2f} {r['gflops']:>8.1f} "
                     f"{r['onnxruntime_gflops']:>7.1f} {r['gbs']:>7.2f} {r['of_peak']:>6.1%} "
                     f"{r['max_rel_error']:>8.1e}")
    for r in rows:
        if "vs_float32" in r:
            lines.append(f"  {r['case']}: {r['vs_float32']:.2f}x its float32 form")
    ratios = [r["vs_onnxruntime"] for r in rows]
    lines.append(f"geomean x ort {statistics.geometric_mean(ratios):.3f} over {len(rows)} kernels; "
                 f"below 1.0x: {sum(x < 1.0 for x in ratios)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (the median is reported)")
    parser.add_argument("--only", default="", help="comma-separated kinds or name fragments")
    parser.add_argument("--warm", action="store_true", help="no cache flush before each call")
    parser.add_argument("--burst", type=int, default=0,
                        help="per turn, one untimed call and then this many timed back to back (threads awake)")
    args = parser.parse_args(argv)
    if args.burst < 0:
        parser.error(f"--burst takes a count of calls, 0 or more, got {args.burst}")
    wanted = [w for w in args.only.split(",") if w]
    chosen = [c for c in cases() if not wanted or any(w == c.kind or w in c.name for w in wanted)]
    if not chosen:
        parser.error(f"--only {args.only!r} matches no case")
    peaks = measured_peaks()
    flush = (lambda: None) if args.warm else Flush()
    rows = []
    for i, case in enumerate(chosen):
        rows.append(measure(case, args.rounds, flush, peaks, args.burst))
        if not args.json:
            print(f"[{i + 1}/{len(chosen)}] {case.name}", file=sys.stderr)
    _int8_against_float32(rows)
    if args.json:
        print(json.dumps({"machine": dataclasses.asdict(peaks), "cold": not args.warm, "burst": args.burst,
                          "rows": rows}))
    else:
        print(_table(rows, peaks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
