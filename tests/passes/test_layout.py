"""The layout pass: chains of convolutions run in NCHW[x]c with transforms only at their ends, and the graph keeps
its meaning (checked against run_reference of the original, and compiled)."""

from __future__ import annotations

import numpy as np
import pytest

from tilegrad.errors import TilegradError
from tilegrad.executor import compile_graph
from tilegrad.ir.graph import GraphBuilder
from tilegrad.ir.interpret import run_reference
from tilegrad.passes import optimize
from tilegrad.passes.conv_algorithm import conv_algorithm
from tilegrad.passes.layout import layout
from tilegrad.passes.context import PassContext
from tilegrad.target import Target

RNG = np.random.default_rng(0)
DIRECT = {"conv_algorithm": "direct"}  # blocked_conv for every convolution, whatever else the pass could pick


def _const(b: GraphBuilder, *shape):
    return b.const((RNG.standard_normal(shape) * 0.3).astype("float32"))


def _conv(b, x, out_channels, kernel=1, stride=1, group=1, bias=True):
    channels, pad = x.type.shape[1], kernel // 2
    w = _const(b, out_channels, channels // group, kernel, kernel)
    return b.op("conv", x, w, *([_const(b, out_channels)] if bias else []), strides=[stride, stride],
                pads=[pad] * 4, group=group)


def bottleneck(channels=32, width=16, size=10):
    """ResNet's bottleneck: 1x1 -> relu -> 3x3 -> relu -> 1x1, plus the input, then relu."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    h = b.op("relu", _conv(b, x, width))
    h = b.op("relu", _conv(b, h, width, kernel=3))
    y = b.op("relu", b.op("add", _conv(b, h, channels, bias=False), x))
    return b.build(y, ["y"])


def inverted_residual(channels=16, expand=6, stride=1, size=12):
    """MobileNetV2's block: 1x1 expand -> clip(0, 6) -> depthwise 3x3 -> clip -> 1x1 project (+ the input)."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    hidden = channels * expand
    h = b.op("clip", _conv(b, x, hidden), min=0.0, max=6.0)
    h = b.op("clip", _conv(b, h, hidden, kernel=3, stride=stride, group=hidden), min=0.0, max=6.0)
    y = _conv(b, h, channels)
    if stride == 1:
        y = b.op("add", y, x)
    return b.build(y, ["y"])


def _run_pass(g, **options):
    """conv_algorithm then layout, as the pipeline runs them; the layout pass's notes."""
    # 8 lanes whatever the host: a block given per node leaves the other nodes at the target's lanes
    ctx = PassContext(target=Target.with_lanes(8), options={**DIRECT, "layout_block": 8, **options})
    packed = conv_algorithm(g, ctx)
    ctx.notes = []
    return layout(packed, ctx), ctx.notes


def _inputs(g):
    return [RNG.standard_normal(v.shape).astype(v.dtype) for v in g.inputs]


def _check_meaning(g, out, inputs=None):
    inputs = inputs or _inputs(g)
    for want, got in zip(run_reference(g, inputs), run_reference(out, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _ops(g):
    return [n.op for n in g.nodes]


def _transforms(g):
    return [n for n in g.nodes if n.op.startswith("layout_")]


def test_bottleneck_runs_blocked_between_one_transform_at_each_end():
    g = bottleneck()
    out, notes = _run_pass(g)
    _check_meaning(g, out)
    assert _ops(out).count("conv_nchwc") == 3 and "blocked_conv" not in _ops(out)
    to, back = _transforms(out)
    assert to.op == "layout_to_blocked" and to.inputs[0] is g.inputs[0]  # for the residual add
    assert back.op == "layout_from_blocked" and back.outputs[0] is out.outputs[0]
    assert out.nodes[0].op == "conv_nchwc" and out.nodes[0].inputs[0] is g.inputs[0]  # reads NCHW at the start
    assert len(notes) == 1 and "NCHW8c chain" in notes[0] and "to_blocked(x)" in notes[0]


@pytest.mark.parametrize("stride", [1, 2])
def test_inverted_residual_keeps_the_depthwise_conv_blocked(stride):
    g = inverted_residual(stride=stride)
    out, _ = _run_pass(g)
    _check_meaning(g, out)
    assert _ops(out).count("conv_nchwc") == 2 and _ops(out).count("depthwise_conv_nchwc") == 1
    kinds = [n.op for n in _transforms(out)]
    assert kinds == (["layout_to_blocked"] if stride == 1 else []) + ["layout_from_blocked"]


def test_channels_that_are_not_whole_blocks_pools_and_a_classifier_head():
    b = GraphBuilder()
    x = b.input("x", (2, 3, 17, 15))
    h = b.op("relu", _conv(b, x, 12, kernel=3, stride=2))
    h = b.op("max_pool", h, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = b.op("mul", _conv(b, h, 12, kernel=3, group=12), _const(b, 12, 1, 1))  # per-channel scale
    h = b.op("avg_pool", _conv(b, h, 20), kernel_shape=[2, 2], strides=[1, 1], ceil_mode=1)
    h = b.op("flatten", b.op("global_avg_pool", h))
    g = b.build(b.op("gemm", h, _const(b, 20, 5), _const(b, 5)), ["y"])
    out, _ = _run_pass(g)
    _check_meaning(g, out)
    assert {"max_pool_nchwc", "avg_pool_nchwc", "global_avg_pool_nchwc"} <= set(_ops(out))
    (back,) = _transforms(out)
    assert back.op == "layout_from_blocked" and back.attrs["channels"] == 20
    assert [n.op for n in out.nodes if n.inputs[0] is back.outputs[0]] == ["flatten"]
    mul = next(n for n in out.nodes if n.op == "mul")
    assert mul.inputs[1].shape == (1, 2, 1, 1, 8)  # the constant re-laid out at compile time


def test_concat_of_whole_blocks_stays_blocked_and_a_partial_one_does_not():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 6, 6))
    whole = b.op("concat", _conv(b, x, 16), _conv(b, x, 8, kernel=3), axis=1)
    partial = b.op("concat", _conv(b, whole, 4), _conv(b, whole, 8), axis=-3)
    g = b.build(b.op("relu", partial), ["y"])
    out, _ = _run_pass(g)
    _check_meaning(g, out)
    concats = [n for n in out.nodes if n.op == "concat"]
    assert [len(n.outputs[0].shape) for n in concats] == [5, 4]
    assert [n.op for n in _transforms(out)] == ["layout_from_blocked", "layout_from_blocked"]


def test_unsafe_ops_on_padded_lanes_end_the_chain():
    """With 12 channels, lanes 12..15 are padding; log would make them -inf and 0 * inf poisons the next conv."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 5, 5))
    h = b.op("log", b.op("add", b.op("relu", _conv(b, x, 12)), b.const(np.float32(1.0))))
    g = b.build(_conv(b, h, 8, kernel=3), ["y"])
    out, _ = _run_pass(g)
    _check_meaning(g, out)
    log = next(n for n in out.nodes if n.op == "log")
    assert len(log.outputs[0].shape) == 4
    assert np.isfinite(run_reference(out, _inputs(g))[0]).all()


@pytest.mark.parametrize("winograd,block,width", [("winograd2", 8, 16), ("winograd4", 16, 20)])
def test_a_winograd_convolution_runs_blocked_in_the_chain(winograd, block, width):
    """The bottleneck's 3x3 as Winograd reads the blocked 1x1's output and writes blocks for the next 1x1 (its
    output channels not whole blocks where the width is 20): no transform between them; compiled as well."""
    g = bottleneck(width=width)
    out, notes = _run_pass(g, conv_algorithm={g.nodes[2].name: winograd}, layout_block=block)
    _check_meaning(g, out)
    assert _ops(out).count("winograd_conv_nchwc") == 1 and _ops(out).count("conv_nchwc") == 2
    assert len(_transforms(out)) == 2 and "winograd_conv_nchwc" in notes[0]
    x = _inputs(g)
    (want,) = run_reference(g, x)
    np.testing.assert_allclose(compile_graph(out)(*x), want, rtol=1e-4, atol=1e-4)


def test_a_lone_winograd_convolution_stays_nchw():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 9, 9))
    g = b.build(b.op("relu", _conv(b, x, 8, kernel=3)), ["y"])
    packed, _ = _run_pass(g, conv_algorithm="winograd4")
    assert _ops(packed) == ["winograd_conv", "relu"] and layout(packed, PassContext()) is packed


def test_a_lone_convolution_is_left_to_blocked_conv():
    """Between NCHW-only ops (here a conv with a weight computed at run time), a single blocked_conv gains nothing
    from the layout: its own kernel already copies the blocks out."""
    b = GraphBuilder()
    x, w = b.input("x", (1, 8, 6, 6)), b.input("w", (8, 8, 3, 3))
    h = b.op("relu", _conv(b, x, 8))
    h = b.op("relu", b.op("conv", h, w, pads=[1, 1, 1, 1]))
    g = b.build(b.op("add", _conv(b, h, 8), x), ["y"])
    packed, _ = _run_pass(g)
    assert layout(packed, PassContext()) is packed
    assert _ops(packed).count("blocked_conv") == 2


@pytest.mark.parametrize("dilation, group, op", [(2, 1, "conv_nchwc"), (3, 1, "conv_nchwc"), (1, 2, "conv_nchwc"),
                                               (1, 4, "lane_group_conv_nchwc")])
def test_a_lone_dilated_or_grouped_convolution_runs_blocked(dilation, group, op):
    """Their NCHW form runs well below the blocked one (passes/layout.py, `_worth_blocking`): the lone
    convolution is blocked, reading its NCHW input in place (one transform back for the output), or, with groups
    inside one vector (4 channels a group against 8 lanes), blocked first (two transforms)."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 11, 11))
    w = _const(b, 16, 16 // group, 3, 3)
    g = b.build(b.op("relu", b.op("conv", x, w, _const(b, 16), pads=[dilation] * 4, dilations=[dilation] * 2,
                                  group=group)), ["y"])
    out, _ = _run_pass(g)
    _check_meaning(g, out)
    assert _ops(out).count(op) == 1 and len(_transforms(out)) == (2 if op.startswith("lane") else 1)
    x = _inputs(g)
    np.testing.assert_allclose(compile_graph(out)(*x), run_reference(g, x)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("width, blocked", [(15, True), (16, False), (37, False)])
def test_a_lone_depthwise_convolution_is_blocked_only_on_short_rows(width, blocked):
    """Alone between NCHW ops (ConvNeXt's), a depthwise convolution on rows of two vectors or more (16 columns at
    8 lanes) runs in NCHW, without the two transforms; on shorter rows it runs blocked."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 5, width))
    y = b.op("relu", _conv(b, x, 16, kernel=3, group=16))
    g = b.build(b.op("transpose", y, perm=[0, 2, 3, 1]), ["y"])
    out, _ = _run_pass(g)
    assert ("depthwise_conv_nchwc" in _ops(out)) == blocked
    assert len(_transforms(out)) == (2 if blocked else 0)
    x = _inputs(g)
    np.testing.assert_allclose(compile_graph(out)(*x), run_reference(g, x)[0], rtol=1e-4, atol=1e-4)


def test_graphs_without_convolutions_are_returned_as_they_are():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 4, 4))
    g = b.build(b.op("max_pool", b.op("relu", x), kernel_shape=[2, 2]))
    assert layout(g, PassContext()) is g


def test_a_block_of_16_lanes_is_an_option():
    g = bottleneck(channels=24, width=20, size=6)
    out, notes = _run_pass(g, layout_block=16)
    _check_meaning(g, out)
    assert "NCHW16c" in notes[0]
    assert all(n.outputs[0].shape[-1] == 16 for n in out.nodes if n.op == "conv_nchwc")


@pytest.mark.parametrize("make", [bottleneck, inverted_residual])
def test_compiled_graphs_match_numpy(make):
    g = make()
    out, _ = _run_pass(g)
    x = _inputs(g)
    (want,) = run_reference(g, x)
    np.testing.assert_allclose(compile_graph(out)(*x), want, rtol=1e-4, atol=1e-4)
    fused, _ = optimize(g, 2, options=DIRECT)
    bodies = [m.op for n in fused.nodes if n.op == "fused" for m in n.attrs["body"].nodes]
    assert "conv_nchwc" in bodies and "blocked_conv" not in bodies
    np.testing.assert_allclose(compile_graph(fused)(*x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lanes", [8, 16])
def test_the_block_is_the_targets_vector_width(lanes):
    """The pipeline's target, not the host, sizes the channel blocks."""
    g = bottleneck()
    out, _ = optimize(g, 2, options=DIRECT, target=Target.with_lanes(lanes))
    blocks = {n.attrs["block"] for n in out.nodes if n.op == "layout_to_blocked"}
    assert blocks == {lanes}


def test_a_value_given_a_blocked_copy_keeps_its_nchw_form_for_later_consumers():
    """ConvNeXt's shape: the block input feeds a blocked chain and, after it, an NCHW consumer (the residual
    path through a layer norm over channels); the later consumer reads the original, not an unblocked copy."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 8, 8))
    h = b.op("relu", _conv(b, _conv(b, x, 16, kernel=3, group=16), 32))
    y = b.op("reduce_mean", x, axes=[1], keepdims=1)
    g = b.build([h, y], ["h", "y"])
    out, _ = _run_pass(g)
    assert any(n.op == "layout_to_blocked" for n in out.nodes)
    _check_meaning(g, out)


def _conv_names(g):
    return [n.name for n in g.nodes if n.op == "conv"]


def test_a_block_per_convolution_reblocks_only_where_an_op_needs_its_inputs_block():
    """Three convolutions at 16, 8 and 16 lanes, 20 channels (not whole blocks of either), with a residual add of
    two differently blocked values, a depthwise convolution and a pool in the chain: a convolution reads any
    block, the add and the depthwise convolution follow their first input and reblock the other."""
    b = GraphBuilder()
    x = b.input("x", (1, 6, 9, 9))
    a = b.op("relu", _conv(b, x, 20, kernel=3))
    c = b.op("relu", _conv(b, a, 20))
    h = b.op("add", c, a)  # c at 8 lanes, a at 16: a is reblocked to 8
    h = _conv(b, h, 20, kernel=3, group=20)  # depthwise, follows the add's 8
    h = b.op("max_pool", h, kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("relu", _conv(b, h, 12, kernel=3))
    g = b.build(y, ["y"])
    first, second, _, last = _conv_names(g)
    out, notes = _run_pass(g, layout_block={first: 16, second: 8, last: 16})
    _check_meaning(g, out)
    convs = [n for n in out.nodes if n.op == "conv_nchwc"]
    assert [n.outputs[0].shape[-1] for n in convs] == [16, 8, 16]
    (reblock,) = [n for n in out.nodes if n.op == "layout_reblock"]
    relu = next(n for n in out.nodes if n.op == "relu" and n.inputs[0] is convs[0].outputs[0])
    assert reblock.attrs == {"block": 8, "channels": 20} and reblock.inputs[0] is relu.outputs[0]
    assert next(n for n in out.nodes if n.op == "depthwise_conv_nchwc").outputs[0].shape[-1] == 8
    assert next(n for n in out.nodes if n.op == "max_pool_nchwc").outputs[0].shape[-1] == 8
    assert convs[2].inputs[0].shape[-1] == 8  # read as it is, no transform
    assert [n.op for n in _transforms(out)] == ["layout_reblock", "layout_from_blocked"]
    assert len(notes) == 1 and "NCHW8c+16c chain" in notes[0] and "reblock(" in notes[0]
    x_in = _inputs(g)
    np.testing.assert_allclose(compile_graph(out)(*x_in), run_reference(g, x_in)[0], rtol=1e-4, atol=1e-4)


def test_a_named_depthwise_block_and_a_whole_graph_block_keep_the_meaning():
    g = inverted_residual(channels=12, expand=2)
    _, depthwise, _ = _conv_names(g)
    out, _ = _run_pass(g, layout_block={depthwise: 16})
    _check_meaning(g, out)
    # the expansion's clip at 8 lanes, reblocked for the depthwise one at 16; the projection (8) reads 16 as it is
    assert [n.op for n in _transforms(out)] == ["layout_reblock", "layout_to_blocked", "layout_from_blocked"]
    assert next(n for n in out.nodes if n.op == "depthwise_conv_nchwc").outputs[0].shape[-1] == 16
    whole, _ = _run_pass(g, layout_block=16)
    assert "layout_reblock" not in _ops(whole)
    _check_meaning(g, whole)


def test_a_block_for_a_node_the_graph_lacks_or_not_positive_is_an_error():
    g = bottleneck()
    with pytest.raises(TilegradError, match="lacks: nope"):
        _run_pass(g, layout_block={"nope": 8})
    with pytest.raises(TilegradError, match=f"{_conv_names(g)[0]}.*positive"):
        _run_pass(g, layout_block={_conv_names(g)[0]: 0})


def test_a_concat_of_parts_in_different_blocks_reblocks_the_others_to_its_first_parts():
    b = GraphBuilder()
    x = b.input("x", (1, 8, 6, 6))
    h = b.op("concat", b.op("relu", _conv(b, x, 16)), b.op("relu", _conv(b, x, 32, kernel=3)), axis=1)
    g = b.build(_conv(b, h, 8), ["y"])
    first, second, _ = _conv_names(g)
    out, _ = _run_pass(g, layout_block={first: 16, second: 8})
    _check_meaning(g, out)
    (concat,) = [n for n in out.nodes if n.op == "concat"]
    assert [v.shape[-1] for v in concat.inputs] == [16, 16] and concat.outputs[0].shape == (1, 3, 6, 6, 16)
    (reblock,) = [n for n in out.nodes if n.op == "layout_reblock"]
    assert reblock.outputs[0] is concat.inputs[1] and reblock.inputs[0].shape[-1] == 8


def resnext_block(channels=32, width=32, groups=8, size=9, stride=1):
    """ResNeXt's bottleneck: 1x1 -> relu -> grouped 3x3 -> relu -> 1x1, plus the input, then relu."""
    b = GraphBuilder()
    x = b.input("x", (1, channels, size, size))
    h = b.op("relu", _conv(b, x, width))
    h = b.op("relu", _conv(b, h, width, kernel=3, stride=stride, group=groups))
    y = _conv(b, h, channels, bias=False)
    return b.build(b.op("relu", y if stride > 1 else b.op("add", y, x)), ["y"])


@pytest.mark.parametrize("width,groups,stride", [(32, 8, 1), (32, 2, 2), (48, 12, 1), (32, 16, 2)])
def test_a_grouped_convolution_runs_blocked_in_the_chain(width, groups, stride):
    """With blocks of 8 lanes, groups of 4 or 2 channels lie inside one vector (the rotations of
    te/nn/lane_groups.py); groups of 16 span two blocks (the blocked kernel of te/nn/conv_groups.py)."""
    g = resnext_block(width=width, groups=groups, stride=stride)
    out, _ = _run_pass(g)
    _check_meaning(g, out)
    if width // groups < 8:
        (grouped,) = [n for n in out.nodes if n.op == "lane_group_conv_nchwc"]
        assert grouped.inputs[1].shape[1] == width // groups and grouped.inputs[0].shape[-1] == 8
    else:
        (grouped,) = [n for n in out.nodes if n.op == "conv_nchwc" and n.attrs["group_channels"]]
        assert grouped.attrs["group_channels"] == [width // groups] * 2 and grouped.inputs[0].shape[-1] == 8
    x = _inputs(g)
    np.testing.assert_allclose(compile_graph(optimize(g, 2)[0])(*x), run_reference(g, x)[0], rtol=1e-4, atol=1e-4)


def test_a_grouped_convolution_whose_groups_miss_the_block_leaves_the_chain():
    g = resnext_block(width=48, groups=12)  # 4 channels a group: fits blocks of 16 (conv_algorithm), not of 32
    out, _ = _run_pass(g, layout_block=32)
    _check_meaning(g, out)
    assert [n.attrs["group"] for n in out.nodes if n.op == "blocked_conv"] == [1, 12, 1]  # lone convs stay too
