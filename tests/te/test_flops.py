"""The FLOP counter counts floating-point work only: an int32 sum of int8 products is none, so an int8 kernel is
never compared with the FMA peak as if its integer multiply-adds were float ones (a profile re-measured the peak
on every int8 model, whose VNNI products run at up to 4x the float rate)."""

from __future__ import annotations

from tilegrad import te
from tilegrad.te import expr as E
from tilegrad.te.flops import compute_flops


def _product(dtype: str, acc: str):
    a, b = te.placeholder((8, 16), dtype, "a"), te.placeholder((16, 4), dtype, "b")
    k = te.reduce_axis(16, "k")
    return te.compute((8, 4), lambda i, j: te.sum(E.cast(acc, a[i, k]) * E.cast(acc, b[k, j]), axis=[k]))


def test_a_float_product_counts_a_multiply_add_as_two():
    assert compute_flops([_product("float32", "float32")]) == 8 * 4 * 16 * 2


def test_an_integer_product_counts_none_and_its_float_epilogue_counts():
    acc = _product("int8", "int32")
    assert compute_flops([acc]) == 0
    scaled = te.compute(acc.shape, lambda i, j: E.cast("float32", acc[i, j]) * 0.5)
    assert compute_flops([scaled]) == 8 * 4


def test_a_select_counts_the_branch_that_runs():
    """Winograd's transforms pick one case per tile position by a chain of selects; counting every case made
    their kernels report several times the FMA work they run (a profile then saw a rate above the peak)."""
    a = te.placeholder((8,), "float32", "a")
    chosen = te.compute((8,), lambda i: E.select(i.eq(0), a[i] * 2.0 + 1.0, a[i] * 3.0))
    assert compute_flops([chosen]) == 8 * 2
