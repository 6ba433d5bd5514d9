"""Single-operator benchmark: tilegrad kernels (hand-written schedules) against NumPy and PyTorch.

Contenders are interleaved round by round and each figure is a median; between contenders the script sleeps
briefly so that another library's spinning thread pool does not steal the cores. Run:

    python benchmarks/ops.py            # table
    python benchmarks/ops.py --json     # [{"name", "shape", "tilegrad_ms", "torch_ms", "numpy_ms", "gflops"}, ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from tilegrad import te
from tilegrad.kernel import build
from tilegrad.runtime import time_kernel
from tilegrad.schedule import Schedule
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import host
from tilegrad.te import nn

THREADS = os.cpu_count() or 1
IDLE_S = 0.5


@dataclass
class Case:
    name: str
    shape: str
    inputs: list  # te placeholders
    schedule: Schedule
    flops: float
    bytes: float  # compulsory memory traffic, for memory-bound ops
    torch_fn: Callable
    numpy_fn: Callable | None


def matmul_case(m: int, n: int, k: int, *, mr: int = 6) -> Case:
    """The packed GEMM: te.nn.packed_matmul (A and B packed into panels, A zero-padded so that every mr x nr
    register tile runs without bounds checks) under its schedule rule in schedule/defaults.py: an mr x nr tile
    (nr = two vectors) accumulated over all of k, row blocks and column panels in parallel. Packing is part of
    the timed kernel."""
    nr = 2 * host().vector_lanes
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    c = nn.packed_matmul(a, b, mr=mr, nr=nr, name="C")
    return Case("matmul", f"{m}x{n}x{k}", [a, b], default_schedule(c), 2.0 * m * n * k,
                4.0 * (m * k + k * n + m * n), lambda x, y: x @ y, lambda x, y: x @ y)


def conv2d_case(channels: int = 64, size: int = 56, kernel: int = 3, packed: bool = False) -> Case:
    """Direct conv2d (vectors along the output row), or te.nn.packed_conv2d (vectors across a block of output
    channels; the weight packing is inside the timed kernel)."""
    pad = kernel // 2
    x = te.placeholder((1, channels, size, size), name="X")
    w = te.placeholder((channels, channels, kernel, kernel), name="W")
    block = 2 * host().vector_lanes
    y = nn.packed_conv2d(x, w, padding=pad, block=block, name="Y") if packed else nn.conv2d(x, w, padding=pad,
                                                                                             name="Y")
    import torch.nn.functional as F

    flops = 2.0 * channels * size * size * channels * kernel * kernel
    shape = f"1x{channels}x{size}x{size} -> {channels}, {kernel}x{kernel} pad {pad}"
    return Case("packed_conv2d" if packed else "conv2d", shape, [x, w], default_schedule(y), flops,
                4.0 * (channels * size * size * 2 + channels * channels * kernel * kernel),
                lambda a, b: F.conv2d(a, b, padding=pad), None)


def resnet_conv_cases() -> list[Case]:
    """The 3x3 and 1x1 convolution shapes of ResNet's stages (batch 1), direct and packed, default schedules."""
    return [conv2d_case(c, s, k, packed) for c, s in ((64, 56), (128, 28), (256, 14), (512, 7)) for k in (3, 1)
            for packed in (False, True)]


def depthwise_case() -> Case:
    x = te.placeholder((1, 96, 112, 112), name="X")
    w = te.placeholder((96, 1, 3, 3), name="W")
    y = nn.depthwise_conv2d(x, w, padding=1, name="Y")
    import torch.nn.functional as F

    flops = 2.0 * 96 * 112 * 112 * 9
    return Case("depthwise_conv2d", "1x96x112x112, 3x3 pad 1", [x, w], default_schedule(y), flops,
                4.0 * 96 * 112 * 112 * 2, lambda a, b: F.conv2d(a, b, padding=1, groups=96), None)


def layernorm_case() -> Case:
    x = te.placeholder((128, 768), name="X")
    g = te.placeholder((768,), name="G")
    b = te.placeholder((768,), name="Bt")
    y = nn.layer_norm(x, g, b, name="Y")
    import torch.nn.functional as F

    def numpy_ln(a, gamma, beta):
        mu = a.mean(-1, keepdims=True)
        var = ((a - mu) ** 2).mean(-1, keepdims=True)
        return (a - mu) / np.sqrt(var + 1e-5) * gamma + beta

    return Case("layer_norm", "128x768", [x, g, b], default_schedule(y), 8.0 * 128 * 768, 4.0 * 128 * 768 * 2,
                lambda a, gamma, beta: F.layer_norm(a, (768,), gamma, beta), numpy_ln)


def softmax_case() -> Case:
    x = te.placeholder((12, 128, 128), name="X")
    y = nn.softmax(x, name="Y")

    def numpy_softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return Case("softmax", "12x128x128", [x], default_schedule(y), 5.0 * 12 * 128 * 128, 4.0 * 12 * 128 * 128 * 2,
                lambda a: a.softmax(-1), numpy_softmax)


def cases() -> list[Case]:
    return [matmul_case(512, 512, 512), matmul_case(1024, 1024, 1024), matmul_case(128, 768, 768),
            conv2d_case(), depthwise_case(), layernorm_case(), softmax_case()]


