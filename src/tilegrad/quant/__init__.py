"""Quantization to int8: post-training (`quantize`, calibrated on sample inputs) and quantization-aware training
(`prepare_qat`, then `convert`). Both write QDQ ONNX models (QuantizeLinear -> DequantizeLinear pairs, as
onnxruntime.quantization writes them) and compile them."""

from .calibrate import METHODS as METHODS
from .ptq import Quantization as Quantization
from .ptq import quantize as quantize
from .ranges import SearchSettings as SearchSettings
from .report import Report as Report
