"""Loading a compiled kernel and calling it with NumPy arrays.

The kernel ABI is `void NAME(void** args)`: args[i] is the data pointer of buffer i, shapes are compiled in. A
kernel therefore cannot check its arguments, so `Kernel.__call__` does, and says which parameter is wrong.

Threads: every call goes through `tg_call`, which calls `omp_set_num_threads(cfg.num_threads)` on the calling
thread before the kernel: the library's own (every generated library defines one, `codegen/c.py`, so a saved
module loads without a C compiler), else, for a hand-written kernel, a tiny trampoline built once per
configuration with the kernel's compiler and flags, so that it shares the kernel's OpenMP runtime. Setting
OMP_NUM_THREADS instead would only work before the OpenMP runtime is first loaded (which NumPy, PyTorch or an
earlier kernel may already have done) and could not follow `config.override`.
"""

from __future__ import annotations

import _ctypes
import ctypes
import math
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np

from .. import config
from ..config import Config
from ..dtype import BUFFER_DTYPES, is_float
from ..errors import BuildError, KernelCallError, ShapeError
from .build import build
from .dims import Extent

_ALIGNMENT = 64  # bytes: a cache line, and the widest vector (AVX-512)
_GOMP_SPINS_PER_US = 100  # libgomp's own estimate: its default, 300000 spins, is "3 ms"
_PAGE = 4096

_TRAMPOLINE = r"""
#ifdef _OPENMP
#include <omp.h>
#endif
typedef void (*tg_kernel)(void **);

void tg_call(tg_kernel fn, void **args, int num_threads) {
#ifdef _OPENMP
    if (omp_get_max_threads() != num_threads) omp_set_num_threads(num_threads);
#endif
    fn(args);
}
"""

_libraries: dict[str, ctypes.CDLL] = {}  # the harnesses' and the trampolines': loaded once per path, kept
_held: weakref.WeakValueDictionary[str, _HeldLibrary] = weakref.WeakValueDictionary()  # kernels' libraries


@dataclass(frozen=True)
class BufferSpec:
    """One kernel parameter: a dense C-contiguous buffer of a shape and dtype; the shape of a module's input or
    output may hold extents of its dynamic dimensions (`dims.py`), known at each call."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in BUFFER_DTYPES:
            raise ShapeError(f"buffer {self.name!r}: dtype {self.dtype!r} is not one of {', '.join(BUFFER_DTYPES)}")
        if not isinstance(self.shape, tuple) or any(not isinstance(d, Extent) and (not isinstance(d, int) or d < 0)
                                                    for d in self.shape):
            raise ShapeError(f"buffer {self.name!r}: shape must be a tuple of non-negative ints (or extents of dynamic "
                             f"dimensions), got {self.shape!r}")

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def describe(self) -> str:
        """`(64, 32) float32`: how error messages name what a parameter expects."""
        return f"{self.shape} {self.dtype}"


def set_wait_policy(cfg: Config) -> None:
    """Idle OpenMP threads spin `cfg.spin_us` before they sleep, unless the environment already chose (libgomp's
    OMP_WAIT_POLICY or GOMP_SPINCOUNT). libgomp reads this once, when it loads with the first kernel."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", str(cfg.spin_us * _GOMP_SPINS_PER_US))  # gcc's libgomp


def load_library(path: Path) -> ctypes.CDLL:
    """The library at `path`, loaded on first use and kept for the process (harnesses, trampolines)."""
    key = str(Path(path).resolve())
    lib = _libraries.get(key)
    if lib is None:
        lib = _libraries[key] = _dlopen(key)
    return lib


class _HeldLibrary:
    """A kernel library loaded for the kernels that hold it and closed when the last of them is gone, so that a
    process compiling many modules (a dynamic module's evicted specialisations, a tuner's candidates) keeps the
    libraries of the live ones only. Closing is safe: a kernel held is a kernel that may run, and one that ran
    has returned, its OpenMP workers back in the OpenMP runtime's own code, which stays loaded
    (`_pin_openmp_runtime`). Closing frees the buffers its kernels keep between calls (`codegen/c.py`, KEPT).
    At exit nothing is closed: a daemon thread may still be running a kernel, and the process's end frees it all."""

    def __init__(self, key: str):
        self.cdll = _dlopen(key)
        _pin_openmp_runtime()
        release = getattr(self.cdll, "tg_release_on_unload", None)  # absent from libraries of other renderers
        weakref.finalize(self, _close, self.cdll._handle, release).atexit = False


OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so")  # gcc's, clang's, Intel's


def _pin_openmp_runtime() -> None:
    """Keep loaded for the process every OpenMP runtime a kernel library brought in: its idle worker threads wait
    in its code, and closing the last library that uses it would unload it under them."""
    for soname in OPENMP_RUNTIMES:
        if soname not in _libraries:
            try:
                _libraries[soname] = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            except OSError:  # not loaded (yet): a later library that loads it pins it then
                pass


def _close(handle: int, release) -> None:
    if release is not None:
        release()
    _ctypes.dlclose(handle)


def _hold(path: Path) -> _HeldLibrary:
    key = str(Path(path).resolve())
    held = _held.get(key)
    if held is None:
        held = _held[key] = _HeldLibrary(key)
    return held


def _dlopen(key: str) -> ctypes.CDLL:
    if not _libraries and not _held:
        set_wait_policy(config.get())
    try:
        return ctypes.CDLL(key)
    except OSError as e:
        raise BuildError(f"cannot load kernel library {key}: {e}") from e


def kernel_address(library: Path, name: str) -> int:
    """The address of kernel `name` in the library at `library`, loaded for the process (a timing worker's)."""
    return _address(load_library(library), library, name)


def _address(lib: ctypes.CDLL, library: Path, name: str) -> int:
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise BuildError(
            f"library {library} defines no kernel {name!r}; was it built from the source that defines it?"
        ) from None
    return ctypes.cast(fn, ctypes.c_void_p).value


class Kernel:
    """A compiled kernel that checks its arguments; call it with one NumPy array per parameter."""

    def __init__(self, library: Path, name: str, params: Sequence[BufferSpec], *, cfg: Config | None = None):
        cfg = cfg or config.get()
        self.cfg = cfg  # timing builds its harness with the same compiler, hence the same OpenMP runtime
        self.library = Path(library)
        self.name = name
        self.params = tuple(params)
        self.num_threads = cfg.num_threads
        self._held = _hold(self.library)  # the library stays loaded while this kernel lives
        self.function_address = _address(self._held.cdll, self.library, name)
        self._dtypes = tuple(np.dtype(p.dtype) for p in self.params)
        self._pointers = ctypes.c_void_p * len(self.params)
        self._call = _caller(self._held.cdll, cfg)
        self._fn = ctypes.c_void_p(self.function_address)
        self._threads = ctypes.c_int(cfg.num_threads)

    def __repr__(self) -> str:
        params = ", ".join(f"{p.name}: {p.describe()}" for p in self.params)
        return f"Kernel({self.name}({params}) from {self.library})"

    def __call__(self, *arrays: np.ndarray) -> None:
        self.run(self.pack(arrays))

    def run(self, pointers: ctypes.Array) -> None:
        """Call the kernel on `pointers` (as `pack` returns them, or an array of `pointer_array` its caller filled
        with the addresses of arrays it has checked itself): what a caller that checks once pays per call."""
        self._call(self._fn, pointers, self._threads)

    def pointer_array(self) -> ctypes.Array:
        """A `void*` array of one null pointer per parameter, to be filled with `address` and passed to `run`."""
        return self._pointers()

    def pack(self, arrays: Sequence[np.ndarray]) -> ctypes.Array:
        """Check `arrays` against the parameters and return the `void*` array the kernel takes.

        The result holds the arrays' addresses only: keep the arrays alive while it is in use.
        """
        self.check(arrays)
        return self._pointers(*map(address, arrays))

    def check(self, arrays: Sequence[np.ndarray]) -> None:
        """Raise KernelCallError naming the first parameter that `arrays` does not fit."""
        if len(arrays) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise KernelCallError(
                f"kernel {self.name!r} takes {len(self.params)} arrays ({names}), got {len(arrays)}"
            )
        for a, spec, dtype in zip(arrays, self.params, self._dtypes):
            if not isinstance(a, np.ndarray):
                self._fail(spec, f"expected a numpy.ndarray of {spec.describe()}, got {type(a).__name__}")
            if not _fits(a.shape, spec.shape) or a.dtype != dtype:
                self._fail(spec, f"expected shape {spec.describe()}, got {a.shape} {a.dtype}")
            if not a.flags.c_contiguous:
                self._fail(spec, f"array {spec.describe()} is not C-contiguous; pass np.ascontiguousarray(x)")

    def _fail(self, spec: BufferSpec, problem: str) -> NoReturn:
        raise KernelCallError(f"kernel {self.name!r}, parameter {spec.name!r}: {problem}")


