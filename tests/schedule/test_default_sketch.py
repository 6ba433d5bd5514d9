"""The default sketch: the hand-written rules (schedule/defaults.py, rules_nchwc.py, rules_conv_algorithms.py) with
their degrees of freedom as parameters. Its default point binds to exactly the trace `default_schedule` gives
(every workload, blocked and algorithmic convolutions, kernels of fused models), and every point of it, tiles that
do not divide their loops included, compiles to the reference interpreter's numbers."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn as tnn

from tilegrad import te
from tilegrad.errors import ScheduleError
from tilegrad.kernel import build
from tilegrad.schedule import Schedule, apply_trace
from tilegrad.schedule.defaults import default_schedule
from tilegrad.schedule.knobs import Defaults
from tilegrad.schedule.sketch import generate_sketches
from tilegrad.schedule.space import Sketch, Space
from tilegrad.schedule.state import LoopState
from tilegrad.target import Target
from tilegrad.te import nn
from tilegrad.te.interpret import interpret
from tilegrad.te.nn import im2col, winograd
from tilegrad.te.nn.nchwc import conv2d_nchwc, max_pool2d_nchwc
from tilegrad.tune.model import model_graph
from tilegrad.tune.task import extract_tasks
from tilegrad.workloads import WORKLOADS

from .strategies import sketch_points


def _p(shape, name):
    return te.placeholder(shape, "float32", name)


def _inputs(output: te.Tensor) -> list[te.Tensor]:
    return list(LoopState([output]).placeholders)


EXTRA = {  # computes the workload catalogue lacks: blocked layouts, convolution algorithms, larger GEMMs
    "conv2d_nchwc_c4": lambda: conv2d_nchwc(_p((1, 4, 8, 8), "X"), _p((2, 4, 3, 3, 4), "W"), padding=1, name="Y"),
    "conv2d_nchwc_b8_14x14": lambda: conv2d_nchwc(_p((1, 2, 14, 14, 8), "X"), _p((4, 16, 3, 3, 8), "W"),
                                                  padding=1, name="Y"),
    "depthwise_c4_37": lambda: nn.depthwise_conv2d(_p((1, 4, 5, 37), "X"), _p((4, 1, 3, 3), "W"), padding=1, name="Y"),
    "max_pool2d_nchwc": lambda: max_pool2d_nchwc(_p((1, 2, 11, 12, 8), "X"), 3, stride=2, padding=1, name="Y"),
    "winograd_f4": lambda: winograd.winograd_conv2d(_p((1, 8, 12, 12), "X"), _p((16, 8, 3, 3), "W"), m=4,
                                                    padding=1, block=8, name="Y"),
    "im2col": lambda: im2col.im2col_conv2d(_p((1, 5, 10, 11), "X"), _p((12, 5, 3, 3), "W"), padding=1, name="Y"),
    "packed_matmul_200x64x96": lambda: nn.packed_matmul(_p((200, 64), "A"), _p((96, 64), "B"), transpose_b=True,
                                                        mr=6, nr=16, name="C"),
    "packed_matmul_70x70x40": lambda: nn.packed_matmul(_p((70, 70), "A"), _p((40, 70), "B"), transpose_b=True,
                                                       mr=6, nr=8, name="C"),
    "packed_conv2d_c16_20x28": lambda: nn.packed_conv2d(_p((1, 16, 20, 28), "X"), _p((32, 16, 3, 3), "W"),
                                                        padding=1, block=16, name="Y"),
    "batch_matmul_attention": lambda: nn.batch_matmul(_p((4, 64, 32), "A"), _p((4, 32, 64), "B"), name="C"),
    "attention_2x23x19x8": lambda: nn.attention(_p((1, 2, 23, 8), "Q"), _p((1, 2, 19, 8), "K"), _p((1, 2, 19, 8), "V"),
                                                _p((1, 1, 1, 19), "M"), name="Y"),
}
MAKERS = {**{name: (lambda make=make: make()[1]) for name, make in WORKLOADS.items()}, **EXTRA}

# One workload per parameterised rule; the hypothesis tests draw points of its default sketch.
RULE_WORKLOADS = {
    "packed_matmul": "packed_matmul_37x29x13_bt",
    "packed_matmul_large": "packed_matmul_200x64x96",
    "packed_matmul_k_blocks": "packed_matmul_70x70x40",
    "packed_conv": "packed_conv2d_o11_block8",
    "nchwc_conv": "conv2d_nchwc_c4",
    "nchwc_conv_blocks": "conv2d_nchwc_b8_14x14",
    "nchwc_pool": "max_pool2d_nchwc",
    "window": "depthwise_c4_37",
    "matmul": "matmul_64x48x40",
    "batch_matmul": "batch_matmul_3x17x12x9",
    "dense_epilogue": "dense_5x24x10",
    "conv": "conv2d_3x3_c4_14x14",
    "conv3d": "conv3d_c4_6x7x5",
    "im2col": "im2col",
    "winograd": "winograd_f4",
    "attention": "attention_2x23x19x8",
}


@functools.cache
def _default_sketch(name: str, lanes: int = 8) -> Sketch:
    return generate_sketches(lambda: [MAKERS[name]()], Target.with_lanes(lanes))[0]


@functools.cache
def _data(name: str):
    output = MAKERS[name]()
    rng = np.random.default_rng(sum(map(ord, name)))
    arrays = {t.name: rng.standard_normal(t.shape).astype(t.dtype) for t in _inputs(output)}
    return arrays, interpret(output, arrays)


def _check(name: str, params: dict) -> None:
    """`params` is a valid point of the default sketch whose trace compiles to the interpreter's numbers."""
    sketch = _default_sketch(name)
    assert sketch.valid(params), params
    trace = sketch.bind(params)
    assert trace.variables() == []
    output = MAKERS[name]()
    sch = Schedule([output])
    sch.state = apply_trace([output], trace)
    inputs = _inputs(output)
    kern = build(sch, args=inputs + list(sch.state.outputs))
    arrays, want = _data(name)
    got = kern.run(*[arrays[t.name] for t in inputs])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} {params}: {trace.to_json()}")


