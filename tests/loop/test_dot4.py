"""The int8 GEMM's dot-product lowering (loop/dot4.py) and its spellings (codegen/c.py): the nest becomes one
intrinsic call per row and vector of columns; the code for AVX-512 VNNI and AVX-VNNI holds vpdpbusd and the AVX2
code for 8-bit weights the exact vpmaddwd pairs (never the saturating vpmaddubsw), for 7-bit weights vpmaddubsw;
and every path this CPU can run equals NumPy's int64 sums on the operands at the edges of the int16 pairs (u8 255
times s8 -128, or -64 and 64 for 7-bit weights)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad import config, te
from tilegrad.ir import lookup
from tilegrad.kernel import build, lower_kernel, render_kernel
from tilegrad.loop.dot4 import use_dot4
from tilegrad.loop.ir import Intrinsic
from tilegrad.runtime import assemble
from tilegrad.target import Target, host

M, K, N = 13, 36, 40  # K = 9 groups of 4, N = 3 panels of 16 (the last one padded)


def _gemm(dtype="uint8", weight_bits=8):
    op = lookup("quantized_matmul")
    groups, panels = -(-K // 4), -(-N // 16)
    phs = [te.placeholder((M, K), dtype, "a"), te.placeholder((panels, groups, 16, 4), "int8", "w"),
           te.placeholder((N,), "int32", "bias")]
    attrs = {"n": N, "out_dtype": "int32", "weight_bits": weight_bits}
    return phs, op.compute(*phs, **op.bind_attrs(attrs, "test"))


def _statements(s):
    yield s
    for field in ("body", "then", "orelse"):
        child = getattr(s, field, None)
        if child is not None:
            yield from _statements(child)
    for child in getattr(s, "stmts", ()):
        yield from _statements(child)


@pytest.mark.parametrize("weight_bits,kind", [(8, "u8s8"), (7, "u8s7")])
def test_the_tile_nest_becomes_one_call_per_row_and_vector(weight_bits, kind):
    phs, out = _gemm(weight_bits=weight_bits)
    loop = lower_kernel((phs, [out]), target=Target(flags=frozenset({"avx2"})))
    calls = [s for s in _statements(use_dot4(loop).body) if isinstance(s, Intrinsic)]
    assert calls and {c.name for c in calls} == {f"dot4_{kind}x16"}
    assert [b.dtype for b, _ in calls[0].operands] == ["int32", "uint8", "int8"]
    source = render_kernel(loop, Target(flags=frozenset({"avx2"})))
    assert f"tg_dot4_{kind}x16(&" in source and source.count("#define TG_DOT4") == 1


def test_a_nest_of_other_strides_is_left_alone():
    """The same GEMM with the group's values outside the columns (the rule's order without a dot product)."""
    phs, out = _gemm()
    loop = lower_kernel((phs, [out]), target=Target(flags=frozenset()))
    assert use_dot4(loop) is loop


NO_VNNI = ("-mno-avx512vnni", "-mno-avxvnni")  # AVX2 alone, also where -march=native has VNNI


@pytest.mark.parametrize("flags,weight_bits,present,absent", [
    (("-mavx512vnni", "-mavx512vl", "-mavx512f"), 8, "vpdpbusd", "vpmaddubsw"),
    (("-mavx512vnni", "-mavx512vl", "-mavx512f"), 7, "vpdpbusd", "vpmaddubsw"),
    (("-mavxvnni",), 8, "vpdpbusd", "vpmaddubsw"),
    (NO_VNNI, 8, "vpmaddwd", "vpmaddubsw"),
    (NO_VNNI, 7, "vpmaddubsw", "vphaddd"),
])
def test_each_target_gets_its_instruction(flags, weight_bits, present, absent):
    phs, out = _gemm(weight_bits=weight_bits)
    source = render_kernel(lower_kernel((phs, [out]), target=Target(flags=frozenset({"avx2"}))),
                           Target(flags=frozenset({"avx2"})))
    with config.override(extra_cflags=flags):
        asm = assemble(source)
    assert present in asm and absent not in asm


@pytest.mark.parametrize("extra", [(), ("-mno-avx2",)], ids=["native", "plain_c"])
@pytest.mark.parametrize("dtype,weight_bits", [("uint8", 8), ("int8", 8), ("uint8", 7)])
def test_runnable_paths_are_bit_exact_at_the_edges_of_int16_pairs(extra, dtype, weight_bits):
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (M, K), endpoint=True).astype(dtype)
    a[:4] = info.max
    low, high = (-128, 127) if weight_bits == 8 else (-64, 64)
    w = rng.integers(low, high, (N, K), endpoint=True).astype(np.int8)
    w[:8], w[8:16] = low, high
    wpack = np.zeros((3 * 16, 9 * 4), np.int8)
    wpack[:N, :K] = w
    wpack = np.ascontiguousarray(wpack.reshape(3, 16, 9, 4).transpose(0, 2, 1, 3))
    bias = rng.integers(-1000, 1000, N).astype(np.int32)
    phs, out = _gemm(dtype, weight_bits)
    with config.override(extra_cflags=extra):
        got = build((phs, [out]), target=host()).run(a, wpack, bias)
    shift = 128 if dtype == "int8" else 0  # an s8 a enters as a + 128 (te.nn.quantized_matmul)
    want = (a.astype(np.int64) + shift) @ w.astype(np.int64).T + bias
    np.testing.assert_array_equal(got, want)


def test_target_names_its_int8_dot_product():
    assert Target(flags=frozenset({"avx2", "avx512f", "avx512_vnni"})).int8_dot == "avx512_vnni"
    assert Target(flags=frozenset({"avx2", "avx_vnni"})).int8_dot == "avx_vnni"
    assert Target(flags=frozenset({"avx2"})).int8_dot == "avx2"
    assert Target(flags=frozenset({"neon"})).int8_dot == "scalar"


def _depthwise(shape, kernel, stride, pads, taps_grouped=True):
    """A channels-last u8 depthwise convolution with int32 outputs, its taps grouped."""
    op = lookup("quantized_conv2d")
    c = shape[3]
    phs = [te.placeholder(shape, "uint8", "x"), te.placeholder((c, 1, kernel, kernel), "int8", "w"),
           te.placeholder((c,), "int32", "bias")]
    attrs = {"strides": [stride, stride], "pads": pads, "group": c, "x_zero_point": 3, "out_dtype": "int32",
             "layout": "NHWC", "taps_grouped": taps_grouped}
    return phs, op.compute(*phs, **op.bind_attrs(attrs, "test"))


def test_a_depthwise_convolutions_grouped_taps_become_the_transposed_call():
    """Four pixels of 16 channels, contiguous, times each channel's four weights: one call per pixel and vector
    of channels, which AVX-512 VNNI with VBMI spells as vpermb and vpdpbusd."""
    phs, out = _depthwise((1, 6, 9, 48), 3, 1, [1, 1, 1, 1])
    target = Target(flags=frozenset({"avx2", "avx512f", "avx512_vnni", "avx512vbmi"}))
    loop = lower_kernel((phs, [out]), target=target)
    calls = [s for s in _statements(use_dot4(loop).body) if isinstance(s, Intrinsic)]
    assert calls and {c.name for c in calls} == {"dot4t_u8s8x16"}
    with config.override(extra_cflags=("-mavx512vnni", "-mavx512vbmi", "-mavx512f")):
        asm = assemble(render_kernel(loop, target))
    assert "vpermb" in asm and "vpdpbusd" in asm


@pytest.mark.parametrize("extra", [(), ("-mno-avx512vbmi",)], ids=["native", "plain_c"])
@pytest.mark.parametrize("shape,kernel,stride,pads", [((1, 7, 10, 20), 3, 1, [1, 1, 1, 1]),
                                                      ((1, 9, 12, 48), 3, 2, [1, 0, 1, 2]),
                                                      ((2, 6, 7, 32), 5, 1, [2, 2, 2, 2])])
def test_grouped_taps_are_bit_exact_at_the_edges_of_the_bytes(extra, shape, kernel, stride, pads):
    """u8 255 times s8 -128 and 127, channels past the last whole vector, both strides and a 5-wide window (two
    groups, three taps of zeros): the sums equal NumPy's in int64, on every path this CPU runs."""
    rng = np.random.default_rng(5)
    c = shape[3]
    x = rng.integers(0, 255, shape, endpoint=True).astype(np.uint8)
    x[..., : c // 2] = 255
    w = rng.integers(-128, 127, (c, 1, kernel, kernel), endpoint=True).astype(np.int8)
    w[: c // 4], w[c // 4: c // 2] = -128, 127
    bias = rng.integers(-1000, 1000, c).astype(np.int32)
    phs, out = _depthwise(shape, kernel, stride, pads)
    with config.override(extra_cflags=extra):
        got = build((phs, [out]), target=host()).run(x, w, bias)
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.int64), ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=3)
    oh, ow = got.shape[1:3]
    want = np.zeros(got.shape, np.int64) + bias
    for r in range(kernel):
        for q in range(kernel):
            taps = xp[:, r: r + stride * (oh - 1) + 1: stride, q: q + stride * (ow - 1) + 1: stride]
            want += taps * w[:, 0, r, q].astype(np.int64)
    np.testing.assert_array_equal(got, want)
