"""An element-wise or injective output whose innermost axis is short (an NCHW image quantized into NHWC, 1-4
channels a pixel): the default schedule vectorises the axis around it and unrolls the short one inside, and the
results equal the reference interpreter's on every width, tails included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tilegrad.kernel import build
from tilegrad.loop import lower
from tilegrad.loop.ir import For, walk
from tilegrad.schedule.defaults import default_schedule
from tilegrad.target import host
from tilegrad.te import tensor as te
from tilegrad.te.interpret import interpret
from tilegrad.te.nn import quantized
from tilegrad.te.nn.transform import transpose


def _nhwc_quantized(channels: int, height: int, width: int):
    x = te.placeholder((1, channels, height, width), name="x")
    scale, zero = te.placeholder((), name="scale"), te.placeholder((), dtype="uint8", name="zero")
    return [x, scale, zero], transpose(quantized.quantize(x, scale, zero, axis=1), (0, 2, 3, 1))


@settings(max_examples=12, deadline=None)
@given(channels=st.integers(1, 4), height=st.integers(1, 5), width=st.integers(1, 70))
def test_quantized_nchw_to_nhwc_matches_the_interpreter(channels, height, width):
    inputs, out = _nhwc_quantized(channels, height, width)
    rng = np.random.default_rng(width)
    arrays = [rng.standard_normal(inputs[0].shape).astype(np.float32) * 3, np.array(0.02, np.float32),
              np.array(120, np.uint8)]
    sch = default_schedule(out, host())
    got = build(sch, args=inputs + [sch.state.outputs[0]]).run(*arrays)
    want = interpret(out, {t.name: a for t, a in zip(inputs, arrays)})
    np.testing.assert_array_equal(got, want)


def test_the_axis_around_the_channels_is_the_vector():
    inputs, out = _nhwc_quantized(3, 224, 224)
    sch = default_schedule(out, host())
    kernel = lower(sch.state, "nhwc", inputs + [sch.state.outputs[0]])
    loops = [s for s in walk(kernel.body) if isinstance(s, For)]
    vector = [lp for lp in loops if lp.kind == "vectorized"]
    assert len(vector) == 1 and vector[0].extent.value == host().vector_lanes
    inside = [s for s in walk(vector[0].body) if isinstance(s, For)]
    assert [(lp.kind, lp.extent.value) for lp in inside] == [("unrolled", 3)]
