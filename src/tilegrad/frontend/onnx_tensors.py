"""The tensors of an imported ONNX model, checked before anything is allocated or computed: stored tensors
(initializers, Constant values) become arrays only when their data fits their declared shape, and every tensor
type is checked against what tilegrad compiles (its element types; at most `MAX_ELEMENTS` elements), so a
hostile or broken model is refused at once instead of allocating terabytes or running for minutes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import config
from ..dtype import DTYPES
from ..errors import ResourceLimitError, UnsupportedFeatureError
from ..te.dims import upper_shape
from .onnx_file import WHOLE_BYTE_TYPES, ModelFormatError, is_mapped, mapped_array

MAX_ELEMENTS = 1 << 31  # the largest tensor tilegrad compiles (8 GiB of float32)


def check_size(shape: Sequence[int], what: str) -> None:
    """Refuse a tensor of more than MAX_ELEMENTS elements (at its dynamic dimensions' upper bounds); `what` says
    where it comes from ("input 'x'")."""
    n = math.prod(upper_shape(shape))
    if n > MAX_ELEMENTS:
        raise ResourceLimitError(f"{what} has shape {list(shape)}, {n:,} elements: more than the "
                                      f"{MAX_ELEMENTS:,} tilegrad compiles in one tensor (check the model's "
                                      f"dimensions)")


def check_dtype(dtype: str, what: str) -> None:
    """Refuse an element type tilegrad does not compile."""
    if dtype not in DTYPES:
        raise UnsupportedFeatureError(f"{what} has element type {dtype}, which tilegrad does not compile; "
                                      f"supported: {', '.join(sorted(DTYPES))}")


def onnx_dtype(elem_type: int, what: str) -> str:
    """The NumPy name of an ONNX element type, with an error naming `what` for an unknown one."""
    from onnx import helper

    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, ValueError, TypeError):
        raise ModelFormatError(f"{what} has an unknown or undefined element type ({elem_type})") from None


def tensor_array(t, what: str) -> np.ndarray:
    """The array of a stored tensor (an initializer or a Constant's value), checked against its declared
    shape and the size limit before it is made. Its element type is checked where the array is used."""
    from onnx import TensorProto, helper, numpy_helper

    what = f"{what} (tensor {t.name!r})" if t.name else what
    dims = tuple(t.dims)
    if any(d < 0 for d in dims):
        raise ModelFormatError(f"{what} declares a negative dimension: {list(dims)}")
    dtype = onnx_dtype(t.data_type, what)
    check_size(dims, what)
    if t.data_location == TensorProto.EXTERNAL:
        if not is_mapped(t):
            raise ModelFormatError(f"{what} keeps its data in an external file; load the model from its path")
        return mapped_array(t, helper.tensor_dtype_to_np_dtype(t.data_type))
    if t.HasField("raw_data") and t.data_type in WHOLE_BYTE_TYPES:
        want = math.prod(dims) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        if len(t.raw_data) != want:
            raise ModelFormatError(f"{what} of type {dtype}{list(dims)} needs {want} bytes of data, but holds "
                                   f"{len(t.raw_data)}")
    try:
        arr = numpy_helper.to_array(t)
    except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{what}: its data does not fit its type {dtype}{list(dims)}: {exc}") from None
    if arr.shape != dims:
        raise ModelFormatError(f"{what}: its data has shape {list(arr.shape)}, but it declares {list(dims)}")
    return arr


def check_constant(shape: Sequence[int], dtype, what: str) -> None:
    """Refuse to compute a constant of more than `config.constant_bytes` during import (by default a quarter of
    the machine's memory)."""
    limit, n = config.get().constant_bytes, math.prod(shape)
    nbytes = n * np.dtype(dtype).itemsize
    if nbytes > limit:
        raise ResourceLimitError(f"{what} computes a constant of shape {list(shape)} ({np.dtype(dtype)}, "
                                 f"{nbytes / 2**20:,.0f} MiB), {n:,} elements: more than the {limit / 2**20:,.0f} "
                                 f"MiB tilegrad computes while compiling (a quarter of this machine's memory by "
                                 f"default; TILEGRAD_CONSTANT_BYTES sets it)")
