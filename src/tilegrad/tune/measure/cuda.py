"""Measuring candidates on a CUDA device: `CudaBuilder` (NVRTC to PTX, no device needed) and `CudaRunner` (the
driver API through cuda-bindings; needs a device).

The builder lowers each trace as the CPU builder does, renders it as CUDA (the renderer checks races and the
target's thread and shared-memory limits) and compiles it to PTX in this process: NVRTC needs no compiler process
and caches by source hash. `Built.library` is then the PTX file and `Built.launch` the grid and block.

The runner loads the PTX, copies the task's random inputs to the device once per task and times each candidate
with CUDA events around each launch: `warmup` launches, then `repeats` timed ones, each after writing a buffer
twice the device's L2 (`CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE`), so that no repeat finds the previous one's data in
L2. A checked candidate's outputs are copied back and compared with the task's NumPy reference. Driver errors
(a launch that fails, an illegal address) are the candidate's failure, `MeasureResult(error_kind="run")`; the
runner then makes a fresh context, as a faulted one is unusable.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...errors import BuildError, MeasureError
from ...kernel import build_sources, lower_kernel, renderer_for
from ...target import Target
from ..task import Task
from .result import KERNEL_NAME, Built, MeasureInput, MeasureResult
from .runner import mismatch, run_each

L2_FLUSH_FACTOR = 2  # the flush buffer is this many times the L2


def require_device() -> None:
    """Raise a MeasureError saying why, where no CUDA device can time kernels."""
    from ...runtime.cuda import device_present

    if not device_present():
        raise MeasureError("no CUDA device: the driver library (libcuda) or a GPU is missing, so GPU kernels cannot "
                           "be timed; tuning for --target cuda needs one (compiling to PTX does not)")


class CudaBuilder:
    """Candidates of GPU tasks lowered, rendered as CUDA and compiled to PTX by NVRTC, in this process."""

    def __init__(self, target: Target):
        self.target = target
        self._dir = tempfile.TemporaryDirectory(prefix="tilegrad-cuda-build-")
        self._built: dict[tuple, Built] = {}

    def build(self, inputs: Sequence[MeasureInput]) -> list[Built | MeasureResult]:
        return [self._build_one(inp) for inp in inputs]

    def close(self) -> None:
        self._dir.cleanup()

    def _build_one(self, inp: MeasureInput) -> Built | MeasureResult:
        key = (inp.task.key, inp.trace.to_json(), inp.source_override)
        if key in self._built:
            return Built(self._built[key].library, self._built[key].params, 0.0, self._built[key].launch)
        start = time.perf_counter()
        try:
            kernel = lower_kernel(inp.task.node, inp.trace, name=KERNEL_NAME)
            renderer = renderer_for(self.target)  # a GPU's: it checks races and the target's limits
            source, launch = renderer.render(kernel), renderer.launch(kernel)
            source = inp.source_override or source
        except Exception as e:  # noqa: BLE001 - any failure to replay, lower or render is this candidate's failure
            return MeasureResult((), "lower", f"{type(e).__name__}: {e}", time.perf_counter() - start)
        try:
            ptx = build_sources([source], self.target)
        except BuildError as e:
            return MeasureResult((), "build", str(e), time.perf_counter() - start)
        path = Path(self._dir.name) / f"{len(self._built)}.ptx"
        path.write_text(ptx)
        params = [[b.name, [int(d.value) for d in b.shape], b.dtype] for b in kernel.params]
        built = self._built[key] = Built(str(path), params, time.perf_counter() - start, (launch.grid, launch.block))
        return built


class CudaRunner:
    """Times PTX candidates on device 0 with CUDA events, flushing L2 before each repeat (module doc)."""

    def __init__(self, *, repeats: int = 5, warmup: int = 2, seed: int = 0):
        require_device()
        if repeats < 1 or warmup < 0:
            raise ValueError(f"need repeats >= 1 and warmup >= 0; got {repeats}, {warmup}")
        self.repeats, self.warmup, self.seed = repeats, warmup, seed
        self._device = _Device()
        self._inputs: dict[str, list[np.ndarray]] = {}
        self._references: dict[str, list[np.ndarray]] = {}

    def prepare(self, task: Task) -> None:
        self._reference(task)

    def run_all(self, jobs: Sequence[tuple[MeasureInput, Built, bool]],
                on_result: Callable[[int, MeasureResult], None] | None = None) -> list[MeasureResult]:
        return run_each(self, jobs, on_result)

    def run(self, inp: MeasureInput, built: Built, check: bool) -> MeasureResult:
        start = time.perf_counter()
        try:
            costs, outputs = self._device.time(Path(built.library).read_text(), built.launch,
                                               self._task_inputs(inp.task), built.params, self.warmup,
                                               self.repeats, check)
        except BuildError as e:
            self._device.reset()
            return MeasureResult((), "run", str(e), built.build_s, time.perf_counter() - start)
        run_s = time.perf_counter() - start
        if check:
            problem = mismatch(outputs, self._reference(inp.task))
            if problem:
                return MeasureResult((), "wrong", problem, built.build_s, run_s, checked=True)
        return MeasureResult(tuple(costs), None, None, built.build_s, run_s, checked=check)

    def limit_by_default(self, task: Task, default_latency: float) -> None:
        """GPU candidates are not abandoned early: a launch costs microseconds, and events time each one."""

    def close(self) -> None:
        self._device.close()

    def _task_inputs(self, task: Task) -> list[np.ndarray]:
        if task.key not in self._inputs:
            self._inputs[task.key] = task.random_inputs(self.seed)
        return self._inputs[task.key]

    def _reference(self, task: Task) -> list[np.ndarray]:
        if task.key not in self._references:
            self._references[task.key] = task.reference(self._task_inputs(task))
        return self._references[task.key]


class _Device:
    """Device 0's primary context, an L2-sized flush buffer and two events."""

    def __init__(self):
        from ...runtime.cuda import check_call, driver_api

        self._check, self.driver = check_call, driver_api()
        d = self.driver
        self._check(d.cuInit(0), "cuInit")
        self.device = self._check(d.cuDeviceGet(0), "cuDeviceGet")
        self.l2_bytes = int(self._check(d.cuDeviceGetAttribute(
            d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, self.device), "cuDeviceGetAttribute(L2)"))
        self.context = None
        self.reset()

    def reset(self) -> None:
        """A fresh primary context (after a fault the old one cannot run anything), flush buffer and events."""
        d = self.driver
        if self.context is not None:
            d.cuDevicePrimaryCtxReset(self.device)
        self.context = self._check(d.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self._check(d.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.flush_bytes = max(1, L2_FLUSH_FACTOR * self.l2_bytes)
        self.flush = self._check(d.cuMemAlloc(self.flush_bytes), "cuMemAlloc(L2 flush)")
        self.events = [self._check(d.cuEventCreate(0), "cuEventCreate") for _ in range(2)]

    def time(self, ptx: str, launch, inputs: list[np.ndarray], params: list, warmup: int, repeats: int,
             copy_out: bool) -> tuple[list[float], list[np.ndarray]]:
        """Seconds of each timed launch of the PTX's candidate, and its outputs when `copy_out`."""
        d, check = self.driver, self._check
        check(d.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        module = check(d.cuModuleLoadData(ptx.encode() + b"\0"), "cuModuleLoadData")
        buffers = []
        try:
            function = check(d.cuModuleGetFunction(module, KERNEL_NAME.encode()), "cuModuleGetFunction")
            arrays = list(inputs) + [np.empty(shape, np.dtype(dtype)) for _, shape, dtype in params[len(inputs):]]
            for a in arrays:
                ptr = check(d.cuMemAlloc(max(1, a.nbytes)), "cuMemAlloc")
                buffers.append(ptr)
                if a.nbytes:
                    check(d.cuMemcpyHtoD(ptr, np.ascontiguousarray(a).ctypes.data, a.nbytes), "cuMemcpyHtoD")
            values = np.array([int(p) for p in buffers], dtype=np.uint64)
            pointers = np.array([values.ctypes.data + 8 * i for i in range(len(values))], dtype=np.uint64)
            (grid, block) = launch

            def once() -> None:
                check(d.cuLaunchKernel(function, *grid, *block, 0, 0, pointers.ctypes.data, 0), "cuLaunchKernel")

            for _ in range(warmup):
                once()
            costs = []
            for _ in range(repeats):
                check(d.cuMemsetD8(self.flush, 0, self.flush_bytes), "cuMemsetD8(L2 flush)")
                check(d.cuEventRecord(self.events[0], 0), "cuEventRecord")
                once()
                check(d.cuEventRecord(self.events[1], 0), "cuEventRecord")
                check(d.cuEventSynchronize(self.events[1]), "cuEventSynchronize")
                costs.append(float(check(d.cuEventElapsedTime(self.events[0], self.events[1]),
                                         "cuEventElapsedTime")) * 1e-3)
            outputs = []
            if copy_out:
                for a, ptr in zip(arrays[len(inputs):], buffers[len(inputs):]):
                    if a.nbytes:
                        check(d.cuMemcpyDtoH(a.ctypes.data, ptr, a.nbytes), "cuMemcpyDtoH")
                    outputs.append(a)
            return costs, outputs
        finally:
            for ptr in buffers:
                d.cuMemFree(ptr)
            d.cuModuleUnload(module)

    def close(self) -> None:
        d = self.driver
        for e in self.events:
            d.cuEventDestroy(e)
        d.cuMemFree(self.flush)
        d.cuDevicePrimaryCtxRelease(self.device)
