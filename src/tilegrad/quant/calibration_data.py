"""Calibration batches, from Python objects or from a directory, as one dict {input name: array} per batch,
checked against the model's inputs before anything runs on them.

A directory holds one file per batch, read in name order: `.npy` for a model with one input (the array is that
input's batch), `.npz` for any model (one array per input, named by the input; a model with one input may also
use NumPy's default name `arr_0`).

Ranges calibrated on bad data make a bad model without a word (one batch of NaN averages into every bias; all-zero
data gives every activation an empty range), so each batch must hold, per input, an array of the declared
element type and static dimensions with finite values, and each float input must take more than one value over
the batches. Errors name the input and the batch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import TilegradError


def batches(data, input_names: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
    """Each batch of `data` (an iterable of dicts by input name, of tuples in input order, or of arrays for a
    model with one input; or a directory path) as a dict by input name."""
    if isinstance(data, (str, Path)):
        yield from read_directory(data, input_names)
        return
    if isinstance(data, (np.ndarray, Mapping)):
        raise TilegradError("calibration_data is a sequence of batches; wrap a single batch in a list")
    for k, batch in enumerate(data):
        yield _named(batch, input_names, f"calibration batch {k}")


def _named(batch, input_names: Sequence[str], where: str) -> dict[str, np.ndarray]:
    if isinstance(batch, Mapping):
        missing = [n for n in input_names if n not in batch]
        if missing:
            raise TilegradError(f"{where} lacks input(s) {missing}; the model takes {list(input_names)}")
        return {n: np.asarray(batch[n]) for n in input_names}
    arrays = [batch] if isinstance(batch, (np.ndarray, np.generic)) or np.isscalar(batch) else list(batch)
    if len(arrays) != len(input_names):
        raise TilegradError(f"{where} holds {len(arrays)} array(s); the model takes {len(input_names)} "
                            f"({', '.join(input_names)})")
    return {n: np.asarray(a) for n, a in zip(input_names, arrays)}


def read_directory(directory, input_names: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
    """The batches stored in `directory` (see the module doc)."""
    if not Path(directory).is_dir():
        raise TilegradError(f"calibration_data {str(directory)!r} is not a directory")
    files = sorted(p for p in Path(directory).iterdir() if p.suffix in (".npy", ".npz"))
    if not files:
        raise TilegradError(f"{directory}: no .npy or .npz calibration files")
    for path in files:
        if path.suffix == ".npy":
            yield _named(np.load(path, allow_pickle=False), input_names, str(path))
            continue
        with np.load(path, allow_pickle=False) as npz:
            arrays = dict(npz)
        if len(input_names) == 1 and list(arrays) == ["arr_0"]:
            arrays = {input_names[0]: arrays["arr_0"]}
        yield _named(arrays, input_names, str(path))


def as_list(data: Iterable, inputs: Mapping[str, tuple[str, tuple]]) -> list[dict[str, np.ndarray]]:
    """All batches, read once (calibration passes over them more than once) and checked against `inputs`, {name:
    (element type, declared dimensions: ints, or names where symbolic)}, as the module doc says."""
    out = list(batches(data, list(inputs)))
    if not out:
        raise TilegradError("calibration_data holds no batch")
    for k, batch in enumerate(out):
        for name, (dtype, dims) in inputs.items():
            _check(batch[name], name, dtype, dims, f"calibration batch {k}")
    for name, (dtype, _) in inputs.items():
        if np.dtype(dtype).kind == "f":
            lo, hi = min(b[name].min(initial=np.inf) for b in out), max(b[name].max(initial=-np.inf) for b in out)
            if lo == hi:
                raise TilegradError(f"calibration data for input {name!r} holds the one value {lo} in all {len(out)} "
                                    f"batch(es): ranges calibrated on it would be empty; calibrate on real inputs")
    return out


def _check(a: np.ndarray, name: str, dtype: str, dims: tuple, where: str) -> None:
    if a.dtype != np.dtype(dtype):
        raise TilegradError(f"{where}: input {name!r} has element type {a.dtype}; the model takes {dtype} (convert "
                            f"it with .astype(numpy.{dtype}))")
    if a.ndim != len(dims) or any(isinstance(d, int) and n != d for n, d in zip(a.shape, dims)):
        declared = ", ".join(map(str, dims))
        raise TilegradError(f"{where}: input {name!r} has shape {a.shape}; the model declares [{declared}]")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        bad = int(a.size - np.isfinite(a).sum())
        raise TilegradError(f"{where}: input {name!r} holds {bad} NaN or infinite value(s) of {a.size}; calibration "
                            f"needs finite data")
