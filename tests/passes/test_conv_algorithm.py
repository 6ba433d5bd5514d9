"""The conv_algorithm pass: the frontend emits plain conv/matmul/gemm; the pass picks each convolution's algorithm
as its docstring says (estimates, options), lays the weights out as constants, and keeps the graph's meaning."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

from tilegrad.errors import ShapeError, TilegradError
from tilegrad.executor import compile_graph
from tilegrad.kernel import build
from tilegrad.frontend.onnx import import_onnx
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.conv_algorithm import (conv_algorithm, matmul_panel, matmul_tile_rows, rows_per_l1_set,
                                           winograd_block)
from tilegrad.target import Target, host
from tilegrad.passes.context import PassContext
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.knobs import Defaults
from tilegrad.schedule.rules_conv_algorithms import winograd_rows
from tilegrad import te
from tilegrad.te import nn

RNG = np.random.default_rng(0)
CONV_OPS = {"direct": "blocked_conv", "im2col": "im2col_conv", "winograd2": "winograd_conv",
            "winograd4": "winograd_conv"}


def _run(g, target=None, **options):
    """The pass alone (for `target`, default this machine); the result and its notes."""
    ctx = PassContext(1, target=target or host(), options=options)
    return conv_algorithm(g, ctx), ctx.notes


def _same_meaning(g, inputs, **options):
    out, notes = _run(g, **options)
    want, got = run_reference(g, inputs), run_reference(out, inputs)
    for w, o in zip(want, got):
        np.testing.assert_allclose(o, w, rtol=1e-4, atol=1e-4)
    return out, notes


def _ops(g):
    return [n.op for n in g.nodes]


def test_frontend_emits_plain_ops_and_the_pass_packs_them():
    w = numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype("float32"), "w")
    t = numpy_helper.from_array(RNG.standard_normal((8, 4, 3, 3)).astype("float32"), "t")
    m = numpy_helper.from_array(RNG.standard_normal((9, 5)).astype("float32"), "m")
    g_ = numpy_helper.from_array(RNG.standard_normal((5, 9)).astype("float32"), "g")
    c = numpy_helper.from_array(RNG.standard_normal((5,)).astype("float32"), "c")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ["a", "t"], ["b"], name="deconv", strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["b", "m"], ["d"], name="mm"),
             helper.make_node("Reshape", ["d", "shape"], ["e"], name="flat"),
             helper.make_node("Gemm", ["e", "g", "c"], ["y"], name="gemm", transB=1, alpha=0.5)]
    shape = numpy_helper.from_array(np.array([-1, 9], "int64"), "shape")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, t, m, g_, c, shape])
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10))
    # The ConvTranspose is a product of the pixels (channels last) with its taps, then col2im and back to NCHW.
    assert _ops(g) == ["conv", "transpose", "reshape", "matmul", "reshape", "col2im", "transpose", "matmul", "reshape",
                       "gemm"]
    x = RNG.standard_normal((1, 3, 5, 5)).astype("float32")
    out, _ = _same_meaning(g, [x], conv_algorithm="direct")
    assert _ops(out) == ["blocked_conv", "transpose", "reshape", "panel_matmul", "reshape", "col2im", "transpose",
                         "reshape", "panel_matmul", "reshape", "reshape", "panel_matmul"]
    assert all(n.inputs[1].is_constant for n in out.nodes if n.op in ("blocked_conv", "panel_matmul"))
    assert optimize(g, 0)[0] is g
    assert "conv_algorithm" in [r.name for r in optimize(g, 1)[1].records]


def test_non_constant_grouped_or_transposed_operands_stay_plain():
    b = GraphBuilder()
    x, w = b.input("x", (1, 4, 6, 6)), b.input("w", (4, 4, 3, 3))
    y = b.op("conv", x, w, pads=(1, 1, 1, 1))
    z = b.op("conv", y, b.const(RNG.standard_normal((4, 1, 3, 3)).astype("float32")), group=4, pads=(1, 1, 1, 1))
    a = b.op("gemm", b.op("reshape", z, shape=(4, 36)), b.const(RNG.standard_normal((4, 3)).astype("float32")),
             trans_a=1)
    g = b.build(a)
    assert _run(g)[0] is g


def _conv_graph(convs, size):
    """A chain of convolutions: (channels out, kernel, stride, name) each, with a bias, from 1 x C x size x size."""
    b = GraphBuilder()
    x = b.input("x", (1, convs[0][0], size, size))
    y = x
    for out, kernel, stride, name in convs[1:]:
        w = b.const((RNG.standard_normal((out, y.shape[1], kernel, kernel)) / (3 * kernel)).astype("float32"))
        bias = b.const(RNG.standard_normal(out).astype("float32"))
        y = b.op("conv", y, w, bias, name=name, strides=(stride, stride), pads=(kernel // 2,) * 4)
    return b.build(y), RNG.standard_normal(x.shape).astype("float32")


@pytest.mark.parametrize("channels,size,kernel,stride,algorithm", [
    (64, 56, 3, 1, "winograd4"),  # the ResNet-50 3 x 3 layers
    (128, 28, 3, 1, "winograd4"),
    (256, 14, 3, 1, "winograd4"),
    (512, 7, 3, 1, "winograd2"),  # F(4, 3)'s weights are 4 x larger than the direct kernel's: streaming them loses
    (3, 224, 3, 1, "direct"),  # three input channels: the output transform outweighs the saved multiplies
    (64, 56, 3, 2, "direct"),
    (64, 56, 1, 1, "direct"),
    (32, 23, 5, 1, "direct"),  # a prime output width: tiles of 6, 6, 6 and 5 (the last guarded)
    (32, 2, 5, 1, "im2col"),  # a row of two columns: two accumulators are too few FMA chains
])
def test_the_default_choice_follows_the_estimates(channels, size, kernel, stride, algorithm):
    """With AVX2 (8 lanes)."""
    g, _ = _conv_graph([(channels, 0, 0, ""), (channels, kernel, stride, "conv")], size)
    out, (note,) = _run(g, Target.with_lanes(8))
    assert _ops(out) == [CONV_OPS[algorithm]]
    assert note.startswith(f"conv: {algorithm} (cheapest estimate); multiplies: direct ")
    assert "estimated multiply-adds: direct" in note
    if algorithm.startswith("winograd"):
        assert out.nodes[0].attrs["m"] == int(algorithm[-1])


@pytest.mark.parametrize("channels,size,algorithm", [
    (64, 56, "winograd4"),
    (128, 28, "winograd4"),
    (256, 14, "winograd2"),  # each FMA does twice the work a streamed weight costs with 8 lanes: larger weights lose
    (512, 7, "winograd2"),
])
def test_with_avx512_streamed_weights_cost_twice_the_multiply_adds(channels, size, algorithm):
    g, _ = _conv_graph([(channels, 0, 0, ""), (channels, 3, 1, "conv")], size)
    out, (note,) = _run(g, Target.with_lanes(16))
    assert note.startswith(f"conv: {algorithm} (cheapest estimate)")


@pytest.mark.parametrize("algorithm", ["direct", "im2col", "winograd2", "winograd4"])
def test_every_algorithm_keeps_the_meaning(algorithm):
    g, x = _conv_graph([(5, 0, 0, ""), (7, 3, 1, "a"), (6, 3, 1, "b")], 11)
    out, notes = _same_meaning(g, [x], conv_algorithm=algorithm)
    assert _ops(out) == [CONV_OPS[algorithm]] * 2
    assert all(n.startswith(f"{name}: {algorithm} (by option)") for n, name in zip(notes, "ab"))


def test_a_global_option_applies_where_it_can_and_names_per_node_win():
    g, x = _conv_graph([(4, 0, 0, ""), (8, 3, 1, "a"), (8, 3, 2, "b"), (8, 3, 1, "c")], 12)
    out, notes = _same_meaning(g, [x], conv_algorithm="winograd2")
    assert _ops(out) == ["winograd_conv", "blocked_conv", "winograd_conv"]
    assert "cheapest estimate (winograd2 does not apply)" in notes[1]
    out, _ = _same_meaning(g, [x], conv_algorithm={"a": "im2col", "b": "im2col"})
    assert _ops(out)[:2] == ["im2col_conv", "im2col_conv"]


def test_bad_options_are_errors_that_say_why():
    g, _ = _conv_graph([(4, 0, 0, ""), (8, 3, 2, "b")], 12)
    with pytest.raises(ShapeError, match=r"node 'b': conv_algorithm 'winograd4' was requested, but .*stride \(2, 2\)"):
        _run(g, conv_algorithm={"b": "winograd4"})
    with pytest.raises(TilegradError, match="'fft' for node 'b' is not one of direct, im2col, winograd2, winograd4"):
        _run(g, conv_algorithm="fft")


@pytest.mark.parametrize("algorithm", ["im2col", "winograd4"])
def test_compiled_graph_with_fused_epilogues_matches(algorithm):
    b = GraphBuilder()
    x = b.input("x", (1, 6, 9, 10))
    w = b.const((RNG.standard_normal((8, 6, 3, 3)) / 9).astype("float32"))
    y = b.op("relu", b.op("add", b.op("conv", x, w, b.const(RNG.standard_normal(8).astype("float32")),
                                      pads=(1, 1, 1, 1), name="conv"), b.const(np.float32(0.5))))
    g = b.build(y)
    xs = RNG.standard_normal(x.shape).astype("float32")
    out, _ = optimize(g, 2, options={"conv_algorithm": algorithm})
    np.testing.assert_allclose(compile_graph(out)(xs), run_reference(g, [xs])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length,kernel,stride,pads,dilation", [
    (50, 3, 1, (1, 1), 1),  # Whisper's first convolution
    (50, 3, 2, (1, 1), 1),  # and its second
    (37, 10, 5, (0, 0), 1),  # wav2vec's feature extractor: a long strided kernel, no padding
    (29, 3, 1, (2, 0), 2),  # dilated and padded on one side (a causal convolution)
])
def test_a_1d_convolution_runs_as_a_2d_one_of_height_1(length, kernel, stride, pads, dilation):
    b = GraphBuilder()
    x = b.input("x", (2, 6, length))
    w = b.const((RNG.standard_normal((9, 6, kernel)) / kernel).astype("float32"))
    y = b.op("conv", x, w, b.const(RNG.standard_normal(9).astype("float32")), name="conv1d", strides=(stride,),
             pads=pads, dilations=(dilation,))
    g = b.build(y)
    xs = RNG.standard_normal(x.shape).astype("float32")
    out, (note,) = _same_meaning(g, [xs])
    assert _ops(out) == ["reshape", CONV_OPS[note.split()[1]], "reshape"] and note.startswith("conv1d: ")
    np.testing.assert_allclose(compile_graph(optimize(g, 2)[0])(xs), run_reference(g, [xs])[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels,out,groups,size,kernel,stride,dilation", [
    (64, 64, 16, 9, 3, 1, 1),  # ResNeXt's 4 channels a group: four groups a block
    (24, 48, 6, 7, 3, 2, 1),  # 8 output channels a group, strided, 6 groups in 3 blocks
    (48, 32, 2, 8, 3, 1, 2),  # 16 output and 24 input channels a group, dilated
    (64, 64, 2, 5, 1, 1, 1),  # 32 a group: two blocks a group
])
def test_grouped_convolutions_run_blocked(channels, out, groups, size, kernel, stride, dilation):
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size + 2))
    w = b.const((RNG.standard_normal((out, channels // groups, kernel, kernel)) / kernel).astype("float32"))
    pad = dilation * (kernel // 2)
    y = b.op("relu", b.op("conv", x, w, b.const(RNG.standard_normal(out).astype("float32")), name="grouped",
                          group=groups, strides=(stride, stride), pads=(pad,) * 4, dilations=(dilation, dilation)))
    g = b.build(y)
    xs = RNG.standard_normal(x.shape).astype("float32")
    out_graph, (note,) = _same_meaning(g, [xs])
    assert _ops(out_graph) == ["blocked_conv", "relu"] and note.startswith(f"grouped: direct ({groups} groups")
    np.testing.assert_allclose(compile_graph(optimize(g, 2)[0])(xs), run_reference(g, [xs])[0], rtol=1e-4, atol=1e-4)


def test_a_grouped_1d_convolution_runs_blocked_and_groups_that_do_not_line_up_stay_plain():
    b = GraphBuilder()
    x = b.input("x", (2, 32, 40))
    w = b.const((RNG.standard_normal((32, 2, 5)) / 5).astype("float32"))
    y = b.op("conv", x, w, name="conv1d", group=16, pads=(2, 2))
    odd = b.const((RNG.standard_normal((24, 16, 3)) / 3).astype("float32"))
    z = b.op("conv", y, odd, name="odd", group=2, pads=(1, 1))  # 12 output channels a group
    g = b.build(z)
    xs = RNG.standard_normal(x.shape).astype("float32")
    out, notes = _same_meaning(g, [xs])
    assert _ops(out) == ["reshape", "blocked_conv", "reshape", "conv"] and len(notes) == 1
    np.testing.assert_allclose(compile_graph(optimize(g, 2)[0])(xs), run_reference(g, [xs])[0], rtol=1e-4, atol=1e-4)


def test_a_grouped_convolution_refuses_another_algorithm_by_name():
    b = GraphBuilder()
    x = b.input("x", (1, 32, 6, 6))
    w = b.const(RNG.standard_normal((32, 4, 3, 3)).astype("float32"))
    g = b.build(b.op("conv", x, w, name="grouped", group=8, pads=(1, 1, 1, 1)))
    with pytest.raises(ShapeError, match="grouped convolution runs direct"):
        _run(g, conv_algorithm={"grouped": "winograd2"})
    assert _ops(_run(g, conv_algorithm="winograd2")[0]) == ["blocked_conv"]  # a global choice applies where it can


@settings(max_examples=8)
@given(st.integers(1, 5), st.integers(1, 70), st.integers(1, 300), st.booleans())
def test_a_product_of_few_rows_is_not_padded_and_its_tile_spans_panels(rows, depth, columns, bias):
    """A decoding step's one row: the tile is the rows (no zero rows multiplied), across several panels of the
    packed operand (enough FMA chains), reading A where it lies (no packing copy)."""
    assert matmul_tile_rows(rows, host()) == rows
    b = GraphBuilder()
    x = b.input("x", (rows, depth))
    w = b.const((RNG.standard_normal((depth, columns)) / depth).astype("float32"))
    y = b.op("matmul", x, w)
    if bias:
        y = b.op("add", y, b.const(RNG.standard_normal(columns).astype("float32")))
    g = b.build(y)
    out = optimize(g, 2)[0]
    xs = RNG.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(compile_graph(out)(xs), run_reference(g, [xs])[0], rtol=1e-4, atol=1e-4)
    packed = next(n for n in out.nodes if n.op == "panel_matmul")
    a = te.placeholder((rows, depth), name="a")
    wpack = te.placeholder(packed.inputs[1].shape, name="w")
    stages = {st.name: st for st in default_schedule(nn.panel_matmul(a, wpack, columns, mr=rows)).state.stages}
    assert stages["matmul_apack"].attach == "inline"
    output = stages["matmul"]
    row_loop, rows_in_tile = output.leaves.index("i_1_0"), output.leaves.index("i_1_1")
    extents = [output.loops[lp].extent for lp in output.leaves[row_loop + 1:rows_in_tile]]
    per_tile = int(np.prod([getattr(e, "value", e) for e in extents]))
    panels, vectors = packed.inputs[1].shape[0], packed.inputs[1].shape[2] // host().vector_lanes
    chains = rows * per_tile * vectors
    assert (per_tile == 1 or chains <= 8) and (panels % (2 * per_tile) or chains * 2 > 8)  # the most chains up to 8


class _Packed(Defaults):
    """The defaults, but A packed before the product."""

    def pick(self, name, values, default):
        return 0 if name.endswith("_apack_in_place") else super().pick(name, values, default)


@settings(max_examples=8, deadline=None)
@given(st.integers(2, 5), st.integers(0, 5), st.integers(1, 40), st.booleans(), st.booleans())
def test_a_product_reads_a_where_it_lies_or_packs_it_with_the_same_numbers(tiles, extra, depth, transpose_a, pack):
    """By default each tile reads its mr rows of A in place (no packing copy, no barrier), the rows past A's end
    repeating its last; packed, A is copied in panels first. Any row count, both equal to NumPy's product."""
    mr, columns = 6, 20
    rows = tiles * mr + extra
    a = te.placeholder((depth, rows) if transpose_a else (rows, depth), name="a")
    wpack = te.placeholder((-(-columns // 8), depth, 8), name="w")
    out = nn.panel_matmul(a, wpack, columns, transpose_a=transpose_a, mr=mr)
    sch = default_schedule(out, knobs=_Packed() if pack else None)
    assert (next(st for st in sch.state.stages if st.name == "matmul_apack").attach == "inline") != pack
    x = RNG.standard_normal(a.shape).astype("float32")
    w = RNG.standard_normal((depth, columns)).astype("float32")
    packed = np.zeros(wpack.shape, "float32")
    for p in range(wpack.shape[0]):
        packed[p, :, :min(8, columns - 8 * p)] = w[:, 8 * p:8 * p + 8]
    got = build(sch, args=[a, wpack, out]).run(x, packed)
    np.testing.assert_allclose(got, (x.T if transpose_a else x) @ w, rtol=1e-4, atol=1e-4)


def test_the_gemm_tile_has_the_rows_that_pad_least():
    """Fewer than 6 rows: the rows; then 6 or 8 (where 32 registers hold 8 rows of two accumulators), or from 56
    rows on 14, whichever pads fewer rows, the taller where they pad nearly alike (128 and 197 rows: 8, not 14
    or 6; 112: 14); AVX2's 16 registers keep 6."""
    avx512, avx2 = Target.with_lanes(16), Target.with_lanes(8)
    assert [matmul_tile_rows(r, avx512) for r in (1, 5, 6, 12, 16, 17, 24, 40, 56, 112, 128, 197, 512)] == \
        [1, 5, 6, 6, 8, 6, 8, 8, 14, 14, 8, 8, 14]
    assert [matmul_tile_rows(r, avx2) for r in (1, 16, 128)] == [1, 6, 6]


def test_a_gemm_tile_whose_rows_of_a_share_one_l1_set_beyond_its_ways_is_left_out():
    """The tile reads its rows of A in place: 14 rows 4 KiB apart (k = 1024 floats) fall into one set of a
    32 KiB 8-way L1 and evicted each other at every step of k, so such a product runs tiles of 8; rows 2 KiB
    apart share a set 7 at a time and keep 14, as do rows 4000 bytes apart; 4100 bytes apart they crowd one set
    again. A 12-way L1 of 48 KiB has the same 4 KiB span per way."""
    avx512 = dataclasses.replace(Target.with_lanes(16), l1d_bytes=32 * 1024, l1d_ways=8)
    assert [rows_per_l1_set(14, b, avx512) for b in (2048, 4000, 4096, 4100, 8192)] == [7, 1, 14, 14, 14]
    assert [matmul_tile_rows(1024, avx512, 2, b) for b in (None, 2048, 4000, 4096, 4100, 12288)] == \
        [14, 14, 14, 8, 8, 8]
    wide = dataclasses.replace(avx512, l1d_bytes=48 * 1024, l1d_ways=12)
    assert matmul_tile_rows(1024, wide, 2, 4096) == 8 and matmul_tile_rows(1024, wide, 2, 3072) == 14


def test_intels_avx512_gemm_panels_are_three_vectors_wide_with_tiles_of_eight_rows():
    """A tile of 8 rows x 3 vectors (24 accumulators) reads less of A per FMA; 14 rows x 3 would not fit the
    registers, so 112 rows run as tiles of 8 there. Columns that three vectors would pad by more than two and more
    than 2% (512, 1024) keep two, as other CPUs do."""
    intel = dataclasses.replace(Target.with_lanes(16), vendor="GenuineIntel")
    amd, avx2 = dataclasses.replace(Target.with_lanes(16), vendor="AuthenticAMD"), Target.with_lanes(8)
    assert [matmul_panel(t, 768) for t in (intel, amd, avx2)] == [48, 32, 16]
    assert [matmul_panel(intel, n) for n in (64, 512, 1000, 1024, 2304, 3072, 4096, 50257)] == \
        [32, 32, 48, 32, 48, 48, 48, 48]
    assert [matmul_tile_rows(r, intel, 3) for r in (1, 5, 16, 112, 128, 197)] == [1, 5, 8, 8, 8, 8]


def test_winograd_weights_come_in_blocks_of_two_vectors_where_the_channels_fill_them():
    avx512, avx2 = Target.with_lanes(16), Target.with_lanes(8)
    assert [winograd_block(o, avx512) for o in (16, 24, 32, 40, 512)] == [16, 16, 32, 32, 32]
    assert [winograd_block(o, avx2) for o in (8, 16, 512)] == [16, 16, 16]


def test_the_winograd_gemm_tile_holds_fourteen_accumulators_with_32_registers():
    """AVX-512, two-vector blocks: 7 tiles a register tile where that pads least (49 tiles: 7 x 7; 16 tiles: 6, 6
    and a guarded 4); AVX2, or one-vector blocks, keep the compute's rows (4 to 6)."""
    avx512, avx2 = Target.with_lanes(16), Target.with_lanes(8)
    attrs = {"block": 32, "tiles": (1, 7, 7), "mr": 5}
    assert winograd_rows(attrs, avx512) == 7
    assert winograd_rows({**attrs, "tiles": (1, 4, 4)}, avx512) == 6
    assert winograd_rows({**attrs, "block": 16}, avx512) == 5
    assert winograd_rows({**attrs, "block": 16}, avx2) == 5
