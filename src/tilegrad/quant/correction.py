"""The seed's corrections of quantization error: mean/variance correction of weights (3.37-3.39) and bias
correction of layer outputs (b <- b - mean error per channel)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from .qdq import bias_of
from .scheme import QParams, quantize


def corrected_weight(w: np.ndarray, p: QParams) -> tuple[np.ndarray, QParams]:
    """Integers and parameters of `w` after mean/variance correction per channel, w^_c <- zeta_c (w^_c + u_c)
    with u_c = E(w_c) - E(w^_c) and zeta_c = ||w_c - E(w_c)|| / ||w^_c - E(w^_c)||.

    On a symmetric grid (zero point 0) the corrected weights zeta_c s_c (q + u_c / s_c) are kept as the integers
    q with the scale zeta_c s_c: |u_c| is a mean of rounding errors, under half a step, so q + u_c / s_c rounds
    back to q. The variance correction is exact; the mean shift, which no integer zero point can hold, is left to
    bias correction."""
    q = quantize(w, p)
    if p.axis is None:
        return q, QParams(np.float32(p.scale * _zeta(w.ravel(), p.dequantize(q).ravel())), p.zero_point, p.dtype)
    rows = np.moveaxis(w, p.axis, 0).reshape(w.shape[p.axis], -1)
    rows_hat = np.moveaxis(p.dequantize(q), p.axis, 0).reshape(rows.shape)
    zeta = np.array([_zeta(r, r_hat) for r, r_hat in zip(rows, rows_hat)])
    return q, p._replace(scale=(p.scale * zeta).astype(np.float32))


def _zeta(w: np.ndarray, w_hat: np.ndarray) -> float:
    spread_hat = np.linalg.norm(w_hat - w_hat.mean())
    return float(np.linalg.norm(w - w.mean()) / spread_hat) if spread_hat > 0 else 1.0


def mean_error(float_outputs: Sequence[np.ndarray], quantized_outputs: Sequence[np.ndarray]) -> np.ndarray:
    """Delta per channel (axis 1) of a layer's output: quantized minus float, averaged over the batches and
    every other axis."""
    total, count = 0.0, 0
    for a, a_hat in zip(float_outputs, quantized_outputs):
        axes = tuple(d for d in range(a.ndim) if d != 1)
        total = total + (a_hat.astype(np.float64) - a).sum(axis=axes)
        count += a.size // a.shape[1]
    return total / count


def with_biases(model: onnx.ModelProto, layers: Sequence[onnx.NodeProto], deltas: dict[str, np.ndarray]
                ) -> onnx.ModelProto:
    """A copy of `model` where each layer (by output name) in `deltas` has the bias b - Delta (a Conv or Gemm
    without one gets -Delta)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    init = {t.name: t for t in out.graph.initializer}
    by_output = {n.output[0]: n for n in out.graph.node}
    for layer in layers:
        delta = deltas.get(layer.output[0])
        if delta is None:
            continue
        n = by_output[layer.output[0]]
        b = bias_of(n)
        old = numpy_helper.to_array(init[b]) if b in init else np.zeros(delta.shape, np.float32)
        name = f"{n.output[0]}/corrected_bias"
        out.graph.initializer.append(numpy_helper.from_array((old - delta).astype(np.float32), name))
        while len(n.input) < 3:
            n.input.append("")
        n.input[2] = name
    return out
