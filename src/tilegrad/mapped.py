"""Constants that are views of a file's pages: a model's weights mapped rather than read (`frontend/onnx_file.py`).

A mapped weight costs memory only for the pages something has read, and those pages can be handed back at any
time: they are the file's, and come in again if read again. A pass that makes its own copy of a weight (packed
for a kernel) hands the original's pages back at once (`release_pages`), so compiling holds each weight about
once, not the imported graph's arrays and their packed copies together.
"""

from __future__ import annotations

import mmap

import numpy as np


def map_file(path: str, offset: int, length: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """`length` bytes of `path` from `offset` as a read-only array of `dtype` and `shape`, copied only where the
    offset is not a multiple of the element size (an array must be aligned to its elements)."""
    if length == 0:
        return np.zeros(shape, dtype)
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), length + offset - start, access=mmap.ACCESS_READ, offset=start)
    array = np.frombuffer(mapping, dtype=dtype, count=length // dtype.itemsize, offset=offset - start)
    array = array.reshape(shape)
    return array if array.flags.aligned else array.copy()


def release_pages(array: np.ndarray) -> None:
    """Drop from this process's memory the pages of a mapped array (`map_file`, or a view of one) that it spans
    whole: they are read from the file again if the array is read again. Any other array is left alone."""
    base = _mapping(array)
    if base is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    origin = np.frombuffer(base, np.uint8, count=1).__array_interface__["data"][0]
    begin = array.__array_interface__["data"][0] - origin
    first = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE
    last = min(begin + array.nbytes, len(base)) // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        base.madvise(mmap.MADV_DONTNEED, first, last - first)




def owned(array: np.ndarray) -> np.ndarray:
    """`array` in this process's own memory: a copy of a mapped one (`map_file`), which a compiled module must not
    keep (the model's file may be rewritten or cut short under it), else `array` itself."""
    return array.copy() if _mapping(array) is not None else array


def _mapping(array: np.ndarray) -> mmap.mmap | None:
    """The file mapping `array` is a view of, if any."""
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):  # (np.frombuffer keeps a view of the mapping)
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None
