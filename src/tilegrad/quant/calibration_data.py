"""Calibration batches, from Python objects or from a directory, as one dict {input name: array} per batch.

A directory holds one file per batch, read in name order: `.npy` for a model with one input (the array is that
input's batch), `.npz` for any model (one array per input, named by the input; a model with one input may also
use NumPy's default name `arr_0`)."""

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
    arrays = [batch] if isinstance(batch, np.ndarray) else list(batch)
    if len(arrays) != len(input_names):
        raise TilegradError(f"{where} holds {len(arrays)} array(s); the model takes {len(input_names)} "
                            f"({', '.join(input_names)})")
    return {n: np.asarray(a) for n, a in zip(input_names, arrays)}


def read_directory(directory, input_names: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
    """The batches stored in `directory` (see the module doc)."""
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


def as_list(data: Iterable, input_names: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """All batches, read once: calibration passes over them more than once."""
    out = list(batches(data, input_names))
    if not out:
        raise TilegradError("calibration_data holds no batch")
    return out
