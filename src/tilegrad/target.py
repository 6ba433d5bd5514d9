"""The machine code is generated for, described once: ISA, vector width, cores and caches.

The layout pass sizes channel blocks from it, the schedule rules size vectors and parallel work from it, the
renderers read their capabilities from it, and the build cache and the tuning records name the machine with its
`identity` (code built with `-march=native` on one machine may not run on another).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Target:
    kind: str = "cpu"
    model: str = ""  # the CPU's model name
    vendor: str = ""  # the CPU's vendor id (GenuineIntel, AuthenticAMD, ...), where a rule differs by microarchitecture
    flags: frozenset[str] = frozenset()  # ISA extensions (avx2, avx512f, fma, neon, ...)
    vector_bits: int = 256  # the widest vector register the generated code uses
    cores: int = 1
    cache_line_bytes: int = 64
    l1d_bytes: int = 32 * 1024
    l1d_ways: int = 8  # associativity: lines l1d_bytes / l1d_ways apart share a set
    l2_bytes: int = 512 * 1024
    l3_bytes: int = 16 * 1024 * 1024
    min_parallel_work: int = 1 << 14  # elements below which threads cost more than they give
    # GPU targets (kind "cuda"): the architecture PTX is compiled for, multiprocessors, and per-block limits (which
    # the GPU sketch's candidates are checked against); l2_bytes is the device's L2, which timing flushes
    arch: str = ""
    sm_count: int = 0
    warp_size: int = 32
    max_threads_per_block: int = 1024
    shared_bytes_per_block: int = 48 * 1024
    registers_per_thread: int = 255
    registers_per_block: int = 64 * 1024

    @property
    def vector_lanes(self) -> int:
        """float32 lanes of the widest vector."""
        return self.vector_bits // 32

    @property
    def vector_registers(self) -> int:
        """The vector registers code for this target has: 32 with AVX-512 or NEON, else 16."""
        return 32 if self.vector_lanes >= 16 or {"neon", "asimd"} & self.flags else 16

    @property
    def isa(self) -> str:
        """The widest vector extension, for reports: avx512, avx2, neon or scalar."""
        if "avx512f" in self.flags:
            return "avx512"
        if "avx2" in self.flags:
            return "avx2"
        return "neon" if {"neon", "asimd"} & self.flags else "scalar"

    @property
    def int8_dot(self) -> str:
        """The u8 x s8 dot product (four byte products into each int32 lane) the int8 kernels use: "avx512_vnni"
        (vpdpbusd on zmm/ymm), "avx_vnni" (its VEX form), "avx2" (vpmaddubsw for 7-bit weights; for 8-bit ones,
        whose int16 pair sums it would saturate, an exact emulation with the bytes widened to 16 bits and paired
        by vpmaddwd), or "scalar" (docs/quantization.md)."""
        for flag in ("avx512_vnni", "avx_vnni", "avx2"):
            if flag in self.flags:
                return flag
        return "scalar"

    def identity(self) -> str:
        """Model and ISA: what tells one machine's native code and timings from another's."""
        if self.arch:  # a GPU: its kind and architecture
            return "\n".join([self.kind, self.model, self.arch])
        return "\n".join([platform.machine(), self.model, " ".join(sorted(self.flags))])

    @staticmethod
    def with_lanes(lanes: int) -> Target:
        """A CPU whose widest vector holds `lanes` float32s (tests and what-if schedules)."""
        return Target(vector_bits=32 * lanes)


@functools.lru_cache(maxsize=1)
def host() -> Target:
    """This machine, read from /proc/cpuinfo and sysfs; defaults where they are absent."""
    model, vendor, flags = _cpuinfo()
    vector_bits = 512 if "avx512f" in flags else 256 if "avx2" in flags else 128
    caches = _cache_sizes()
    return Target(model=model, vendor=vendor, flags=flags, vector_bits=vector_bits, cores=os.cpu_count() or 1,
                  cache_line_bytes=caches.get("line", 64), l1d_bytes=caches.get("L1d", 32 * 1024),
                  l1d_ways=caches.get("L1d_ways", 8),
                  l2_bytes=caches.get("L2", 512 * 1024), l3_bytes=caches.get("L3", 16 * 1024 * 1024))


# GPUs by architecture, for compiling where no device is present: sm_90 is the H100 and H200.
GPUS = {
    "sm_80": Target(kind="cuda", model="NVIDIA A100", arch="sm_80", sm_count=108, vector_bits=128,
                    l2_bytes=40 * 1024 * 1024),
    "sm_90": Target(kind="cuda", model="NVIDIA H100", arch="sm_90", sm_count=132, vector_bits=128,
                    l2_bytes=50 * 1024 * 1024),
}


@functools.lru_cache(maxsize=1)
def cuda() -> Target:
    """The first CUDA device, read from the driver (cuda-python, the `cuda` extra); where the driver or a device is
    absent, the sm_90 default (H100/H200), so that kernels still compile to PTX."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return GPUS["sm_90"]
    try:
        initialised = driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS
    except RuntimeError:  # no driver library (libcuda) on this machine
        initialised = False
    if not initialised:
        return GPUS["sm_90"]
    err, dev = driver.cuDeviceGet(0)
    if err != driver.CUresult.CUDA_SUCCESS:
        return GPUS["sm_90"]

    def attribute(name: str) -> int:
        return driver.cuDeviceGetAttribute(getattr(driver.CUdevice_attribute, name), dev)[1]

    name = driver.cuDeviceGetName(256, dev)[1].split(b"\0")[0].decode()
    major = attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
    minor = attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
    return Target(kind="cuda", model=name, arch=f"sm_{major}{minor}", vector_bits=128,
                  sm_count=attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                  warp_size=attribute("CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
                  max_threads_per_block=attribute("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
                  shared_bytes_per_block=attribute("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
                  registers_per_block=attribute("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
                  l2_bytes=attribute("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"))


# The targets `tilegrad.compile(..., target=NAME)` accepts.
TARGETS = {"cpu": host, "cuda": cuda}


def _cpuinfo() -> tuple[str, str, frozenset[str]]:
    model, vendor, flags = "", "", frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = frozenset(value.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), vendor, flags


def _cache_sizes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[str, int]:
    """Per-core cache sizes in bytes from sysfs (cpu0), keyed L1d, L2, L3, the line size and the L1 data cache's
    ways (L1d_ways)."""
    sizes: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _bytes((index / "size").read_text().strip())
            line = int((index / "coherency_line_size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified"):
            sizes[f"L{level}" + ("d" if level == "1" else "")] = size
            sizes.setdefault("line", line)
            if level == "1":
                sizes.update(_ways(index))
    return sizes


def _ways(index: Path) -> dict[str, int]:
    try:
        ways = int((index / "ways_of_associativity").read_text().strip())
    except (OSError, ValueError):
        return {}
    return {"L1d_ways": ways} if ways > 0 else {}


def _bytes(text: str) -> int:
    units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
