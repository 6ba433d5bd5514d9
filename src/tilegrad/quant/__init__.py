"""Quantization to int8: post-training (`quantize`, calibrated on sample inputs) and quantization-aware training
(`prepare_qat`, then `convert`). Both write QDQ ONNX models (QuantizeLinear -> DequantizeLinear pairs, as
onnxruntime.quantization writes them) and compile them."""

from .calibrate import METHODS as METHODS
from .calibrate import QuantizationWarning as QuantizationWarning
from .ptq import Quantization as Quantization
from .ptq import quantize as quantize
from .ranges import SearchSettings as SearchSettings
from .report import Report as Report


def __getattr__(name):
    if name in ("prepare_qat", "convert"):  # they need torch, which post-training quantization does not
        from . import qat

        return getattr(qat, name)
    raise AttributeError(f"module 'tilegrad.quant' has no attribute {name!r}")
