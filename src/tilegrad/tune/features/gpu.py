"""GPU features of a kernel with bound loops, as expressions: formulas of the tile sizes on a symbolic kernel (a
GPU sketch lowered with its parameters left as variables), constants on a concrete one, like every feature.

Per kernel (the same in each store's row): threads per block and blocks (per axis the largest extent bound to it,
as `loop.gpu.launch_of` takes), shared-memory bytes a block holds, and an estimate of a thread's registers (its
local buffers in 4-byte words, plus a few for indices). Per store, from the stride of each access along the
innermost loop bound to threadIdx.x (the index at thread 1 less the index at thread 0, every other loop at 0):
the 32-byte sectors a warp's global accesses touch, the useful bytes those sectors carry (32 when coalesced,
less when strided), and the bank-conflict degree of its shared accesses (the threads of a warp that hit one
bank: the stride in words, at most the warp; exact for power-of-two strides, an upper bound otherwise). Built
from min, max and floor division only, so Felix's smoothing (`felix/smooth.py`) differentiates them as the CPU
ones.
"""

from __future__ import annotations

from ...loop.ir import Allocate, For, Kernel, walk
from ...te import expr as E
from .access import ONE, ZERO, absolute, elem_bytes, product

GPU_FEATURE_NAMES = ("gpu_threads_per_block", "gpu_blocks", "gpu_shared_bytes", "gpu_registers",
                     "gpu_global_sectors", "gpu_bytes_per_sector", "gpu_bank_conflicts")
WARP = 32
SECTOR_BYTES = 32
BANK_BYTES = 4
INDEX_REGISTERS = 16  # registers a thread spends on indices and addresses (schedule/sketch_gpu.py's estimate too)
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def is_gpu_kernel(kernel: Kernel) -> bool:
    """Whether any loop of `kernel` is bound to a block or thread axis."""
    return any(isinstance(s, For) and s.kind in BLOCK_AXES + THREAD_AXES for s in walk(kernel.body))


def kernel_features(kernel: Kernel) -> dict[str, E.Expr]:
    """The per-kernel GPU features: launch shape, shared bytes, registers."""
    extents: dict[str, E.Expr] = {}
    shared, registers = ZERO, E.Const(INDEX_REGISTERS, E.INDEX)
    for s in walk(kernel.body):
        if isinstance(s, For) and s.kind in extents.keys() | set(BLOCK_AXES + THREAD_AXES):
            extents[s.kind] = E.maximum(extents[s.kind], s.extent) if s.kind in extents else s.extent
        elif isinstance(s, Allocate) and s.buffer.scope == "shared":
            shared = shared + s.buffer.size() * elem_bytes(s.buffer.dtype)
        elif isinstance(s, Allocate) and s.buffer.scope == "local":
            registers = registers + s.buffer.size() * max(1, elem_bytes(s.buffer.dtype) // BANK_BYTES)
    return {"gpu_threads_per_block": product([extents.get(a, ONE) for a in THREAD_AXES]),
            "gpu_blocks": product([extents.get(a, ONE) for a in BLOCK_AXES]),
            "gpu_shared_bytes": shared, "gpu_registers": registers}


def store_features(store, loops) -> dict[str, E.Expr]:
    """The per-store GPU features of `store` (a loop-IR Store) inside `loops` (NestLoops, outermost first)."""
    threads = [lp for lp in loops if lp.kind == "threadIdx.x"]
    sectors, useful, conflicts = ZERO, ZERO, ZERO
    if threads:
        lane, lanes = threads[-1].var, E.minimum(threads[-1].extent, E.Const(WARP, E.INDEX))
        others = {lp.var.name: ZERO for lp in loops if lp.var is not lane}
        accesses = [(store.buffer, store.indices)] + [(x.buffer, x.indices) for x in E.loads(store.value)]
        for buffer, indices in accesses:
            scope = getattr(buffer, "scope", "global")
            width = elem_bytes(buffer.dtype)
            stride = absolute(_flat_at(buffer, indices, others, lane, ONE) - _flat_at(buffer, indices, others, lane,
                                                                                      ZERO))
            if scope == "global":
                n = E.maximum(ONE, E.minimum(lanes, (lanes * stride * width + (SECTOR_BYTES - 1)) // SECTOR_BYTES))
                sectors = sectors + n
                useful = useful + E.select(stride > ZERO, lanes, ONE) * width
            elif scope == "shared":
                words = E.maximum(ONE, stride * width // BANK_BYTES)
                conflicts = conflicts + E.minimum(words, lanes)
    per_sector = E.select(sectors > ZERO, E.cast("float64", useful) / E.cast("float64", E.maximum(sectors, ONE)),
                          E.Const(0.0, "float64"))
    return {"gpu_global_sectors": sectors, "gpu_bytes_per_sector": per_sector, "gpu_bank_conflicts": conflicts}


def _flat_at(buffer, indices, others: dict, lane: E.Var, value: E.Expr) -> E.Expr:
    """The row-major flat index of an access with `lane` at `value` and the other loops at 0."""
    flat = ZERO
    for dim, i in zip(buffer.shape, indices):
        flat = flat * E.as_expr(dim) + E.substitute(i, {**others, lane.name: value})
    return flat
