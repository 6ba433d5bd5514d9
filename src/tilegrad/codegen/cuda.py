"""Loop IR to CUDA C++ for NVRTC: the C printer's walk with GPU spelling.

Each kernel is `extern "C" __global__` with one typed pointer per parameter, and `__launch_bounds__` from the
threads its bound loops use. A loop bound to a GPU axis is that axis's index (guarded where the loop is shorter
than the launch); shared buffers are `__shared__` arrays, local ones per-thread arrays (registers). Before
printing, the partial results of a reduction are combined as a tree, barriers are inserted after and before the
writes of shared buffers, and the kernel is checked for races (`loop/gpu.py`). Tiles are not versioned (loop/tails.py): a copy per tile would put barriers under
conditions that differ between threads. NVRTC has no standard headers: the prelude defines the integer types,
and float16 is stored as 16 bits converted with PTX's cvt, as bfloat16 is with bit shifts.
"""

from __future__ import annotations

from ..dtype import is_unsigned
from ..errors import LoweringError
from ..loop.gpu import GPU_AXES, Launch, check_races, launch_of, rewrite_for_gpu, shared_bytes
from ..loop.ir import Allocate, Buffer, For, Intrinsic, Kernel, Stmt, Store
from ..target import Target, cuda
from ..te import expr as E
from ..te.simplify import simplify
from .renderer import Renderer

VECTOR = 4  # float32 lanes of a vector load (float4)

PRELUDE = """\
typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t; typedef unsigned short uint16_t;
typedef int int32_t; typedef unsigned int uint32_t; typedef long long int64_t; typedef unsigned long long uint64_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
__device__ __forceinline__ int64_t tg_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int64_t tg_floormod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
/* NaN from either side propagates, and between -0.0 and 0.0 `b` is returned, as in the C backend */
template <class A, class B> __device__ __forceinline__ auto TG_MIN(A a, B b) -> decltype(a + b) {
  return a < b || a != a ? a : b;
}
template <class A, class B> __device__ __forceinline__ auto TG_MAX(A a, B b) -> decltype(a + b) {
  return a > b || a != a ? a : b;
}
/* A block reduction's last N partials (first[i * stride], stride = second - first) combined by lanes 0..N-1 of
   the first warp through shuffles; lane 0 writes the result to first[0]. The block is threadIdx.x only. */
struct tg_sum { template <class T> __device__ static T f(T a, T b) { return a + b; } };
struct tg_max { template <class T> __device__ static T f(T a, T b) { return TG_MAX(a, b); } };
struct tg_min { template <class T> __device__ static T f(T a, T b) { return TG_MIN(a, b); } };
template <int N, class Op, class T> __device__ __forceinline__ void tg_warp_reduce(T* first, T* second) {
  if (threadIdx.x < 32) {
    const unsigned mask = blockDim.x >= 32 ? 0xffffffffu : (1u << blockDim.x) - 1u;
    T v = first[(threadIdx.x < N ? threadIdx.x : N - 1) * (second - first)];
#pragma unroll
    for (int offset = N / 2; offset > 0; offset >>= 1) v = Op::f(v, __shfl_down_sync(mask, v, offset));
    if (threadIdx.x == 0) first[0] = v;
  }
}
"""

FLOAT16 = """\
#ifndef TG_FLOAT16
#define TG_FLOAT16
__device__ __forceinline__ float tg_f16_to_float(uint16_t h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ uint16_t tg_float_to_f16(float f) {
  uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
#endif
"""

BFLOAT16 = """\
#ifndef TG_BFLOAT16
#define TG_BFLOAT16
__device__ __forceinline__ float tg_bf16_to_float(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ uint16_t tg_float_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#endif
"""


