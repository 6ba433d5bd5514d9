"""The element types, described once: their names, kinds, integer ranges, byte sizes and NumPy spellings."""

from __future__ import annotations

import ml_dtypes  # noqa: F401  (registers NumPy's "bfloat16", the type ONNX's bfloat16 tensors arrive in)
import numpy as np

INDEX = "int64"  # the type of loop variables and tensor indices
FLOAT_DTYPES = frozenset({"bfloat16", "float16", "float32", "float64"})
UNSIGNED_DTYPES = frozenset({"uint8", "uint16", "uint32", "uint64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64"}) | UNSIGNED_DTYPES
DTYPES = FLOAT_DTYPES | INT_DTYPES | {"bool"}
# The element types a compiled kernel or module takes and returns across its boundary (tested end to end).
BUFFER_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                 "uint32", "uint64", "bool")

# The values of each integer dtype (inclusive); a cast to a narrower type wraps around outside them.
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_unsigned(dtype: str) -> bool:
    return dtype in UNSIGNED_DTYPES


def itemsize(dtype: str) -> int:
    """Bytes per element."""
    return np.dtype(dtype).itemsize
