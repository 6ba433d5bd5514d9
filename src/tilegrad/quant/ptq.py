"""Post-training quantization of an ONNX model: `tilegrad.quantize`."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import TilegradError
from ..runtime.module import Module
from ..target import host
from .calibrate import METHODS, calibrate
from .calibration_data import as_list
from .correction import corrected_weight, mean_error, with_biases
from .qdq import Plan, bias_of, plan, write
from .ranges import DEFAULT_SEARCH, SearchSettings
from .report import NoiseSum, Report, TensorError
from .scheme import REDUCED_WEIGHT_MAX, QParams, asymmetric, symmetric, weight_params
from .scheme import quantize as quantize_array
from .tap import IncrementalObserver, Observer, declared_inputs


class Quantization(NamedTuple):
    """A quantized model: the compiled module, the QDQ ONNX model it was compiled from, and the report."""

    module: Module
    model: onnx.ModelProto
    report: Report

    def save(self, path) -> Path:
        """Write the QDQ ONNX model (a `.onnx` path), or the compiled module (a directory)."""
        path = Path(path)
        if path.suffix == ".onnx":
            onnx.save(self.model, path)
            return path
        return self.module.save(path)


def quantize(model, calibration_data, method: str = "kl", *, weight_only: bool = False, per_channel: bool = True,
             symmetric_activations: bool = False, bias_correction: bool = True, weight_correction: bool = True,
             reduce_range: bool | None = None, search: SearchSettings = DEFAULT_SEARCH) -> Quantization:
    """Quantize an ONNX model (a path, bytes or onnx.ModelProto) to int8.

    Weights are int8, symmetric, per output channel (`per_channel=False`: one scale per tensor). Activations are
    uint8 with a zero point (`symmetric_activations=True`: int8, zero point 0), their ranges calibrated on
    `calibration_data` (batches: dicts by input name, tuples in input order, arrays for a one-input model, or a
    directory of .npy/.npz files) by `method`: "max_min", "remove_outlier", "kl", "symmetric_kl" or "js"
    (`search` sets the divergence search). `weight_only` leaves activations in float32. `weight_correction`
    applies the seed's mean/variance correction to weights, `bias_correction` moves each Conv's and Gemm's mean
    output error per channel into its bias (measured on the calibration data: weight-only quantization may go
    without data, calibration_data=None, and then without bias correction). `reduce_range` quantizes weights to
    7 bits, [-64, 64], as ONNX Runtime's option of that name, which lets AVX2 without VNNI multiply in int16
    pairs (vpmaddubsw) instead of widening each byte; None (the default) chooses it on exactly such hosts."""
    from ..api import compile as compile_model
    from ..frontend.onnx_file import load_model

    if method not in METHODS:
        raise TilegradError(f"unknown calibration method {method!r}; choose one of {', '.join(METHODS)}")
    if calibration_data is None and not weight_only:
        raise TilegradError("quantizing activations needs calibration_data; only weight_only=True goes without")
    proto = load_model(model)
    batches = [] if calibration_data is None else as_list(calibration_data, declared_inputs(proto))
    p = plan(proto, per_channel)
    if reduce_range is None:
        reduce_range = host().int8_dot == "avx2"
    weights = _weights(proto, p, weight_correction, REDUCED_WEIGHT_MAX if reduce_range else 127)
    correctable = [n for n in p.layers if _correctable(proto, n)] if bias_correction and batches else []
    observer = Observer(proto, list(dict.fromkeys(p.activations + [n.output[0] for n in correctable])))
    activations = {}
    if not weight_only:
        ranges = calibrate(observer, p.activations, batches, method, symmetric_activations, search)
        activations = {t: symmetric(max(-lo, hi)) if symmetric_activations else asymmetric(lo, hi)
                       for t, (lo, hi) in ranges.items()}
    if correctable:
        proto = _correct_biases(proto, weights, activations, correctable, observer, batches)
    rewrite = write(proto, weights, activations, p.layers)
    report = _report(proto, weights, activations, rewrite, observer, batches)
    return Quantization(compile_model(rewrite.model), rewrite.model, report)


def _weights(model: onnx.ModelProto, p: Plan, weight_correction: bool,
             q_max: int) -> dict[str, tuple[np.ndarray, QParams]]:
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out = {}
    for name, axis in p.weights.items():
        w = init[name].astype(np.float32)
        params = weight_params(w, axis, q_max)
        out[name] = corrected_weight(w, params) if weight_correction else (quantize_array(w, params), params)
    return out


def _correctable(model: onnx.ModelProto, n: onnx.NodeProto) -> bool:
    """A Conv or Gemm whose bias is absent or a constant, and which adds it unscaled (Gemm's beta = 1)."""
    init = {t.name for t in model.graph.initializer}
    beta = next((a.f for a in n.attribute if a.name == "beta"), 1.0)
    return n.op_type in ("Conv", "Gemm") and beta == 1.0 and (bias_of(n) is None or bias_of(n) in init)


def _correct_biases(model, weights, activations, layers, observer: Observer, batches) -> onnx.ModelProto:
    """The seed's bias correction, layer by layer in graph order: each layer's error is measured with the layers
    before it already corrected, so a correction does not chase errors that an earlier one removes. Each step's
    model differs from the previous one in one bias, so the incremental observer evaluates only what follows it."""
    reference = list(observer.run(batches))
    quantized = IncrementalObserver(batches)
    for layer in layers:
        rewrite = write(model, weights, activations, layers)
        seen = quantized.run(rewrite.model, rewrite.float_name[layer.output[0]])
        delta = mean_error([r[layer.output[0]] for r in reference], seen).astype(np.float32)
        model = with_biases(model, [layer], {layer.output[0]: delta})
    return model


def _report(model, weights, activations, rewrite, observer: Observer, batches) -> Report:
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    rows = Report()
    for name, (q, params) in weights.items():
        noise = NoiseSum()
        noise.add(init[name], params.dequantize(q))
        rows.append(TensorError(name, "weight", params.dtype, float(np.max(params.scale)), noise.sqnr_db))
    if not activations:
        return rows
    produced = {o for n in model.graph.node for o in n.output}
    dq = {t: t if t in produced else f"{t}/dequantized" for t in activations}
    quantized = Observer(rewrite.model, [dq[t] for t in activations])
    noise = {t: NoiseSum() for t in activations}
    for ref, seen in zip(observer.run(batches), quantized.run(batches)):
        for t in activations:
            noise[t].add(ref[t], seen[dq[t]])
    rows.extend(TensorError(t, "activation", activations[t].dtype, float(activations[t].scale), noise[t].sqnr_db)
                for t in activations)
    return rows
