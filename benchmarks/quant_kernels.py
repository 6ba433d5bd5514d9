"""The int8 kernels against tilegrad's float32 and ONNX Runtime's int8: an int8 GEMM (BERT-base's 256 x 768 x 768)
and a ResNet-50 3x3 convolution (64 -> 64 channels on 56 x 56), each as a one-node ONNX model with constant
weights -- QLinearMatMul / QLinearConv for the int8 runs (tilegrad imports them as its integer products; ONNX
Runtime runs its MLAS kernels), MatMul / Conv for float32. GOP/s count 2 x the multiply-adds; each figure is the
median of `--repeats` timed calls after a warm-up, the three variants timed in turns (one call of each per
round, so a machine shared with other jobs loads them alike). Run:

    python benchmarks/quant_kernels.py            # a table
    python benchmarks/quant_kernels.py --json     # one row per kernel

The machine's int8 dot product (`Target.int8_dot`: avx512_vnni, avx_vnni, avx2 or scalar) is in every row.
Neither runtime's threads spin after a call (OMP_WAIT_POLICY=passive unless set, ONNX Runtime's
allow_spinning 0): timed in turns, the spinning threads of one would take the cores from the next call of the
other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tilegrad
from tilegrad.target import host

U8, I8, F32 = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT
os.environ.setdefault("OMP_WAIT_POLICY", "passive")  # read when the first kernel loads libgomp


def _model(node, inputs, output, inits):
    graph = helper.make_graph([node], "kernel", inputs, [output], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _scalars(**values):
    return [numpy_helper.from_array(np.array(v, dtype), name) for name, (v, dtype) in values.items()]


def gemm_models(m: int, k: int, n: int, rng):
    """(int8 model, float32 model, int8 input, float32 input, 2 m k n)."""
    w = rng.integers(-64, 63, (k, n), endpoint=True).astype(np.int8)  # 7 bits: MLAS's AVX2 path cannot saturate
    q = _model(helper.make_node("QLinearMatMul", ["a", "sa", "za", "w", "sw", "zw", "sy", "zy"], ["y"]),
               [helper.make_tensor_value_info("a", U8, [m, k])], helper.make_tensor_value_info("y", U8, [m, n]),
               [numpy_helper.from_array(w, "w"), *_scalars(sa=(0.02, "float32"), za=(128, "uint8"),
                                                           sw=(0.01, "float32"), zw=(0, "int8"),
                                                           sy=(0.5, "float32"), zy=(128, "uint8"))])
    f = _model(helper.make_node("MatMul", ["a", "w"], ["y"]), [helper.make_tensor_value_info("a", F32, [m, k])],
               helper.make_tensor_value_info("y", F32, [m, n]),
               [numpy_helper.from_array(w.astype(np.float32) * 0.01, "w")])
    a = rng.integers(0, 255, (m, k), endpoint=True).astype(np.uint8)
    return q, f, a, a.astype(np.float32) * 0.02, 2 * m * k * n


def conv_models(c: int, o: int, size: int, rng):
    """A 3x3 convolution, padding 1, on (1, c, size, size)."""
    w = rng.integers(-64, 63, (o, c, 3, 3), endpoint=True).astype(np.int8)
    shape = [1, c, size, size]
    q = _model(helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"],
                                pads=[1, 1, 1, 1]),
               [helper.make_tensor_value_info("x", U8, shape)],
               helper.make_tensor_value_info("y", U8, [1, o, size, size]),
               [numpy_helper.from_array(w, "w"), *_scalars(sx=(0.02, "float32"), zx=(128, "uint8"),
                                                           sw=(0.01, "float32"), zw=(0, "int8"),
                                                           sy=(0.5, "float32"), zy=(128, "uint8"))])
    f = _model(helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
               [helper.make_tensor_value_info("x", F32, shape)],
               helper.make_tensor_value_info("y", F32, [1, o, size, size]),
               [numpy_helper.from_array(w.astype(np.float32) * 0.01, "w")])
    x = rng.integers(0, 255, shape, endpoint=True).astype(np.uint8)
    return q, f, x, x.astype(np.float32) * 0.02, 2 * o * size * size * c * 9


def _median_seconds(calls: dict, repeats: int) -> dict:
    """The median time of each call, timed in turns (one of each per round), so that a machine shared with
    other jobs loads them alike."""
    times: dict = {label: [] for label in calls}
    for fn in calls.values():
        fn()
    for _ in range(repeats):
        for label, fn in calls.items():
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(t) for label, t in times.items()}


def _onnxruntime(model):
    """ONNX Runtime's session, its pool's threads not spinning after a call: spinning threads would take the
    cores from the next call of the other runtimes, timed in turns with it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda x: sess.run(None, {name: x})[0]


def measure(name: str, models, repeats: int) -> dict:
    q, f, xq, xf, ops = models
    int8, fp32, ort_int8 = tilegrad.compile(q), tilegrad.compile(f), _onnxruntime(q)
    mismatched = int(np.count_nonzero(int8(xq) != ort_int8(xq)))
    seconds = _median_seconds({"tilegrad_int8": lambda: int8(xq), "tilegrad_fp32": lambda: fp32(xf),
                               "ort_int8": lambda: ort_int8(xq)}, repeats)
    gops = {label: ops / s / 1e9 for label, s in seconds.items()}
    return {"kernel": name, **{f"{k}_gops": round(v, 1) for k, v in gops.items()},
            "int8_vs_fp32": round(gops["tilegrad_int8"] / gops["tilegrad_fp32"], 2),
            "int8_vs_ort": round(gops["tilegrad_int8"] / gops["ort_int8"], 2),
            "outputs_differing_from_ort": mismatched, "isa": host().int8_dot}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = [measure("gemm 256x768x768", gemm_models(256, 768, 768, rng), args.repeats),
            measure("conv3x3 64->64 56x56", conv_models(64, 64, 56, rng), args.repeats)]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    keys = list(rows[0])
    print("  ".join(f"{k:>26}" if i == 0 else f"{k:>14}" for i, k in enumerate(keys)))
    for row in rows:
        print("  ".join(f"{row[k]!s:>26}" if i == 0 else f"{row[k]!s:>14}" for i, k in enumerate(keys)))


if __name__ == "__main__":
    main()
