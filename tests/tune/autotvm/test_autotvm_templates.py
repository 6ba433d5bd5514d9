"""Every AutoTVM template: its default config replays the default rules' schedule, and random configs build
kernels that compute what NumPy computes."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view
from torch import nn

from tilegrad.kernel import build
from tilegrad.schedule.defaults import default_schedule
from tilegrad.tune.autotvm import find_template
from tilegrad.tune.model import model_graph
from tilegrad.tune.task import extract_tasks
from tilegrad.workloads import WORKLOADS


def _conv2d(x, w, stride=(1, 1), padding=(0, 0), groups=1):
    x = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    kh, kw = w.shape[2:]
    win = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride[0], ::stride[1]]
    cg, og = x.shape[1] // groups, w.shape[0] // groups
    return np.concatenate([np.einsum("nchwyx,ocyx->nohw", win[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og])
                           for g in range(groups)], axis=1)


NUMPY = {  # workload -> (template, reference)
    "matmul_64x48x40": ("matmul", lambda a, b: a @ b),
    "batch_matmul_3x17x12x9": ("matmul", lambda a, b: a @ b),
    "dense_5x24x10": ("matmul", lambda x, w, bias: x @ w.T + bias),
    "packed_matmul_37x29x13_bt": ("packed_matmul", lambda a, b: a @ b.T),
    "conv2d_3x3_c4_14x14": ("conv2d", lambda x, w: _conv2d(x, w, padding=(1, 1))),
    "depthwise_conv2d_c8_stride2": ("depthwise_conv2d", lambda x, w: _conv2d(x, w, (2, 2), (1, 1), groups=8)),
    "packed_conv2d_o11_block8": ("packed_conv2d", lambda x, w: _conv2d(x, w, (1, 2), (1, 1))),
}


@pytest.mark.parametrize("name", sorted(NUMPY))
def test_a_workloads_template_starts_at_the_default_schedule(name):
    _, out = WORKLOADS[name]()
    template = find_template([out])
    assert template is not None and template.name == NUMPY[name][0]
    space = template.space([out])
    assert len(space) > 1
    assert template.schedule(space.default(), [out]).trace == default_schedule(out).trace


@pytest.mark.parametrize("name", sorted(NUMPY))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_configs_of_a_workloads_template_match_numpy(name, data):
    inputs, out = WORKLOADS[name]()
    template = find_template([out])
    space = template.space([out])
    index = data.draw(st.integers(0, len(space) - 1), label="config")
    sch = template.schedule(space.get(index), [out])
    kern = build(sch, args=inputs + [sch.state.outputs[0]])
    rng = np.random.default_rng(index)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in inputs]
    np.testing.assert_allclose(kern.run(*arrays), NUMPY[name][1](*arrays), rtol=1e-4, atol=1e-4,
                               err_msg=f"config {space.get(index).to_json()}\ntrace:\n{sch.trace}")


class _Blocked(nn.Module):
    """Convolutions kept in the blocked layout (NCHWc) between them, a depthwise one among them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)

    def forward(self, x):
        return self.depthwise(torch.relu(self.conv(x)))


@pytest.fixture(scope="module")
def blocked_tasks():
    torch.manual_seed(0)
    return extract_tasks(model_graph(_Blocked().eval(), example_inputs=(torch.randn(1, 3, 10, 10),)))


def test_blocked_convolutions_have_the_nchwc_template_at_their_default(blocked_tasks):
    templated = [t for t in blocked_tasks if find_template(t.compute()[1]) is not None]
    assert {find_template(t.compute()[1]).name for t in templated} == {"conv2d_nchwc"}
    assert len(templated) == 2  # the convolution (with its relu) and the depthwise one
    for task in templated:
        template = find_template(task.compute()[1])
        space = template.space(task.compute()[1])
        assert template.schedule(space.default(), task.compute()[1]).trace == task.default_trace()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_configs_of_blocked_convolutions_match_numpy(blocked_tasks, data):
    task = data.draw(st.sampled_from([t for t in blocked_tasks if find_template(t.compute()[1]) is not None]))
    template = find_template(task.compute()[1])
    space = template.space(task.compute()[1])
    index = data.draw(st.integers(0, len(space) - 1), label="config")
    trace = template.schedule(space.get(index), task.compute()[1]).trace
    inputs = task.random_inputs()
    (want,) = task.reference(inputs)
    np.testing.assert_allclose(build(task.node, trace).run(*inputs), want, rtol=1e-4, atol=1e-4,
                               err_msg=f"config {space.get(index).to_json()}\ntrace:\n{trace}")


@pytest.mark.parametrize("x_shape,w_shape,pad,partitioned", [
    ((1, 128, 28, 28, 16), (16, 2048, 3, 3, 16), 1, True),   # DeepLab's atrous head: 2.3 MiB of weights a tile
    ((1, 64, 28, 28, 16), (128, 1024, 1, 1, 16), 0, True),   # an input past L2 read per block of outputs
    ((1, 32, 14, 14, 16), (32, 512, 3, 3, 16), 1, True),     # 590 KiB of weights a tile
    ((1, 4, 9, 9, 16), (4, 64, 3, 3, 16), 1, False),
])
def test_the_nchwc_template_starts_at_the_rules_partitions(x_shape, w_shape, pad, partitioned):
    """Where the rule sums the input channels in partitions, the template's default config is the same schedule
    (its `kblocks` knob), and a config with the partitions off is in its space."""
    import dataclasses

    from tilegrad import te
    from tilegrad.target import Target
    from tilegrad.te.nn import nchwc

    target = dataclasses.replace(Target.with_lanes(16), l2_bytes=1 << 20)
    out = nchwc.conv2d_nchwc(te.placeholder(x_shape, name="X"), te.placeholder(w_shape, name="W"), 1, pad)
    want = default_schedule(out, target).trace
    template = find_template([out])
    space = template.space([out], target)
    assert template.schedule(space.default(), [out], target).trace == want
    assert ("rfactor" in str(want)) == partitioned
    assert 1 in [e.val for e in space.knobs["kblocks"].entities]


@pytest.mark.parametrize("lanes", [8, 16])
def test_the_nchwc_template_tiles_a_pointwise_convolution_as_the_rule_does(lanes):
    """An unstrided 1 x 1 convolution: the template's default is the rule's schedule (its pixels one row of tiles
    on AVX2, its image rows on AVX-512), and both values of its `flat` knob compute the convolution."""
    from tilegrad import te
    from tilegrad.target import Target
    from tilegrad.te.interpret import interpret
    from tilegrad.te.nn import nchwc

    target = Target.with_lanes(lanes)
    x, w = te.placeholder((1, 3, 14, 14, lanes), name="X"), te.placeholder((4, 3 * lanes, 1, 1, lanes), name="W")
    out = nchwc.conv2d_nchwc(x, w)
    template = find_template([out])
    space = template.space([out], target)
    default = template.schedule(space.default(), [out], target).trace
    assert default == default_schedule(out, target).trace
    assert ("fuse(conv2d_nchwc, loops=[h, w])" in str(default)) == (lanes == 8)
    rng = np.random.default_rng(0)
    xv, wv = (rng.standard_normal(t.shape).astype("float32") for t in (x, w))
    want = interpret(out, {"X": xv, "W": wv})
    for flat in (0, 1):
        config = next(space.get(i) for i in range(len(space)) if space.get(i)["flat"].val == flat)
        got = build(template.schedule(config, [out], target), args=[x, w, out]).run(xv, wv)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"config {config.to_json()}")