# -- the default point is the hand-written schedule ---------------------------------------------------------------


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_default_point_binds_to_the_default_schedule(name, lanes):
    sketch = _default_sketch(name, lanes)
    params = sketch.default_params()
    assert sketch.valid(params)
    assert sketch.bind(params).steps == default_schedule(MAKERS[name](), Target.with_lanes(lanes)).trace.steps


@functools.cache
def _model_tasks():
    torch.manual_seed(0)
    block = tnn.Sequential(tnn.Conv2d(16, 32, 3, padding=1), tnn.BatchNorm2d(32), tnn.ReLU(), tnn.MaxPool2d(2),
                           tnn.Flatten(), tnn.Linear(32 * 8 * 8, 40), tnn.ReLU(), tnn.Linear(40, 10)).eval()
    return extract_tasks(model_graph(block, example_inputs=(torch.randn(2, 16, 16, 16),)))


def test_default_point_of_fused_model_kernels_is_their_default_schedule():
    tasks = _model_tasks()
    parameterised = 0
    for task in tasks:
        sketch = generate_sketches(lambda task=task: task.compute()[1])[0]
        params = sketch.default_params()
        parameterised += bool(params)
        assert sketch.bind(params).steps == task.default_trace().steps, task.name
    assert parameterised >= 2  # the convolution with its epilogue and the dense layers


def test_every_parameterised_rule_exposes_parameters():
    for rule, name in RULE_WORKLOADS.items():
        _, space = _default_sketch(name).space({})
        assert space.structural + space.choices, rule
        assert any(c.var.endswith("_grain") for c in space.structural), rule


