"""Reading an ONNX model: a path, bytes or a ModelProto, with its external data brought in from beside the file.

A model saved with external data (`model.onnx` + `model.onnx.data`) names each tensor's file relative to the
model's own directory, so that is where it is looked for, whatever the working directory. A location that leaves
that directory (an absolute path, `..`, a link pointing out) is refused: a model is data from elsewhere, and must
not read arbitrary files of the user's into its weights.

Compiling maps external data instead of reading it (`map_external`): each checked tensor keeps its reference,
rewritten to the file's resolved path under a key this process alone knows (so a model cannot claim to be
checked), and becomes an array over a read-only mapping of the file (`mapped_array`). Its pages come in as the
passes read them and go again once a pass has made the copy it needs (`mapped.py`), so a model of weights
larger than memory's half compiles without holding them twice. `read_mapped_in` brings the bytes into the
ModelProto where one must be serialized whole.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path, PurePosixPath, PureWindowsPath

import numpy as np

from ..errors import TilegradError
from ..mapped import map_file


class ModelFormatError(TilegradError):
    """A file or buffer that is not a readable ONNX model, or a model that breaks ONNX's rules (a missing
    attribute, data that does not fit its declared shape, external data that cannot or may not be read)."""


_MAPPED = f"tilegrad-mapped-{secrets.token_hex(8)}"  # marks a reference this process checked (`map_external`)


def load_model(model, *, map_external: bool = False):
    """A ModelProto from a path, bytes or a ModelProto, external data read in (or, with `map_external`, checked
    and left to be mapped by `mapped_array`), with clear errors for anything unreadable. A ModelProto given by
    the caller is not changed."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(model, onnx.ModelProto):
        if any(not is_mapped(t) for t in _external_tensors(model)):
            raise ModelFormatError("the model keeps tensors in external data files, which are found relative to "
                                   "the model's file: pass the model's path (or load it with onnx.load(path))")
        return model
    base = None
    if isinstance(model, (str, Path)):
        path = Path(model)
        if not path.is_file():
            raise ModelFormatError(f"no ONNX file at {path}")
        data = path.read_bytes()
        where, base = str(path), path.resolve().parent
    elif isinstance(model, (bytes, bytearray)):
        data, where = bytes(model), "the given bytes"
    else:
        raise ModelFormatError(f"expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    try:
        proto = onnx.ModelProto.FromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelFormatError(f"{where} is not a valid ONNX model (truncated or corrupt?): {exc}") from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelFormatError(f"{where} holds no ONNX graph (empty or not an ONNX file)")
    external = _external_tensors(proto)
    if external and base is None:
        raise ModelFormatError(f"{where} keeps tensor {external[0].name!r} in an external data file, which is "
                               f"found relative to the model's file: pass the model's path instead of its bytes")
    for t in external:
        real, offset, length = _checked_reference(t, base, where)
        if map_external:
            _mark_mapped(t, real, offset, length)
        else:
            _read_bytes(t, real, offset, length)
    return proto


def is_mapped(t) -> bool:
    """True for an external tensor whose reference this process checked, to be read by `mapped_array`."""
    return any(e.key == _MAPPED for e in t.external_data)


def read_mapped_in(proto) -> None:
    """Bring the bytes of every mapped tensor of `proto` into it (to serialize it whole)."""
    for t in _external_tensors(proto):
        if is_mapped(t):
            location, offset, length = _reference(t)
            _read_bytes(t, Path(location), offset, length)


def mapped_array(t, dtype: np.dtype) -> np.ndarray:
    """The array of a mapped tensor (`is_mapped`): a read-only view of its file's pages (`mapped.py`), or, for
    a type whose bytes are not its array as they lie (complex, bfloat16), the array of its bytes read in."""
    from onnx import TensorProto, numpy_helper

    location, offset, length = _reference(t)
    if t.data_type in MAPPABLE_TYPES:
        return map_file(location, offset, length, dtype, tuple(t.dims))
    copy = TensorProto()
    copy.CopyFrom(t)
    _read_bytes(copy, Path(location), offset, length)
    return numpy_helper.to_array(copy)


def external_references(proto) -> list[tuple[str, int, int]]:
    """(file, offset, length) of each mapped tensor of `proto`, in the model's order."""
    return [_reference(t) for t in _external_tensors(proto) if is_mapped(t)]


def _reference(t) -> tuple[str, int, int]:
    info = {e.key: e.value for e in t.external_data}
    return info["location"], int(info["offset"]), int(info["length"])


def _mark_mapped(t, real: Path, offset: int, length: int) -> None:
    del t.external_data[:]
    for key, value in (("location", str(real)), ("offset", str(offset)), ("length", str(length)), (_MAPPED, "1")):
        entry = t.external_data.add()
        entry.key, entry.value = key, value


def _external_tensors(proto) -> list:
    """Every tensor of the model whose data lives in another file: initializers and node attributes, in the
    main graph, its subgraphs and the model's functions."""
    from onnx import TensorProto

    found = []

    def graph(g):
        for t in g.initializer:
            tensor(t)
        for s in g.sparse_initializer:
            tensor(s.values)
            tensor(s.indices)
        nodes(g.node)

    def nodes(ns):
        for n in ns:
            for a in n.attribute:
                if a.HasField("t"):
                    tensor(a.t)
                for t in a.tensors:
                    tensor(t)
                if a.HasField("g"):
                    graph(a.g)
                for g in a.graphs:
                    graph(g)

    def tensor(t):
        if t.data_location == TensorProto.EXTERNAL:
            found.append(t)

    graph(proto.graph)
    for f in proto.functions:
        nodes(f.node)
    return found


def _checked_reference(t, base: Path, where: str) -> tuple[Path, int, int]:
    """(file, offset, length) of tensor `t`'s external data, a file inside `base` whose bytes fit its type."""
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")
    what = f"{where}: tensor {t.name!r}"
    if not location:
        raise ModelFormatError(f"{what} is marked as external data but names no file")
    if _leaves_directory(location):
        raise ModelFormatError(f"{what} reads its data from {location!r}, outside the model's directory; "
                               f"external data must be a file beside the model (refused: a model may not read "
                               f"other files)")
    path = base / location
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(base):
        raise ModelFormatError(f"{what} reads its data from {location!r}, a link to {real}, outside the model's "
                               f"directory {base}; external data must be a file beside the model")
    if not real.is_file():
        raise ModelFormatError(f"{what} reads its data from {location!r}, but there is no such file in {base}")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise ModelFormatError(f"{what}: external data offset {info.get('offset')!r} or length "
                               f"{info.get('length')!r} is not an integer") from None
    size = real.stat().st_size
    expected = _expected_bytes(t)
    if length is None:
        length = expected if expected is not None else size - offset
    if offset < 0 or length < 0 or offset + length > size:
        raise ModelFormatError(f"{what} reads bytes {offset} to {offset + length} of {location!r}, which has "
                               f"{size} bytes")
    if expected is not None and length != expected:
        raise ModelFormatError(f"{what} of shape {list(t.dims)} needs {expected} bytes of external data, but its "
                               f"length is {length}")
    return real, offset, length


def _read_bytes(t, real: Path, offset: int, length: int) -> None:
    """Replace tensor `t`'s external reference by its bytes."""
    from onnx import TensorProto

    with open(real, "rb") as f:
        f.seek(offset)
        t.raw_data = f.read(length)
    del t.external_data[:]
    t.data_location = TensorProto.DEFAULT


def _leaves_directory(location: str) -> bool:
    """True for a location that is absolute or climbs out (`..`), read as a POSIX or a Windows path."""
    for pure in (PurePosixPath(location), PureWindowsPath(location)):
        if pure.is_absolute() or pure.anchor or ".." in pure.parts:
            return True
    return False


def _expected_bytes(t) -> int | None:
    """The bytes a tensor of whole-byte elements holds, or None for strings and packed 4-bit types."""
    import math

    from onnx import helper

    if t.data_type not in WHOLE_BYTE_TYPES or any(d < 0 for d in t.dims):
        return None
    return math.prod(t.dims) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize


# TensorProto element types stored in a whole number of bytes per element (FLOAT, UINT8, INT8, UINT16, INT16,
# INT32, INT64, BOOL, FLOAT16, DOUBLE, UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16)
WHOLE_BYTE_TYPES = frozenset(range(1, 17)) - {8}
# Those whose bytes are their NumPy array as they lie (not complex or bfloat16, which are converted): mappable.
MAPPABLE_TYPES = frozenset(range(1, 14)) - {8}
