"""Target lowering of a transposing copy's square tiles to one call that transposes a tile in registers.

A copy that moves an axis (NCHW into NHWC and back, around an int8 convolution that runs channels-last) is
scheduled (schedule/defaults.py, `_transpose_in_tiles`) in squares of T x T elements:

    for r in 0..T:                    # the axis contiguous in the input
      for c in 0..T:                  # the axis contiguous in the output
        out[.. r * so + c] = in[.. r + c * si]

Either loop alone as a vector reads or writes one element per cache line of the other side (a gather or a
scatter of single elements); `use_transposes` gives each such square, where the strides say exactly that and
the element is 1 or 4 bytes, to `Intrinsic("transpose_<bytes>x<T>", (out, in), (so, si))`: the renderer's
helper copies the tile's T rows of the input whole and writes each output row whole, transposed by permutes.
Any other nest, and a partial tile at an edge, keeps its loops."""

from __future__ import annotations

from ..dtype import itemsize
from ..schedule.defaults import TRANSPOSE_TILES as TILES
from ..te import expr as E
from ..te.simplify import simplify
from .dot4 import strides
from .ir import For, Intrinsic, Kernel, Store, rewrite_nests


def use_transposes(k: Kernel) -> Kernel:
    """`k` with each square of a transposing copy given to the intrinsic; `k` itself when there is none."""
    body = rewrite_nests(k.body, _transpose)
    return k if body is k.body else Kernel(k.name, k.params, body, k.dims)


def _transpose(s: For) -> Intrinsic | None:
    """The intrinsic for the square `s` (rows, then columns, one copy), or None if it is not one."""
    inner = s.body
    if not (type(s.extent) is E.Const and isinstance(inner, For) and type(inner.extent) is E.Const
            and inner.extent.value == s.extent.value and isinstance(inner.body, Store)):
        return None
    store, side = inner.body, s.extent.value
    load = store.value
    if type(load) is not E.Load or load.buffer.dtype != store.buffer.dtype or load.buffer is store.buffer:
        return None
    if side not in TILES.get(itemsize(store.buffer.dtype), ()):
        return None
    r, c = s.var, inner.var
    out_row, out_step = strides(store.buffer, store.indices, r, c)
    in_step, in_row = strides(load.buffer, load.indices, r, c)
    if out_step != 1 or in_step != 1 or out_row is None or in_row is None or min(out_row, in_row) < side:
        return None
    zero = {r: E.Const(0, r.dtype), c: E.Const(0, c.dtype)}
    corner = tuple((b, tuple(simplify(E.substitute(i, zero)) for i in idx))
                   for b, idx in ((store.buffer, store.indices), (load.buffer, load.indices)))
    name = f"transpose_{itemsize(store.buffer.dtype)}x{side}"
    return Intrinsic(name, corner, (E.Const(out_row, E.INDEX), E.Const(in_row, E.INDEX)))