def test_the_tile_parameters_include_tiles_that_do_not_divide_their_loops():
    """mb of the packed GEMM runs over whole tiles 1..16 of 7 (padded 37 rows), wr of the packed convolution over
    1..the register budget of its 10 columns, mr/nr/mb/kb of the matmul over values beyond the divisors."""
    def values(name, var):
        _, space = _default_sketch(name).space({})
        return next(c.values for c in space.choices if c.var == var)

    assert values("packed_matmul_37x29x13_bt", "C_mb") == tuple(6 * t for t in range(1, 8))
    assert 4 in values("packed_conv2d_o11_block8", "Y_wr")
    assert 5 in values("matmul_64x48x40", "C_mr") and 24 in values("matmul_64x48x40", "C_nr")
    assert 3 in values("conv2d_3x3_c4_14x14", "Y_cr") and 5 in values("conv2d_3x3_c4_14x14", "Y_wr")
    assert 3 in values("conv2d_nchwc_c4", "Y_wr")


def test_defaults_refuse_a_default_outside_the_values():
    with pytest.raises(ScheduleError, match="C_mb: default 7"):
        Defaults().choice("C_mb", (6, 12), 7)
    with pytest.raises(ScheduleError, match="default 3"):
        Space({}).pick("x", (0, 1), 3)


# -- every point compiles and matches -----------------------------------------------------------------------------


@settings(max_examples=8, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("rule", sorted(RULE_WORKLOADS))
def test_random_points_of_each_rule_match_the_interpreter(rule, data):
    name = RULE_WORKLOADS[rule]
    _check(name, data.draw(sketch_points(_default_sketch(name))))


NON_DIVIDING = [  # tiles that leave tails, with the other choices off their defaults
    ("packed_matmul_37x29x13_bt", {"C_mb": 30, "C_nc": 2, "C_order": 1, "C_grain": 2, "C_padded_unroll": 0}),
    ("packed_matmul_200x64x96", {"C_mb": 66, "C_nc": 4, "C_grain": 2, "C_order": 0}),
    ("packed_matmul_70x70x40", {"C_padded_kblocks": 4, "C_mb": 54, "C_grain": 1}),  # k: 3 x 18 + 16
    ("packed_matmul_70x70x40", {"C_padded_kblocks": 2, "C_mb": 30, "C_padded_unroll": 0}),
    ("packed_conv2d_o11_block8", {"Y_blocks": 2, "Y_wr": 3, "Y_blocked_taps_outer": 1, "Y_grain": 1}),
    ("conv2d_nchwc_c4", {"Y_wr": 3, "Y_local_taps_outer": 1, "Y_local_unroll": 0, "Y_grain": 2}),
    ("conv2d_nchwc_b8_14x14", {"Y_blocks": 2, "Y_wr": 5, "Y_grain": 3}),
    ("max_pool2d_nchwc", {"Y_wr": 4, "Y_grain": 1}),
    ("matmul_64x48x40", {"C_mr": 5, "C_nr": 24, "C_mb": 32, "C_local_kb": 32, "C_grain": 1}),
    ("batch_matmul_3x17x12x9", {"C_mr": 3, "C_nr": 16, "C_mb": 16, "C_local_kb": 12, "C_grain": 3}),
    ("conv2d_3x3_c4_14x14", {"Y_wr": 5, "Y_cr": 3, "Y_grain": 3}),
    ("winograd_f4", {"Y_gemm_mr": 4, "Y_gemm_grain": 1}),  # 9 tiles, padded to 10 rows for the default mr 5
]


@pytest.mark.parametrize("name,changes", NON_DIVIDING, ids=[n for n, _ in NON_DIVIDING])
def test_points_with_tails_match_the_interpreter(name, changes):
    sketch = _default_sketch(name)
    params = sketch.completed({**sketch.default_params(), **changes})
    assert {k: params[k] for k in changes} == changes
    _check(name, params)