class CudaRenderer(Renderer):
    prelude = PRELUDE
    signature = 'extern "C" __global__ void __launch_bounds__({threads}) {name}({params})'
    barrier = "__syncthreads();"
    unroll = "#pragma unroll"
    versions_tails = False
    types = {"float32": "float", "float64": "double", "float16": "float", "bfloat16": "float", "int8": "int8_t",
             "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t", "int32": "int32_t", "uint32": "uint32_t",
             "int64": "int64_t", "uint64": "uint64_t", "bool": "bool"}
    storage = {"bfloat16": "uint16_t", "float16": "uint16_t"}
    widen = {"bfloat16": "tg_bf16_to_float", "float16": "tg_f16_to_float"}
    narrow = {"bfloat16": "tg_float_to_bf16", "float16": "tg_float_to_f16"}
    helpers = {"bfloat16": BFLOAT16, "float16": FLOAT16}
    promoted = ("int8", "uint8", "int16", "uint16")
    bindings = {axis: f"(int64_t){axis}" for axis in GPU_AXES}
    # float32 calls; the fast intrinsics where their error is a few ulp (exp, log), libdevice's otherwise
    calls = {E.Exp: "__expf", E.Log: "__logf", E.Sqrt: "sqrtf", E.Rsqrt: "rsqrtf", E.Tanh: "tanhf", E.Erf: "erff",
             E.Sin: "sinf", E.Cos: "cosf", E.Floor: "floorf", E.Ceil: "ceilf", E.Round: "rintf", E.Pow: "powf",
             E.Abs: "fabsf", E.Fmod: "fmodf", E.Tan: "tanf", E.Asin: "asinf", E.Acos: "acosf", E.Atan: "atanf",
             E.Sinh: "sinhf", E.Cosh: "coshf", E.Asinh: "asinhf", E.Acosh: "acoshf", E.Atanh: "atanhf",
             E.Sigmoid: None}

    def __init__(self, target: Target | None = None):
        super().__init__(target or cuda())

    def render_function(self, k: Kernel) -> str:
        """The kernel with its barriers, checked for races; `launch(k)` gives the shape to launch it with."""
        k = rewrite_for_gpu(k, warp_shuffles=True)
        check_races(k)
        self._launch = launch_of(k)
        if self._launch.threads > self.target.max_threads_per_block:
            raise LoweringError(f"kernel {k.name}: {self._launch.threads} threads a block, more than the "
                                f"{self.target.max_threads_per_block} of {self.target.model or 'the target'}")
        if shared_bytes(k) > self.target.shared_bytes_per_block:
            raise LoweringError(f"kernel {k.name}: {shared_bytes(k)} bytes of shared memory a block, more than the "
                                f"{self.target.shared_bytes_per_block} of {self.target.model or 'the target'}")
        return super().render_function(k)

    @staticmethod
    def launch(k: Kernel) -> Launch:
        return launch_of(k)

    def _signature(self, k: Kernel) -> str:
        params = ", ".join(f"{self._storage(b.dtype)}* __restrict__ {b.name}" for b in k.params)
        return self.signature.format(threads=self._launch.threads, name=k.name, params=params)

    def _for(self, s: For, ind: int) -> None:
        v = s.var.name
        if s.kind in self.bindings:
            self._emit(ind, "{")
            self._emit(ind + 1, f"const int64_t {v} = {self.bindings[s.kind]};")
            axis = GPU_AXES.index(s.kind)
            launched = (self._launch.grid + self._launch.block)[axis]
            if int(s.extent.value) < launched:
                self._emit(ind + 1, f"if ({v} < {self.expr(s.extent)}) {{")
                self._stmt(s.body, ind + 2)
                self._emit(ind + 1, "}")
            else:
                self._stmt(s.body, ind + 1)
            self._emit(ind, "}")
            return
        if s.kind == "vectorized":
            copy = self._vector_copy(s)
            if copy is not None:
                self._emit(ind, copy)
                return
        if s.kind in ("unrolled", "vectorized"):
            self._emit(ind, self.unroll)
        self._emit(ind, f"for (int64_t {v} = 0; {v} < {self.expr(s.extent)}; ++{v}) {{")
        self._stmt(s.body, ind + 1)
        self._emit(ind, "}")

    def _stmt(self, s: Stmt, ind: int) -> None:
        if isinstance(s, Intrinsic) and s.name.startswith("warp_"):  # loop.gpu.tree_reductions's warp step
            op, lanes = s.name[len("warp_"):len("warp_") + 3], s.name[len("warp_") + 3:]
            first, second = (f"&{b.name}[{self._flat(b, idx)}]" for b, idx in s.operands)
            self._emit(ind, f"tg_warp_reduce<{lanes}, tg_{op}>({first}, {second});")
            return
        super()._stmt(s, ind)

    def _vector_copy(self, s: For) -> str | None:
        """A vectorized loop `dst[i + v] = src[j + v]` over 4 float32s, both runs contiguous and 16-byte aligned
        (buffers are: device allocations and the memory plan's blocks by 64 bytes, arrays by __align__), as one
        float4 load and store; None where that is not proven."""
        body = s.body
        if s.extent != E.Const(VECTOR, E.INDEX) or not isinstance(body, Store) or type(body.value) is not E.Load:
            return None
        starts = []
        for b, indices in ((body.buffer, body.indices), (body.value.buffer, body.value.indices)):
            if b.dtype != "float32":
                return None
            flat = simplify(_flat(b, indices))
            start = simplify(E.substitute(flat, {s.var: E.Const(0, E.INDEX)}))
            if simplify(flat - start) != s.var or simplify(start % VECTOR) != E.Const(0, E.INDEX):
                return None
            starts.append(self.expr(start))
        return (f"*(float4*)&{body.buffer.name}[{starts[0]}] = "
                f"*(const float4*)&{body.value.buffer.name}[{starts[1]}];")

    def _allocate(self, s: Allocate, ind: int) -> None:
        b = s.buffer
        size = b.size()
        if type(size) is not E.Const:
            raise LoweringError(f"buffer {b.name} has a symbolic size {size}; bind the schedule's variables first")
        single = self._launch.threads == 1 and self._launch.grid == (1, 1, 1)  # a 0-d output: one thread
        if b.scope == "global" and not single:
            raise LoweringError(f"buffer {b.name} is a global temporary: a CUDA kernel has no barrier across its "
                                "blocks, so compute the stage at a loop of its reader or inline it")
        qualifier = "__shared__ " if b.scope == "shared" else ""
        self._emit(ind, f"{qualifier}__align__(16) {self._storage(b.dtype)} {b.name}[{size.value}];")
        self._stmt(s.body, ind)

    def _call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        if E.is_int(e.dtype):  # only abs takes integers
            return args[0] if is_unsigned(e.dtype) else f"llabs({args[0]})"
        t = type(e)
        double = e.dtype == "float64"
        if t is E.Sigmoid:
            one = "1.0" if double else "1.0f"
            return f"({one} / ({one} + {'::exp' if double else '__expf'}(-{args[0]})))"
        name = self.calls[t]
        if double:  # double's functions are named like ops (exp, sqrt); `::` reaches them past a buffer's name
            name = "::" + {"__expf": "exp", "__logf": "log", "rintf": "rint"}.get(name, name[:-1])
        return f"{name}({', '.join(args)})"


def _flat(b: Buffer, indices) -> E.Expr:
    """The row-major offset of `indices` in `b`, as an expression."""
    flat: E.Expr = E.Const(0, E.INDEX)
    stride: E.Expr = E.Const(1, E.INDEX)
    for idx, dim in zip(reversed(indices), reversed(b.shape)):
        flat = flat + idx * stride
        stride = stride * dim
    return flat