def _fits(shape: tuple[int, ...], spec: tuple) -> bool:
    """Whether an array's shape fits a parameter's; an extent of dynamic dimensions fits any length (the module
    checks it against the others, `dims.bind`)."""
    return shape == spec or (len(shape) == len(spec) and all(isinstance(d, Extent) or n == d
                                                              for n, d in zip(shape, spec)))


def _caller(lib: ctypes.CDLL, cfg: Config) -> ctypes._CFuncPtr:
    """The `tg_call` that runs the kernels of `lib`: its own, else the trampoline built for `cfg`."""
    fn = getattr(lib, "tg_call", None) or load_library(build(_TRAMPOLINE, cfg=cfg)).tg_call
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    fn.restype = None
    return fn


def address(a: np.ndarray) -> int:
    """The data pointer of `a`; `from_buffer` is cheaper than `a.ctypes.data` but needs a writable array."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only or empty
        return a.__array_interface__["data"][0]


def random_arguments(
    params: Sequence[BufferSpec], rng: np.random.Generator, page_offsets: Sequence[int] | None = None
) -> list[np.ndarray]:
    """One 64-byte-aligned array per parameter, for timing and tuning.

    Floats are uniform in [-1, 1) before rounding to the dtype, ints in [0, 8), bools fair. Ints are small and
    non-negative so that index buffers stay in range. `page_offsets` (multiples of 64 below 4096) places each array
    that far into a page: a kernel's speed can depend on how its buffers sit relative to each other (shared L1
    sets, 4 KiB aliasing), so the timing worker measures at several fixed placements (`placements`).
    """
    offsets = page_offsets if page_offsets is not None else [None] * len(params)
    if len(offsets) != len(params) or any(o is not None and (not 0 <= o < _PAGE or o % _ALIGNMENT) for o in offsets):
        raise ValueError(f"need one page offset per parameter ({len(params)}), each a multiple of {_ALIGNMENT} "
                         f"below {_PAGE}; got {list(offsets)}")
    arrays = []
    for spec, offset in zip(params, offsets):
        out = _aligned_empty(spec.shape, np.dtype(spec.dtype), offset)
        if is_float(spec.dtype):
            out[...] = rng.uniform(-1.0, 1.0, spec.shape)
        elif out.dtype.kind == "b":
            out[...] = rng.random(spec.shape) < 0.5
        else:
            out[...] = rng.integers(0, 8, spec.shape)
        arrays.append(out)
    return arrays


def placements(n: int, count: int) -> list[list[int]]:
    """`count` fixed placements of `n` buffers (page offsets, multiples of 64): the same in every process, so
    timings taken by different timing workers are comparable."""
    rng = np.random.default_rng(0x9A6E)
    return [[int(o) for o in rng.integers(0, _PAGE // _ALIGNMENT, n) * _ALIGNMENT] for _ in range(count)]


def _aligned_empty(shape: tuple[int, ...], dtype: np.dtype, page_offset: int | None = None) -> np.ndarray:
    nbytes = math.prod(shape) * dtype.itemsize
    if page_offset is None:
        raw = np.empty(nbytes + _ALIGNMENT, dtype=np.uint8)
        start = -raw.ctypes.data % _ALIGNMENT
    else:
        raw = np.empty(nbytes + _PAGE + page_offset, dtype=np.uint8)
        start = -raw.ctypes.data % _PAGE + page_offset
    return raw[start : start + nbytes].view(dtype).reshape(shape)
