"""CUDA C++ to PTX with NVRTC, each source compiled once: the GPU counterpart of `build.py`.

NVRTC needs no GPU, so every CUDA kernel is compiled here on any machine (CI included) and a syntax or type
error fails there, not on a device. The library comes from CUDA 12's `nvidia-cuda-nvrtc-cu12` wheel (the `cuda`
extra) or CUDA 13's `nvidia-cuda-nvrtc` (`cuda13`), found through their package directories, else on the
loader's path. PTX lives in the build cache at `<key[:2]>/<key>.ptx`, the key hashing the source, the options and
NVRTC's version, written under the key's lock and renamed into place as libraries are.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
from pathlib import Path

from .. import config, metrics
from ..config import Config
from ..errors import BuildError
from .build import cached, write_into_place

_INSTALL_HINT = "install NVRTC with `pip install tilegrad[cuda]` (the nvidia-cuda-nvrtc-cu12 wheel)"
_SUCCESS = 0


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib
    raise BuildError(f"NVRTC (libnvrtc.so.12 or .13) not found: {_INSTALL_HINT}")


def _candidates() -> list[str]:
    """The wheels' libraries first, newest CUDA first (CUDA 12's wheel keeps it in `nvidia/cuda_nvrtc/lib`, CUDA
    13's in `nvidia/cu13/lib`), then the system's."""
    found = []
    try:
        import nvidia  # a namespace package: no __file__, a __path__
        for root in nvidia.__path__:
            found += [str(p) for p in Path(root).glob("*/lib/libnvrtc.so*") if "alt" not in p.name]
    except ImportError:
        pass
    found.sort(key=_soname_version, reverse=True)
    system = ctypes.util.find_library("nvrtc")
    return found + ([system] if system else []) + ["libnvrtc.so.13", "libnvrtc.so.12"]


def _soname_version(path: str) -> tuple[int, ...]:
    """`.../libnvrtc.so.13` -> (13,); the unversioned link sorts last."""
    tail = path.rsplit(".so", 1)[1].lstrip(".")
    return tuple(int(p) for p in tail.split(".") if p.isdigit()) if tail else ()


@functools.lru_cache(maxsize=1)
def version() -> str:
    """NVRTC's version, "12.9"; part of the cache key."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return f"{major.value}.{minor.value}"


def options(arch: str) -> list[str]:
    """NVRTC's options for a virtual architecture: PTX that the driver compiles for `arch` ("sm_90") or newer."""
    return [f"--gpu-architecture=compute_{arch.removeprefix('sm_')}", "--std=c++17", "-default-device"]


def compile_ptx(source: str, arch: str, *, name: str = "kernels.cu", cfg: Config | None = None) -> str:
    """The PTX of CUDA `source` for `arch`, compiled by NVRTC or found in the cache. A compile error is a
    BuildError with NVRTC's log, which names the kernel and line."""
    cfg = cfg or config.get()
    opts = options(arch)
    key = hashlib.sha256("\0".join([source, *opts, version()]).encode()).hexdigest()

    def produce(stem: Path, ptx: Path) -> None:
        stem.with_suffix(".cu").write_text(source)
        write_into_place(_compile(source, opts, name), ptx)

    path = cached(key, cfg, produce, suffix=".ptx")
    return path.read_text()


def _compile(source: str, opts: list[str], name: str) -> str:
    lib = _library()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        args = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        status = lib.nvrtcCompileProgram(prog, len(opts), args)
        if status != _SUCCESS:
            raise BuildError(f"NVRTC failed on {name} ({lib.nvrtcGetErrorString(status).decode()}), options "
                             f"{' '.join(opts)}:\n{_log(lib, prog)}")
        size = ctypes.c_size_t()
        _check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        ptx = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
        metrics.bump("build.nvrtc_compiled")
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _log(lib: ctypes.CDLL, prog: ctypes.c_void_p) -> str:
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    text = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, text)
    return text.value.decode(errors="replace").strip()


def _check(status: int, call: str) -> None:
    if status != _SUCCESS:
        raise BuildError(f"{call} failed: {_library().nvrtcGetErrorString(status).decode()}")