def model_op_cases() -> list[Case]:
    """Shapes from BERT-base (attention batch matmuls, the 768 -> 3072 dense layer, plain and packed) and
    MobileNetV2 (depthwise 3x3, stride 1 and 2), under default schedules."""
    import torch.nn.functional as F

    out = []
    for m, k, n in ((128, 64, 128), (128, 128, 64)):
        a, b = te.placeholder((12, m, k), name="A"), te.placeholder((12, k, n), name="B")
        out.append(Case("batch_matmul", f"12x{m}x{k} @ 12x{k}x{n}", [a, b],
                        default_schedule(nn.batch_matmul(a, b, name="C")), 2.0 * 12 * m * n * k,
                        4.0 * 12 * (m * k + k * n + m * n), lambda x, y: x @ y, lambda x, y: x @ y))
    x, w = te.placeholder((128, 768), name="X"), te.placeholder((3072, 768), name="W")
    for label, y in (("dense", nn.dense(x, w, name="Y")),
                     ("packed_dense", nn.packed_matmul(x, w, transpose_b=True, nr=2 * host().vector_lanes,
                                                       name="Y"))):
        out.append(Case(label, "128x768 -> 3072", [x, w], default_schedule(y), 2.0 * 128 * 768 * 3072,
                        4.0 * (128 * 768 + 3072 * 768 + 128 * 3072), lambda p, q: p @ q.T, lambda p, q: p @ q.T))
    for c, size, stride in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (384, 14, 1), (960, 7, 1)):
        xi, wi = te.placeholder((1, c, size, size), name="X"), te.placeholder((c, 1, 3, 3), name="W")
        y = nn.depthwise_conv2d(xi, wi, stride=stride, padding=1, name="Y")
        o = y.shape[-1]
        out.append(Case("depthwise_conv2d", f"1x{c}x{size}x{size}, 3x3 stride {stride}", [xi, wi],
                        default_schedule(y), 2.0 * c * o * o * 9, 4.0 * c * (size * size + o * o),
                        lambda p, q, s=stride, g=c: F.conv2d(p, q, stride=s, padding=1, groups=g), None))
    return out


def _time_python(fn: Callable, min_s: float = 0.05, repeats: int = 5) -> float:
    fn()
    number, t = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        t = time.perf_counter() - start
        if t >= min_s / 4 or number > 1 << 16:
            break
        number *= 4
    costs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        costs.append((time.perf_counter() - start) / number)
    return statistics.median(costs)


def measure(case: Case, rounds: int) -> dict:
    import torch

    torch.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in case.inputs]
    kern = build(case.schedule, name="bench", args=case.inputs + case.schedule.state.outputs)
    out = kern.run(*arrays)
    tensors = [torch.from_numpy(a) for a in arrays]
    want = case.torch_fn(*tensors).numpy()
    np.testing.assert_allclose(out, want, rtol=2e-3, atol=2e-3)
    out_buf = np.empty_like(out)
    ours, theirs, numpys = [], [], []
    for _ in range(rounds):
        ours.append(time_kernel(kern.kernel, arrays + [out_buf], repeats=5, min_repeat_s=0.05).median)
        time.sleep(IDLE_S)
        with torch.no_grad():
            theirs.append(_time_python(lambda: case.torch_fn(*tensors)))
        time.sleep(IDLE_S)
        if case.numpy_fn is not None:
            numpys.append(_time_python(lambda: case.numpy_fn(*arrays)))
            time.sleep(IDLE_S)
    t_ours = statistics.median(ours)
    return {
        "name": case.name,
        "shape": case.shape,
        "tilegrad_ms": t_ours * 1e3,
        "torch_ms": statistics.median(theirs) * 1e3,
        "numpy_ms": statistics.median(numpys) * 1e3 if numpys else None,
        "gflops": case.flops / t_ours / 1e9,
        "gbps": case.bytes / t_ours / 1e9,
    }


def _table(rows: list[dict]) -> str:
    head = f"{'op':<18}{'shape':<30}{'tilegrad ms':>12}{'torch ms':>10}{'numpy ms':>10}{'vs torch':>10}" \
           f"{'GFLOP/s':>9}{'GB/s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        numpy_ms = f"{r['numpy_ms']:.3f}" if r["numpy_ms"] is not None else "-"
        ratio = r["torch_ms"] / r["tilegrad_ms"]
        lines.append(f"{r['name']:<18}{r['shape']:<30}{r['tilegrad_ms']:>12.3f}{r['torch_ms']:>10.3f}"
                     f"{numpy_ms:>10}{ratio:>9.2f}x{r['gflops']:>9.1f}{r['gbps']:>7.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per op (median taken)")
    parser.add_argument("--only", default=None, help="run only ops whose name contains this")
    parser.add_argument("--set", choices=("issue", "resnet-convs", "model-ops"), default="issue",
                        help="the issue's operator list, ResNet's convolution shapes, or BERT/MobileNet shapes")
    args = parser.parse_args(argv)
    rows = []
    sets = {"issue": cases, "resnet-convs": resnet_conv_cases, "model-ops": model_op_cases}
    for case in sets[args.set]():
        if args.only and args.only not in case.name:
            continue
        rows.append(measure(case, args.rounds))
        if not args.json:
            print(f"  measured {case.name} {case.shape}", file=sys.stderr)
    if args.json:
        print(json.dumps([{k: r[k] for k in ("name", "shape", "tilegrad_ms", "torch_ms", "numpy_ms", "gflops")}
                          for r in rows], indent=1))
    else:
        print(f"threads: {THREADS}; ratio = torch time / tilegrad time (higher is better for tilegrad)")
        print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
