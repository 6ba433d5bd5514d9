"""A compiled model on a CUDA device: PTX loaded with the driver API (cuda-python), kernels launched in order.

The weights are copied to the device once, when the module is made, and the intermediates live in one device
allocation laid out by the static memory plan; a call copies only the inputs in and the outputs out. Each kernel
call names its buffers as slots: an input, an output, a weight, or an offset into the workspace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..errors import BuildError, KernelCallError
from .kernel import BufferSpec
from .slots import Copy, Slot

_INSTALL_HINT = "install the driver API bindings with `pip install tilegrad[cuda]` (cuda-bindings)"


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    """One kernel launch: the function's name in the PTX, its grid and block, and its arguments."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Slot, ...]


@dataclasses.dataclass(frozen=True)
class CudaSpec:
    """A CUDA module's boundary, as `Module.spec` gives a native one's."""

    inputs: tuple[BufferSpec, ...]
    outputs: tuple[BufferSpec, ...]


def driver_api():
    """cuda-bindings' driver API module; a BuildError saying how to install it where it is absent."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise BuildError(f"the CUDA driver API bindings are not installed: {_INSTALL_HINT}") from e
    return driver


def check_call(result, call: str):
    """The values after a driver call's status; a BuildError naming the call where it failed."""
    driver = driver_api()
    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        name = driver.cuGetErrorName(status)[1]
        raise BuildError(f"{call} failed: {name.decode() if isinstance(name, bytes) else name}")
    return values[0] if len(values) == 1 else values


def device_present() -> bool:
    """Whether the driver is installed and sees at least one CUDA device."""
    try:
        driver = driver_api()
    except BuildError:
        return False
    try:
        if driver.cuInit(0)[0] != driver.CUresult.CUDA_SUCCESS:
            return False
    except RuntimeError:  # no driver library (libcuda) on this machine
        return False
    status, count = driver.cuDeviceGetCount()
    return status == driver.CUresult.CUDA_SUCCESS and count > 0


class CudaModule:
    """A model's kernels on device 0, called with NumPy arrays like a native `Module`."""

    def __init__(self, ptx: str, launches: Sequence[KernelLaunch], inputs: Sequence[BufferSpec],
                 outputs: Sequence[BufferSpec], weights: Sequence[np.ndarray], workspace_bytes: int,
                 copies: Sequence[Copy] = ()):
        driver = driver_api()
        if not device_present():
            raise BuildError("no CUDA device: the driver library or a GPU is missing (kernels still compile to PTX "
                             "without one: tilegrad compile --target cuda, or tilegrad.api.cuda_source)")
        self._device = check_call(driver.cuDeviceGet(0), "cuDeviceGet")
        self._context = check_call(driver.cuDevicePrimaryCtxRetain(self._device), "cuDevicePrimaryCtxRetain")
        check_call(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        self._module = check_call(driver.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")
        self.launches = tuple(launches)
        self._functions = {c.name: check_call(driver.cuModuleGetFunction(self._module, c.name.encode()),
                                          f"cuModuleGetFunction({c.name})") for c in self.launches}
        self.inputs, self.outputs, self.copies = tuple(inputs), tuple(outputs), tuple(copies)
        self.spec = CudaSpec(self.inputs, self.outputs)
        self.output_names = [s.name for s in self.outputs]
        self._allocations = []
        self._in = [self._alloc(s.nbytes) for s in self.inputs]
        self._out = [self._alloc(s.nbytes) for s in self.outputs]
        self._weights = []
        for w in weights:
            w = np.ascontiguousarray(w)
            ptr = self._alloc(w.nbytes)
            if w.nbytes:
                check_call(driver.cuMemcpyHtoD(ptr, w.ctypes.data, w.nbytes), "cuMemcpyHtoD(weight)")
            self._weights.append(ptr)
        self._workspace = self._alloc(workspace_bytes)  # the static memory plan: one allocation

    def _alloc(self, nbytes: int) -> int:
        ptr = int(check_call(driver_api().cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))
        self._allocations.append(ptr)
        return ptr

    def _address(self, slot: Slot) -> int:
        if slot.kind == "workspace":
            return self._workspace + slot.index
        return {"input": self._in, "output": self._out, "weight": self._weights}[slot.kind][slot.index]

    def _copy_in(self, args: Sequence[np.ndarray], kwargs: dict) -> None:
        """The inputs, checked against the spec, copied to their device buffers."""
        driver = driver_api()
        check_call(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        names = [s.name for s in self.inputs]
        unknown = sorted(set(kwargs) - set(names[len(args):]))
        if unknown or len(args) + len(kwargs) != len(names):
            raise KernelCallError(f"expected the inputs {', '.join(names)}; got {len(args)} positional and "
                                  f"{', '.join(kwargs) or 'no'} named ones")
        arrays = list(args) + [kwargs[n] for n in names[len(args):]]
        for spec, ptr, a in zip(self.inputs, self._in, arrays):
            a = np.ascontiguousarray(a)
            if a.shape != spec.shape or a.dtype != np.dtype(spec.dtype):
                raise KernelCallError(f"input {spec.name!r}: expected {spec.dtype}{list(spec.shape)}, "
                                      f"got {a.dtype}{list(a.shape)}")
            if a.nbytes:
                check_call(driver.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), f"cuMemcpyHtoD({spec.name})")

    def kernel_times(self, *args: np.ndarray, repeats: int = 10, **kwargs: np.ndarray) -> list[tuple[str, float]]:
        """Each launch's device time on these inputs, in seconds: the median of `repeats` runs of the whole
        sequence, each launch between two CUDA events (no cache flush: what a call's kernels see)."""
        driver = driver_api()
        self._copy_in(args, kwargs)
        events = [check_call(driver.cuEventCreate(0), "cuEventCreate") for _ in range(len(self.launches) + 1)]
        try:
            runs = []
            for _ in range(repeats):
                check_call(driver.cuEventRecord(events[0], 0), "cuEventRecord")
                for c, after in zip(self.launches, events[1:]):
                    self._launch(c)
                    check_call(driver.cuEventRecord(after, 0), "cuEventRecord")
                check_call(driver.cuEventSynchronize(events[-1]), "cuEventSynchronize")
                runs.append([1e-3 * float(check_call(driver.cuEventElapsedTime(a, b), "cuEventElapsedTime"))
                             for a, b in zip(events, events[1:])])
        finally:
            for e in events:
                driver.cuEventDestroy(e)
        return [(c.name, float(np.median([r[i] for r in runs]))) for i, c in enumerate(self.launches)]

    def __call__(self, *args: np.ndarray, **kwargs: np.ndarray):
        """The outputs for these inputs (positional, or by name): one array, or a list of them."""
        driver = driver_api()
        self._copy_in(args, kwargs)
        for c in self.launches:
            self._launch(c)
        for c in self.copies:
            check_call(driver.cuMemcpyDtoD(self._out[c.output], self._address(c.source), c.nbytes), "cuMemcpyDtoD")
        check_call(driver.cuCtxSynchronize(), "cuCtxSynchronize")
        outs = []
        for spec, ptr in zip(self.outputs, self._out):
            host = np.empty(spec.shape, np.dtype(spec.dtype))
            if host.nbytes:
                check_call(driver.cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes), f"cuMemcpyDtoH({spec.name})")
            outs.append(host)
        return outs[0] if len(outs) == 1 else outs

    def _launch(self, c: KernelLaunch) -> None:
        # kernelParams is an array of pointers, each to one argument's value (here a device address)
        values = np.array([self._address(s) for s in c.args], dtype=np.uint64)
        pointers = np.array([values.ctypes.data + 8 * i for i in range(len(values))], dtype=np.uint64)
        check_call(driver_api().cuLaunchKernel(self._functions[c.name], *c.grid, *c.block, 0, 0,
                                               pointers.ctypes.data, 0), f"cuLaunchKernel({c.name})")

    def close(self) -> None:
        """Free the device memory and unload the kernels (also done when the module is collected)."""
        driver = driver_api()
        for ptr in self._allocations:
            driver.cuMemFree(ptr)
        self._allocations = []
        if self._module is not None:
            driver.cuModuleUnload(self._module)
            self._module = None
            driver.cuDevicePrimaryCtxRelease(self._device)

    def __del__(self) -> None:
        if getattr(self, "_module", None) is not None:
            self.close()
